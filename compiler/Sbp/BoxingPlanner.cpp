// Boxing plans: Dijkstra over nd layouts.
//
// A state is an nd layout; a move changes one mesh axis to its target
// value, to B, or to a split of any dimension (detours that unblock hops an
// inner split of the same dimension forbids, or that make a later hop move
// less), and is allowed only when it is one direct collective and the new
// layout is valid. All-B is always reachable and the target is reachable
// from it outermost axis first, so a plan always exists. With k axes and a
// rank-r tensor there are at most (r + 3)^k states; it minimizes α-β time,
// then bytes.
#include "compiler/Sbp/BoxingPlanner.h"

#include "runtime/Tensor.h"

#include <queue>
#include <unordered_map>

namespace sbpc {

using sbprt::NdSbp;
using sbprt::Sbp;
using sbprt::Collective;
using sbprt::Hop;

BoxingStep costHop(const sbprt::Mesh &mesh, const NdSbp &current, const Hop &hop,
                   double tensorBytes, const Cluster &cluster) {
  int64_t p = mesh.shape[hop.axis];
  BoxingStep step{hop, p == 1 ? Collective::None : sbprt::collectiveOf(hop.from, hop.to), 0.0, 0.0};
  // T: the bytes of the tensor the hop's group holds together.
  double t = tensorBytes;
  for (size_t k = 0; k < current.size(); ++k)
    if (k != hop.axis && current[k].isSplit())
      t /= mesh.shape[k];
  int64_t steps = 0;
  switch (step.collective) {
  case Collective::AllGather:
  case Collective::ReduceScatter:
    step.bytesPerRank = (p - 1) * t / p;
    steps = p - 1;
    break;
  case Collective::AllReduce:
    step.bytesPerRank = 2.0 * (p - 1) * t / p;
    steps = 2 * (p - 1);
    break;
  case Collective::AllToAll:
    step.bytesPerRank = (p - 1) * t / (static_cast<double>(p) * p);
    steps = p - 1;
    break;
  case Collective::LocalSlice:
  case Collective::LocalZeroPad:
  case Collective::LocalKeepOne:
    // Nothing is sent but a copy is made: a slice writes its part, a
    // zero-pad or keep-one the whole group tensor.
    step.seconds = 2.0 * (step.collective == Collective::LocalSlice ? t / p : t) /
                   cluster.memoryBandwidth;
    break;
  case Collective::None:
    break;
  }
  if (steps)
    step.seconds = collectiveSeconds(cluster.linkOf(mesh, hop.axis), steps, step.bytesPerRank);
  return step;
}

namespace {
/// A layout packed into 64 bits, 4 per axis (B, P(sum), P(max), S(0..12)),
/// to key the search's tables without allocating.
uint64_t pack(const NdSbp &layout) {
  uint64_t key = 0;
  for (const Sbp &s : layout) {
    uint64_t code = s.isBroadcast() ? 0
                    : s.isPartial() ? 1 + static_cast<uint64_t>(s.reduce != Sbp::Reduce::Sum)
                                    : 3 + static_cast<uint64_t>(s.dim);
    key = (key << 4) | code;
  }
  return key;
}

struct Cost {
  double seconds = 0, bytes = 0;
  bool operator<(const Cost &o) const {
    return seconds != o.seconds ? seconds < o.seconds : bytes < o.bytes;
  }
};

struct State {
  NdSbp layout;
  Cost cost;
  int previous = -1;
  BoxingStep step;
};
} // namespace

std::optional<BoxingPlan> planBoxing(const sbprt::Mesh &mesh, const NdSbp &from, const NdSbp &to,
                                     const std::vector<int64_t> &shape, size_t elementBytes,
                                     const Cluster &cluster, std::string &error) {
  for (const NdSbp *layout : {&from, &to}) {
    std::string problem = sbprt::checkLayout(mesh, *layout, shape);
    if (!problem.empty()) {
      error = problem;
      return std::nullopt;
    }
  }
  // Packing needs at most 16 axes and splits of dimensions below 13.
  if (from.size() > 16 || shape.size() > 13) {
    error = "boxing plans support at most 16 mesh axes and 13 tensor dimensions";
    return std::nullopt;
  }
  double tensorBytes = static_cast<double>(elementBytes) * sbprt::numElements(shape);
  std::vector<State> states{{from, {}, -1, {}}};
  std::unordered_map<uint64_t, int> index{{pack(from), 0}};
  using Entry = std::pair<Cost, int>;
  auto later = [](const Entry &a, const Entry &b) { return b.first < a.first; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> frontier(later);
  frontier.push({{}, 0});
  uint64_t target = pack(to);
  int reached = pack(from) == target ? 0 : -1;
  std::vector<Sbp> moves;
  while (!frontier.empty() && reached < 0) {
    auto [cost, id] = frontier.top();
    frontier.pop();
    if (states[id].cost < cost)
      continue;
    if (pack(states[id].layout) == target) {
      reached = id;
      break;
    }
    // Even an axis already at its target may have to change for a while:
    // gather to unblock an outer axis ([B, S(0)] -> [S(0), S(0)]), or
    // reduce-scatter first so that another axis moves less.
    for (size_t axis = 0; axis < from.size(); ++axis) {
      moves.assign({to[axis], Sbp::broadcast()});
      for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
        moves.push_back(Sbp::split(d));
      for (const Sbp &next : moves) {
        const NdSbp &state = states[id].layout;
        Hop hop{axis, state[axis], next};
        if (next == state[axis] || !sbprt::isDirectHop(state, hop))
          continue;
        NdSbp moved = state;
        moved[axis] = next;
        if (!sbprt::layoutFits(mesh, moved, shape))
          continue;
        BoxingStep step = costHop(mesh, state, hop, tensorBytes, cluster);
        Cost total{cost.seconds + step.seconds, cost.bytes + step.bytesPerRank};
        auto [found, isNew] = index.try_emplace(pack(moved), static_cast<int>(states.size()));
        if (isNew)
          states.push_back({std::move(moved), total, id, step});
        else if (total < states[found->second].cost)
          states[found->second] = {std::move(moved), total, id, step};
        else
          continue;
        frontier.push({total, found->second});
      }
    }
  }
  if (reached < 0) {
    error = "no sequence of collectives changes " + sbprt::toString(from) + " into " +
            sbprt::toString(to);
    return std::nullopt;
  }
  BoxingPlan plan;
  for (int at = reached; states[at].previous >= 0; at = states[at].previous)
    plan.steps.insert(plan.steps.begin(), states[at].step);
  for (const BoxingStep &step : plan.steps) {
    plan.bytesPerRank += step.bytesPerRank;
    plan.seconds += step.seconds;
  }
  return plan;
}

} // namespace sbpc
