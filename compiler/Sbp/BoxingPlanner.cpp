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

#include <map>
#include <queue>

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
/// Orders layouts so that they can key a map.
struct LayoutLess {
  bool operator()(const NdSbp &a, const NdSbp &b) const {
    auto key = [](const Sbp &s) {
      return std::make_tuple(static_cast<int>(s.kind), s.isSplit() ? s.dim : 0,
                             s.isPartial() ? static_cast<int>(s.reduce) : 0);
    };
    for (size_t i = 0; i < a.size(); ++i)
      if (key(a[i]) != key(b[i]))
        return key(a[i]) < key(b[i]);
    return false;
  }
};

struct Cost {
  double seconds = 0, bytes = 0;
  bool operator<(const Cost &o) const {
    return seconds != o.seconds ? seconds < o.seconds : bytes < o.bytes;
  }
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
  double tensorBytes = static_cast<double>(elementBytes) * sbprt::numElements(shape);
  std::map<NdSbp, Cost, LayoutLess> best{{from, {}}};
  std::map<NdSbp, std::pair<NdSbp, BoxingStep>, LayoutLess> cameFrom;
  using Entry = std::pair<Cost, NdSbp>;
  auto later = [](const Entry &a, const Entry &b) { return b.first < a.first; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> frontier(later);
  frontier.push({{}, from});
  while (!frontier.empty()) {
    auto [cost, state] = frontier.top();
    frontier.pop();
    if (best[state] < cost)
      continue;
    if (!LayoutLess()(state, to) && !LayoutLess()(to, state))
      break;
    // Even an axis already at its target may have to change for a while:
    // gather to unblock an outer axis ([B, S(0)] -> [S(0), S(0)]), or
    // reduce-scatter first so that another axis moves less.
    for (size_t axis = 0; axis < state.size(); ++axis) {
      std::vector<Sbp> moves = {to[axis], Sbp::broadcast()};
      for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
        moves.push_back(Sbp::split(d));
      for (const Sbp &next : moves) {
        Hop hop{axis, state[axis], next};
        if (next == state[axis] || !sbprt::isDirectHop(state, hop))
          continue;
        NdSbp moved = state;
        moved[axis] = next;
        if (!sbprt::layoutFits(mesh, moved, shape))
          continue;
        BoxingStep step = costHop(mesh, state, hop, tensorBytes, cluster);
        Cost total{cost.seconds + step.seconds, cost.bytes + step.bytesPerRank};
        auto found = best.find(moved);
        if (found != best.end() && !(total < found->second))
          continue;
        best[moved] = total;
        cameFrom[moved] = {state, step};
        frontier.push({total, moved});
      }
    }
  }
  bool same = !LayoutLess()(from, to) && !LayoutLess()(to, from);
  if (!same && !cameFrom.count(to)) {
    error = "no sequence of collectives changes " + sbprt::toString(from) + " into " +
            sbprt::toString(to);
    return std::nullopt;
  }
  BoxingPlan plan;
  for (NdSbp at = to; cameFrom.count(at); at = cameFrom[at].first)
    plan.steps.insert(plan.steps.begin(), cameFrom[at].second);
  for (const BoxingStep &step : plan.steps) {
    plan.bytesPerRank += step.bytesPerRank;
    plan.seconds += step.seconds;
  }
  return plan;
}

} // namespace sbpc
