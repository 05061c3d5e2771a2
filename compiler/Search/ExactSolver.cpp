// The exact search: dynamic programming over program order.
//
// After node i, a state gives a layout to every live value (defined at or
// before i, used after i). The cheapest way to reach a state is all the
// future needs, so states reached twice keep the cheaper prefix. A free
// argument takes the layout its first consumer's choice wants, at no cost
// (a model choice: its best layout is what some consumer wants). Time and
// memory are (states per step) x (choices per node) x (operands); a cap on
// live states keeps it an oracle for small graphs.
#include "compiler/Search/SearchProblem.h"

#include <map>

using namespace mlir;

namespace sbpc::search {
namespace {

/// Layouts as small integers, so that a state is a short vector.
class Layouts {
public:
  int id(const sbprt::NdSbp &layout) {
    auto [it, inserted] = ids.try_emplace(sbprt::toString(layout), static_cast<int>(all.size()));
    if (inserted)
      all.push_back(layout);
    return it->second;
  }
  const sbprt::NdSbp &operator[](int id) const { return all[id]; }

private:
  std::map<std::string, int> ids;
  std::vector<sbprt::NdSbp> all;
};

struct Entry {
  double seconds;
  size_t previous; // index in the previous step's states
  size_t choice;
};

struct Step {
  std::vector<Value> live; // the values a state's layouts are for, in order
  std::vector<std::vector<int>> states;
  std::vector<Entry> entries;
};

} // namespace

std::optional<Solution> solveExact(SearchProblem &problem, size_t maxStates, std::string &error) {
  Layouts layouts;
  // Fixed arguments are live from the start with their one layout.
  Step start;
  for (BlockArgument arg : problem.function().getArguments())
    if (problem.fixedLayout(arg) && problem.isUsed(arg))
      start.live.push_back(arg);
  std::vector<int> initial;
  for (Value v : start.live)
    initial.push_back(layouts.id(*problem.fixedLayout(v)));
  start.states.push_back(initial);
  start.entries.push_back({0.0, 0, 0});

  std::vector<Step> steps{std::move(start)};
  Solution solution;
  const std::vector<Node> &nodes = problem.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node &node = nodes[i];
    const Step &before = steps.back();
    llvm::DenseMap<Value, size_t> position;
    for (auto [k, v] : llvm::enumerate(before.live))
      position[v] = k;
    // The values live after this node: survivors, then new ones in a fixed order.
    Step after;
    for (Value v : before.live)
      if (problem.lastUse(v) > i)
        after.live.push_back(v);
    std::vector<Value> freeArgs;
    for (Value operand : node.op->getOperands())
      if (!position.count(operand) && isa<BlockArgument>(operand) &&
          llvm::find(freeArgs, operand) == freeArgs.end())
        freeArgs.push_back(operand);
    for (Value v : freeArgs)
      if (problem.lastUse(v) > i)
        after.live.push_back(v);
    for (Value result : node.op->getResults())
      if (problem.lastUse(result) > i)
        after.live.push_back(result);

    std::map<std::vector<int>, size_t> index;
    for (size_t s = 0; s < before.states.size(); ++s) {
      const std::vector<int> &state = before.states[s];
      for (size_t c = 0; c < node.choices.size(); ++c) {
        const NdSignature &sig = node.choices[c];
        ++solution.candidatesEvaluated;
        double seconds = before.entries[s].seconds + node.compute[c];
        llvm::DenseMap<Value, int> chosen; // free arguments' layouts
        for (auto [k, operand] : llvm::enumerate(node.op->getOperands())) {
          auto at = position.find(operand);
          int have;
          if (at != position.end()) {
            have = state[at->second];
          } else if (auto it = chosen.find(operand); it != chosen.end()) {
            have = it->second;
          } else {
            chosen[operand] = layouts.id(sig.operands[k]);
            continue;
          }
          seconds += problem.boxingSeconds(operand, layouts[have], sig.operands[k]);
        }
        std::vector<int> next;
        for (Value v : after.live) {
          if (auto at = position.find(v); at != position.end())
            next.push_back(state[at->second]);
          else if (auto it = chosen.find(v); it != chosen.end())
            next.push_back(it->second);
          else
            next.push_back(layouts.id(sig.results[cast<OpResult>(v).getResultNumber()]));
        }
        auto [it, inserted] = index.try_emplace(next, after.states.size());
        if (inserted) {
          after.states.push_back(std::move(next));
          after.entries.push_back({seconds, s, c});
        } else if (seconds < after.entries[it->second].seconds) {
          after.entries[it->second] = {seconds, s, c};
        }
      }
    }
    solution.statesExplored += after.states.size();
    if (after.states.size() > maxStates) {
      error = "exact search needs more than " + std::to_string(maxStates) +
              " live states at op " + std::to_string(i) + " ('" +
              node.op->getName().getStringRef().str() + "'); the graph is too large for it";
      return std::nullopt;
    }
    steps.push_back(std::move(after));
  }

  // The cheapest final state, then the choices that led to it.
  const Step &last = steps.back();
  size_t best = 0;
  for (size_t s = 1; s < last.entries.size(); ++s)
    if (last.entries[s].seconds < last.entries[best].seconds)
      best = s;
  solution.seconds = last.entries[best].seconds;
  solution.choice.assign(nodes.size(), 0);
  for (size_t i = nodes.size(), s = best; i > 0; --i) {
    const Entry &entry = steps[i].entries[s];
    solution.choice[i - 1] = entry.choice;
    s = entry.previous;
  }
  // The layouts free arguments took: what their first consumer's choice wanted.
  llvm::DenseSet<Value> seen;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (auto [k, operand] : llvm::enumerate(nodes[i].op->getOperands()))
      if (isa<BlockArgument>(operand) && !problem.fixedLayout(operand) && seen.insert(operand).second)
        solution.freeArguments.push_back(
            {operand, nodes[i].choices[solution.choice[i]].operands[k]});
  return solution;
}

} // namespace sbpc::search
