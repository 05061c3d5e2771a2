// Which collectives a job of GPU ranks uses: NCCL, or MPI through host
// buffers. Every rank must choose alike (a rank that joins NCCL waits for
// its whole group), and nodes may differ in GPUs, ranks per node and
// environment, so each rank says what it has and wants
// (Communicator::fromEveryRank) and all decide the same from all of it.
#pragma once

#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace sbprt::comm {

/// What a rank says of itself: its node, its GPU's UUID, and whether it
/// wants NCCL (more than one rank, and SBPRT_COMM not mpi).
struct GpuRank {
  std::string host, gpu;
  bool wantsNccl = false;

  std::string encode() const { return (wantsNccl ? "1 " : "0 ") + gpu + " " + host; }
  static GpuRank decode(const std::string &text) {
    GpuRank rank;
    std::istringstream in(text);
    char wants = '0';
    in >> wants >> rank.gpu >> std::ws;
    std::getline(in, rank.host);
    rank.wantsNccl = wants == '1';
    return rank;
  }
};

/// NCCL when every rank wants it and no two ranks share a GPU (NCCL refuses
/// that; a GPU is its UUID, whatever node names its host has); MPI otherwise, with `conflict` saying why when some rank wanted
/// NCCL.
inline bool chooseNccl(const std::vector<GpuRank> &ranks, std::string &conflict) {
  bool anyWants = false;
  conflict.clear();
  std::set<std::string> gpus; // UUIDs: unique across machines
  for (size_t r = 0; r < ranks.size(); ++r) {
    anyWants |= ranks[r].wantsNccl;
    if (conflict.empty() && !ranks[r].wantsNccl)
      conflict = "rank " + std::to_string(r) + " does not (SBPRT_COMM=mpi)";
    if (!gpus.insert(ranks[r].gpu).second)
      conflict = "rank " + std::to_string(r) + " shares GPU " + ranks[r].gpu + " on " +
                 ranks[r].host + " with another rank, and NCCL needs a GPU for each";
  }
  if (!anyWants)
    conflict.clear();
  return anyWants && conflict.empty();
}

} // namespace sbprt::comm
