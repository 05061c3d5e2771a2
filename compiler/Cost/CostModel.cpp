// Cluster presets, cluster JSON, and α-β times.
#include "compiler/Cost/CostModel.h"
#include "compiler/Support/JsonFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace sbpc {
namespace {

/// Published peak numbers (f32 non-tensor-core, bf16 dense tensor-core, for
/// H100 SXM), rounded; the search needs their ratios more than their exact
/// values.
Cluster h100(const std::string &name, int64_t devices) {
  return Cluster{name, 67e12, 989e12, 80e9, 3.35e12, 8, {"nvlink", 3e-6, 450e9},
                 {"infiniband", 5e-6, 50e9}, devices};
}

std::vector<Cluster> presets() {
  return {
      // One host: every rank shares a memory system; MPI over shared memory.
      Cluster{"cpu", 1e11, 0, 24e9, 2e10, 1 << 20, {"shared-memory", 1e-6, 5e9},
              {"shared-memory", 1e-6, 5e9}, 0},
      // One DGX node: eight GPUs on NVLink.
      h100("dgx-h100x8", 8),
      // Many DGX nodes: NVLink inside a node, 400 Gb/s InfiniBand per GPU across.
      h100("dgx-h100-cluster", 0),
  };
}

/// Reads a positive number field of `object` within [1e-30, 1e30], where
/// every time and byte count the cost model makes of it stays finite; sets
/// `error` naming `path` otherwise.
bool readPositive(const nlohmann::json &object, const std::string &key, const std::string &where,
                  double &value, std::string &error) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number() ||
      !(it->get<double>() >= 1e-30 && it->get<double>() <= 1e30)) {
    error = where + ": '" + key + "' must be a positive number in [1e-30, 1e30]";
    return false;
  }
  value = it->get<double>();
  return true;
}

bool readLink(const nlohmann::json &root, const std::string &key, const std::string &path,
              Link &link, std::string &error) {
  auto it = root.find(key);
  if (it == root.end() || !it->is_object()) {
    error = path + ": '" + key + "' must be an object with 'alpha' and 'beta'";
    return false;
  }
  link.name = key;
  return readPositive(*it, "alpha", path + ": " + key, link.alpha, error) &&
         readPositive(*it, "beta", path + ": " + key, link.beta, error);
}

std::optional<Cluster> readClusterFile(const std::string &path, std::string &error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot open (and it is not a preset: " + [] {
      std::string names;
      for (const std::string &n : clusterPresets())
        names += (names.empty() ? "" : ", ") + n;
      return names;
    }() + ")";
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::optional<nlohmann::json> parsed = parseJson(text.str(), path, error);
  if (!parsed)
    return std::nullopt;
  const nlohmann::json &root = *parsed;
  if (!root.is_object()) {
    error = path + ": not a JSON object";
    return std::nullopt;
  }
  Cluster c;
  c.name = root.contains("name") && root["name"].is_string() ? root["name"].get<std::string>()
                                                              : path;
  auto device = root.find("device");
  if (device == root.end() || !device->is_object()) {
    error = path + ": 'device' must be an object with 'flops', 'memory_bytes', 'memory_bandwidth'";
    return std::nullopt;
  }
  double devicesPerNode = 0;
  if (!readPositive(*device, "flops", path + ": device", c.flops, error) ||
      !readPositive(*device, "memory_bytes", path + ": device", c.memoryBytes, error) ||
      !readPositive(*device, "memory_bandwidth", path + ": device", c.memoryBandwidth, error) ||
      !readPositive(root, "devices_per_node", path, devicesPerNode, error) ||
      !readLink(root, "intra_node", path, c.intraNode, error) ||
      !readLink(root, "inter_node", path, c.interNode, error))
    return std::nullopt;
  if (devicesPerNode > static_cast<double>(sbprt::kMaxDevices) ||
      devicesPerNode != std::floor(devicesPerNode)) {
    error = path + ": 'devices_per_node' must be an integer of at most " +
            std::to_string(sbprt::kMaxDevices);
    return std::nullopt;
  }
  c.devicesPerNode = static_cast<int64_t>(devicesPerNode);
  if (device->contains("bf16_flops") &&
      !readPositive(*device, "bf16_flops", path + ": device", c.bf16Flops, error))
    return std::nullopt;
  if (root.contains("devices")) {
    double devices = 0;
    if (!readPositive(root, "devices", path, devices, error))
      return std::nullopt;
    if (devices > static_cast<double>(sbprt::kMaxDevices) || devices != std::floor(devices)) {
      error = path + ": 'devices' must be an integer of at most " + std::to_string(sbprt::kMaxDevices);
      return std::nullopt;
    }
    c.devices = static_cast<int64_t>(devices);
  }
  return c;
}

} // namespace

const Link &Cluster::linkOf(const sbprt::Mesh &mesh, size_t axis) const {
  int64_t devices = 1;
  for (size_t k = mesh.shape.size(); k-- > axis;)
    devices *= mesh.shape[k];
  return devices <= devicesPerNode ? intraNode : interNode;
}

std::vector<std::string> clusterPresets() {
  std::vector<std::string> names;
  for (const Cluster &c : presets())
    names.push_back(c.name);
  return names;
}

std::string defaultCluster(const std::string &target, int64_t devices) {
  if (target != "cuda")
    return "cpu";
  return devices <= 8 ? "dgx-h100x8" : "dgx-h100-cluster";
}

std::optional<Cluster> loadCluster(const std::string &nameOrPath, std::string &error) {
  for (const Cluster &c : presets())
    if (c.name == nameOrPath)
      return c;
  return readClusterFile(nameOrPath, error);
}

double computeSeconds(const Cluster &cluster, double flops, double bytes, bool bf16) {
  return std::max(flops / cluster.flopsIn(bf16), bytes / cluster.memoryBandwidth);
}

double collectiveSeconds(const Link &link, int64_t steps, double bytesPerDevice) {
  return steps * link.alpha + bytesPerDevice / link.beta;
}

} // namespace sbpc
