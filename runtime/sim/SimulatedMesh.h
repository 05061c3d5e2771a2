// Every rank's local tensor held in one process: the reference semantics of
// SBP layouts and of the per-axis collectives that change them. The MPI and
// NCCL communicators are tested against it; it is not fast.
#pragma once

#include "runtime/Layout.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <vector>

namespace sbprt::sim {

/// The local tensor of every rank, indexed by rank.
using Shards = std::vector<Tensor>;

/// Gives every rank its part of `global` under `layout`. Partial layouts get
/// a random decomposition from `seed` (parts that sum, or max, to the value;
/// exact for small dyadic values), so that a consumer treating P as B fails.
Shards distribute(const Tensor &global, const Mesh &mesh, const NdSbp &layout, uint64_t seed);

/// The global tensor that `shards` under `layout` stand for: splits are
/// concatenated, partials reduced, broadcasts taken from the first replica.
Tensor assemble(const Shards &shards, const Mesh &mesh, const NdSbp &layout);

/// Applies `hop` to every group of the axis, in place. The layout before the
/// hop must admit it (isDirectHop).
void applyHop(Shards &shards, const Mesh &mesh, const Hop &hop);

} // namespace sbprt::sim
