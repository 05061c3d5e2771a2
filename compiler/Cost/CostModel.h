// The cost model: a cluster description (device speed and memory, and the
// latency/bandwidth of the links each mesh axis uses) and the time of
// computations and collectives on it (DESIGN.md §5).
#pragma once

#include "runtime/Layout.h"

#include <optional>
#include <string>
#include <vector>

namespace sbpc {

/// A link's α-β model: a message of n bytes takes alpha + n / beta seconds.
struct Link {
  std::string name;
  double alpha = 0; // seconds per message step
  double beta = 0;  // bytes per second per device
};

struct Cluster {
  std::string name;
  double flops = 0;           // FLOP/s of one device (f32)
  double bf16Flops = 0;       // FLOP/s in bf16 (tensor cores); 0: as in f32
  double memoryBytes = 0;     // memory of one device
  double memoryBandwidth = 0; // bytes/s of one device's memory
  int64_t devicesPerNode = 1;
  Link intraNode, interNode;
  /// How many devices the cluster has; 0 for as many as a mesh asks.
  int64_t devices = 0;

  /// FLOP/s computing in bf16 or in f32.
  double flopsIn(bool bf16) const { return bf16 && bf16Flops > 0 ? bf16Flops : flops; }

  /// The link mesh axis `axis` uses: axes are laid out innermost (last)
  /// first, filling a node before crossing to the next.
  const Link &linkOf(const sbprt::Mesh &mesh, size_t axis) const;
};

/// Names of the built-in presets.
std::vector<std::string> clusterPresets();

/// The preset a plan is costed on when no cluster is named: the CUDA
/// target's are H100s (one DGX node while the mesh fits in one, else the
/// cluster of them); any other plan's the CPU.
std::string defaultCluster(const std::string &target, int64_t devices);

/// A preset by name, or a cluster read from a JSON file; nullopt with a
/// one-line `error` naming the field or the preset list otherwise.
std::optional<Cluster> loadCluster(const std::string &nameOrPath, std::string &error);

/// Time of an op with `flops` floating-point operations touching `bytes` of
/// memory on one device, computing in bf16 or f32: whichever bound is
/// larger.
double computeSeconds(const Cluster &cluster, double flops, double bytes, bool bf16 = false);

/// Time of one ring collective step pattern: `steps` latencies plus
/// `bytesPerDevice` over the link.
double collectiveSeconds(const Link &link, int64_t steps, double bytesPerDevice);

} // namespace sbpc
