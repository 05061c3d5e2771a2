// MindSpore's double-recursive (D-Rec) search, as a baseline.
//
// The outer recursion cuts the devices: one round per mesh axis, outermost
// first, each cutting every op into that axis's size (an axis of 16 is
// four bisections in MindSpore; here they must agree, since one mesh axis
// carries one SBP per tensor, so they are one round). The inner recursion
// visits the ops heaviest first (by their compute on one device) and cuts
// each the cheapest way given the neighbours already cut in this round:
// its compute on this round's local shapes plus the boxing to and from
// those neighbours. Axes not yet cut stay replicated. A round touches each
// node and edge once: neighbours come from the problem's edge lists.
#include "compiler/Search/SearchProblem.h"

#include <numeric>

namespace sbpc::search {

Solution solveDRec(SearchProblem &problem) {
  const std::vector<Node> &nodes = problem.nodes();
  size_t axes = problem.mesh().shape.size();
  Solution solution;

  // Heaviest first: a node's weight is its most expensive choice (its
  // compute on one device, where replication is a choice).
  std::vector<double> weight(nodes.size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (size_t c = 0; c < nodes[n].numChoices(); ++c)
      weight[n] = std::max(weight[n], nodes[n].compute(c));
  std::vector<size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return weight[a] > weight[b]; });

  // A fixed argument as a round sees it: its layout on the axes cut so
  // far, replicated on the others.
  std::map<std::pair<int, size_t>, int> fixedSoFar;
  auto fixedLayout = [&](int id, size_t axis) {
    auto [it, isNew] = fixedSoFar.try_emplace({id, axis}, 0);
    if (isNew) {
      sbprt::NdSbp layout = problem.layout(id);
      for (size_t j = axis + 1; j < axes; ++j)
        layout[j] = sbprt::Sbp::broadcast();
      it->second = problem.layoutId(layout);
    }
    return it->second;
  };

  std::vector<size_t> previous(nodes.size(), 0), current(nodes.size(), 0);
  std::vector<char> cut(nodes.size(), 0);
  for (size_t axis = 0; axis < axes; ++axis) {
    std::fill(cut.begin(), cut.end(), 0);
    for (size_t n : order) {
      const Node &node = nodes[n];
      // Candidates: agree with the earlier rounds, replicated on later axes
      // (any on later axes when the op cannot be replicated there).
      auto agrees = [&](size_t c) {
        for (size_t j = 0; j < axis; ++j)
          if (node.axisId(c, j) != node.axisId(previous[n], j))
            return false;
        return true;
      };
      auto replicatedLater = [&](size_t c) {
        for (size_t j = axis + 1; j < axes; ++j)
          if (!node.replicatedOn(c, j))
            return false;
        return true;
      };
      bool anyReplicated = false;
      for (size_t c = 0; c < node.numChoices() && !anyReplicated; ++c)
        anyReplicated = agrees(c) && replicatedLater(c);
      double best = std::numeric_limits<double>::infinity();
      for (size_t c = 0; c < node.numChoices(); ++c) {
        if (!agrees(c) || (anyReplicated && !replicatedLater(c)))
          continue;
        ++solution.candidatesEvaluated;
        double seconds = node.compute(c);
        for (size_t k = 0; k < node.inputs.size(); ++k) {
          const Source &source = problem.source(n, k);
          if (source.node < 0)
            seconds += problem.inputSeconds(n, k, c, fixedLayout(source.fixed, axis));
          else if (cut[source.node])
            seconds += problem.inputSeconds(
                n, k, c, nodes[source.node].outputLayout(current[source.node], source.output));
        }
        for (size_t r = 0; r < node.outputs.size(); ++r)
          for (auto [m, k] : problem.uses(n, r))
            if (cut[m])
              seconds += problem.inputSeconds(m, k, current[m], node.outputLayout(c, r));
        if (seconds < best) {
          best = seconds;
          current[n] = c;
        }
      }
      cut[n] = 1;
    }
    previous = current;
  }
  solution.choice = current;
  solution.seconds = evaluate(problem, solution.choice);
  return solution;
}

} // namespace sbpc::search
