// Plans a change of nd-SBP layout as the cheapest sequence of per-axis hops,
// each one collective on one mesh axis's groups (DESIGN.md §4).
#pragma once

#include "compiler/Cost/CostModel.h"
#include "runtime/Layout.h"

#include <optional>
#include <string>
#include <vector>

namespace sbpc {

struct BoxingStep {
  sbprt::Hop hop;
  sbprt::Collective collective = sbprt::Collective::None;
  double bytesPerRank = 0;
  double seconds = 0;
};

struct BoxingPlan {
  std::vector<BoxingStep> steps;
  double bytesPerRank = 0;
  double seconds = 0;
};

/// The cost of one hop on its axis: the collective, the bytes each rank
/// sends (ring algorithms), and the α-β time, or for a local change (a
/// slice, a zero-pad) the time of its memory traffic; nothing on an axis of
/// one device. `current` is the layout before the hop, `tensorBytes` the
/// size of the global tensor.
BoxingStep costHop(const sbprt::Mesh &mesh, const sbprt::NdSbp &current,
                   const sbprt::Hop &hop, double tensorBytes, const Cluster &cluster);

/// The cheapest plan from `from` to `to` for a tensor of `shape` whose
/// elements take `elementBytes`. Every intermediate layout is valid and
/// every hop direct. Fails (with `error`) only when a layout is invalid.
std::optional<BoxingPlan> planBoxing(const sbprt::Mesh &mesh, const sbprt::NdSbp &from,
                                     const sbprt::NdSbp &to, const std::vector<int64_t> &shape,
                                     size_t elementBytes, const Cluster &cluster,
                                     std::string &error);

} // namespace sbpc
