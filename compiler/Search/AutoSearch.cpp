// The default search (`auto`).
//
// 1. Exact when the eliminated graph is small: variable elimination takes
//    chains and leaves first and merges parallel edges, so a model whose
//    blocks are narrow is solved exactly however many blocks it has.
// 2. Otherwise the N-D problem is too wide, but each mesh axis alone is
//    narrow: start from the better of D-Rec and an axis-by-axis exact solve
//    (D-Rec's rounds, each solved exactly instead of greedily), then
//    re-solve one axis at a time exactly with the others fixed, and move
//    single nodes to their best choice, until nothing improves. Each step
//    can only lower the cost, so auto is never worse than D-Rec. Where
//    even one axis is too wide (a training step), its solve holds the
//    widest values at the current plan's layouts and is exact over the
//    rest.
// 3. Memory: a plan that needs more than the device's memory per rank is
//    re-solved with a price on the bytes each choice defines, raised until
//    a plan fits or raising it stops finding leaner plans.
// Repeated layers cost little: identical ops share their candidates and
// every cost is memoized by type and layouts.
#include "compiler/Search/SearchProblem.h"
#include "compiler/Support/Diagnostics.h"

#include <cmath>
#include <map>

namespace sbpc::search {
namespace {

/// How much slower than the fastest cut a pipeline's cut to balance memory
/// may run before the search looks for a leaner plan that a faster cut
/// fits (planMemory's stretch).
constexpr double kStretchTolerated = 1.1;

/// What the solvers minimize: the plan's time plus the memory price.
double objective(SearchProblem &problem, const std::vector<size_t> &choice) {
  double seconds = evaluate(problem, choice);
  for (size_t n = 0; n < choice.size(); ++n)
    seconds += problem.nodeCost(n, choice[n]) - problem.nodes()[n].compute(choice[n]);
  return seconds;
}

/// The choices of each node that agree with `choice` on every mesh axis
/// but `axis`.
std::vector<std::vector<size_t>> freeOnAxis(SearchProblem &problem,
                                            const std::vector<size_t> &choice, size_t axis) {
  size_t axes = problem.mesh().shape.size();
  std::vector<std::vector<size_t>> allowed(problem.nodes().size());
  for (auto [n, node] : llvm::enumerate(problem.nodes()))
    for (size_t c = 0; c < node.numChoices(); ++c) {
      bool agrees = true;
      for (size_t j = 0; j < axes && agrees; ++j)
        agrees = j == axis || node.axisId(c, j) == node.axisId(choice[n], j);
      if (agrees)
        allowed[n].push_back(c);
    }
  return allowed;
}

/// The optimum over the `allowed` choices, or, where its tables exceed
/// the budget (a training step's blocks are wide: their forward values
/// wait for the backward), the optimum with the widest values held at
/// `plan`'s layouts; `variant` picks among equally wide ones.
std::optional<Solution> solveWithin(SearchProblem &problem, const ExactBudget &budget,
                                    const std::vector<std::vector<size_t>> &allowed,
                                    const std::vector<size_t> &plan, unsigned variant,
                                    size_t &evaluated) {
  std::string error;
  std::optional<Solution> solution = solveExact(problem, budget, error, &allowed);
  if (!solution) {
    HoldAt hold{plan, variant};
    solution = solveExact(problem, budget, error, &allowed, &hold);
  }
  if (solution)
    evaluated += solution->candidatesEvaluated;
  return solution;
}

/// D-Rec's rounds, each solved exactly: on axis a, choices agree with the
/// earlier rounds and are replicated on later axes where they can be.
std::optional<Solution> solveAxisByAxis(SearchProblem &problem, const ExactBudget &budget,
                                        const std::vector<size_t> &start, size_t &evaluated) {
  size_t axes = problem.mesh().shape.size();
  const std::vector<Node> &nodes = problem.nodes();
  std::vector<size_t> previous = start;
  std::optional<Solution> solution;
  for (size_t axis = 0; axis < axes; ++axis) {
    std::vector<std::vector<size_t>> allowed(nodes.size());
    for (auto [n, node] : llvm::enumerate(nodes)) {
      std::vector<size_t> agreeing;
      for (size_t c = 0; c < node.numChoices(); ++c) {
        bool agrees = true;
        for (size_t j = 0; j < axis && agrees; ++j)
          agrees = node.axisId(c, j) == node.axisId(previous[n], j);
        if (!agrees)
          continue;
        agreeing.push_back(c);
        bool replicated = true;
        for (size_t j = axis + 1; j < axes && replicated; ++j)
          replicated = node.replicatedOn(c, j);
        if (replicated)
          allowed[n].push_back(c);
      }
      if (allowed[n].empty())
        allowed[n] = std::move(agreeing);
    }
    solution = solveWithin(problem, budget, allowed, previous, 0, evaluated);
    if (!solution)
      return std::nullopt;
    previous = solution->choice;
  }
  return solution;
}

/// Exact re-solves of one mesh axis at a time with the others fixed,
/// while they lower the objective.
void improveByAxes(SearchProblem &problem, std::vector<size_t> &choice,
                   const ExactBudget &budget, size_t &evaluated) {
  size_t axes = problem.mesh().shape.size();
  if (axes < 2)
    return;
  double current = objective(problem, choice);
  for (int sweep = 0; sweep < 8; ++sweep) {
    bool improved = false;
    double before = current;
    for (size_t axis = 0; axis < axes; ++axis) {
      std::vector<std::vector<size_t>> allowed = freeOnAxis(problem, choice, axis);
      std::optional<Solution> solution =
          solveWithin(problem, budget, allowed, choice, sweep + 1, evaluated);
      if (!solution)
        continue;
      double seconds = objective(problem, solution->choice);
      if (seconds < current * (1 - 1e-9)) {
        choice = solution->choice;
        current = seconds;
        improved = true;
      }
    }
    // Another sweep when this one gained at least 0.01%: sweeps that hold
    // values (a different few each) find ever smaller gains.
    if (!improved || current > before * (1 - 1e-4))
      return;
  }
}

/// Moves single nodes to their best choice with the rest fixed, until no
/// move helps. A node's best move depends only on its candidates and the
/// layouts on its edges, so nodes of repeated layers in the same context
/// share one evaluation.
void improveByMoves(SearchProblem &problem, std::vector<size_t> &choice, size_t &evaluated) {
  const std::vector<Node> &nodes = problem.nodes();
  for (int sweep = 0; sweep < 4; ++sweep) {
    // (candidates, current choice and the layouts on every edge) -> best choice.
    std::map<std::pair<const Candidates *, std::vector<int>>, size_t> bestInContext;
    bool improved = false;
    for (size_t n = 0; n < nodes.size(); ++n) {
      const Node &node = nodes[n];
      if (node.numChoices() < 2)
        continue;
      std::vector<int> context{static_cast<int>(choice[n])};
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        const Source &source = problem.source(n, k);
        context.push_back(source.node < 0 ? source.fixed
                                          : nodes[source.node].outputLayout(choice[source.node],
                                                                            source.output));
      }
      for (size_t r = 0; r < node.outputs.size(); ++r) {
        context.push_back(-1);
        for (auto [m, k] : problem.uses(n, r))
          context.push_back(nodes[m].inputLayout(choice[m], k));
      }
      auto [it, isNew] =
          bestInContext.try_emplace({node.candidates, std::move(context)}, choice[n]);
      if (isNew) {
        double here = localCost(problem, choice, n, choice[n]);
        for (size_t c = 0; c < node.numChoices(); ++c) {
          ++evaluated;
          double there = localCost(problem, choice, n, c);
          if (there < here * (1 - 1e-9)) {
            here = there;
            it->second = c;
          }
        }
      }
      // A move found for another node in the same context is checked here:
      // nodes alike may still differ in what they pay (copies, shared reads).
      if (it->second != choice[n] &&
          (isNew || localCost(problem, choice, n, it->second) <
                        localCost(problem, choice, n, choice[n]) * (1 - 1e-9))) {
        choice[n] = it->second;
        improved = true;
      }
    }
    if (!improved)
      return;
  }
}

/// One solve at the current memory price; `warm`, when given, is where
/// the local improvement starts instead of D-Rec and the axis-by-axis solve.
/// Without one, a start that needs more memory than `memoryLimit` is
/// returned unimproved: memory binds, and improving it for time alone
/// would be undone by the priced solves.
std::optional<Solution> solveOnce(SearchProblem &problem, const AutoOptions &options,
                                  const std::vector<size_t> *warm, double memoryLimit) {
  // Small enough to solve exactly as a whole?
  std::string error;
  if (std::optional<Solution> exact = solveExact(problem, options.whole, error)) {
    exact->start = "exact";
    return exact;
  }
  ExactBudget perAxis{size_t(1) << 20, size_t(1) << 24};
  Solution best;
  size_t evaluated = 0;
  if (warm) {
    best.choice = *warm;
  } else {
    best = solveDRec(problem);
    best.start = "drec";
    evaluated = best.candidatesEvaluated;
    double cost = objective(problem, best.choice);
    auto consider = [&](const std::vector<size_t> &choice, const std::string &name) {
      if (double seconds = objective(problem, choice); seconds < cost) {
        best.choice = choice;
        best.start = name;
        cost = seconds;
      }
    };
    if (std::optional<Solution> axisByAxis =
            solveAxisByAxis(problem, perAxis, best.choice, evaluated))
      consider(axisByAxis->choice, "axis-by-axis");
    for (const auto &[name, choice] : options.starts)
      consider(choice, name);
    PipelineShare pipeline = options.pipelineWithin(memoryLimit);
    if (memoryLimit > 0 && planMemory(problem, best.choice, pipeline) > memoryLimit) {
      best.candidatesEvaluated = evaluated;
      return best;
    }
  }
  improveByAxes(problem, best.choice, perAxis, evaluated);
  improveByMoves(problem, best.choice, evaluated);
  best.candidatesEvaluated = evaluated;
  return best;
}

} // namespace

std::optional<Solution> solveAuto(SearchProblem &problem, std::string &error,
                                  const AutoOptions &options) {
  problem.setMemoryPrice(0);
  // (The pass cuts for the device; the plan must fit the share.)
  double device = options.checkMemory ? problem.cluster().memoryBytes : 0;
  double limit = device * options.memoryShare;
  PipelineShare pipeline = options.pipelineWithin(device);
  std::optional<Solution> best = solveOnce(problem, options, nullptr, limit);
  size_t evaluated = best->candidatesEvaluated;
  // On a pipeline whose cut balances memory, a plan that fits only as the
  // first stages take fewer blocks runs as slowly as its slowest chunk: it
  // costs its time stretched so (planMemory's stretch), and a leaner plan
  // that the cut by time fits may be faster.
  double stretch = 1;
  double memory = planMemory(problem, best->choice, pipeline, &stretch);
  if (limit > 0 && (memory > limit || stretch > kStretchTolerated)) {
    // Price bytes so that the plan's memory weighs as much as its time,
    // then raise the price until a plan fits (without a stretch beyond
    // kStretchTolerated), each solve starting from the last; of those
    // that fit, the fastest stretched. (The price is on the whole plan's
    // bytes, which a pipeline's first stage holds part of.)
    double price = evaluate(problem, best->choice) / planMemory(problem, best->choice);
    std::optional<Solution> fitting;
    double fittingSeconds = 0;
    auto consider = [&](const Solution &plan, double needs, double by) {
      if (needs > limit)
        return;
      double seconds = evaluate(problem, plan.choice) * by;
      if (!fitting || seconds < fittingSeconds) {
        fitting = plan;
        fittingSeconds = seconds;
      }
    };
    consider(*best, memory, stretch);
    std::vector<size_t> start = best->choice, unfitChoice = best->choice;
    double unfitPrice = 0, fitPrice = 0;
    int stalled = 0;
    // (Until a plan fits unstretched: a higher price buys only leaner,
    // slower plans.)
    for (int attempt = 0; attempt < 16 && fitPrice == 0 && stalled < 3; ++attempt, price *= 4) {
      problem.setMemoryPrice(price);
      std::optional<Solution> priced = solveOnce(problem, options, &start, 0);
      start = priced->choice;
      evaluated += priced->candidatesEvaluated;
      double by = 1;
      double needs = planMemory(problem, priced->choice, pipeline, &by);
      consider(*priced, needs, by);
      if (needs <= limit && by <= kStretchTolerated) {
        fitPrice = price;
      } else {
        unfitChoice = priced->choice;
        unfitPrice = price;
      }
      // Three raises in a row that find nothing 1% leaner than the leanest
      // so far: the price no longer buys memory (a 96-layer step took 16
      // re-solves, a minute, to say so).
      stalled = needs < memory * 0.99 ? 0 : stalled + 1;
      memory = std::min(memory, needs);
    }
    // Each raise is fourfold, and a solve at a high price can end far from
    // the fastest plan that fits (a 96-layer step took a plan of a third
    // of the device at 25% more time): one more solve at the geometric
    // mean of the last price whose plan did not fit (a 64th of the first
    // where that fit) and the one that fit, from the last plan that did
    // not fit, is kept where its plan fits and is faster (there 20% faster;
    // more solves gained under 1% more, at 8 s each).
    if (fitPrice > 0) {
      problem.setMemoryPrice(std::sqrt((unfitPrice > 0 ? unfitPrice : fitPrice / 64) * fitPrice));
      std::optional<Solution> priced = solveOnce(problem, options, &unfitChoice, 0);
      evaluated += priced->candidatesEvaluated;
      double by = 1;
      double needs = planMemory(problem, priced->choice, pipeline, &by);
      consider(*priced, needs, by);
    }
    problem.setMemoryPrice(0);
    if (!fitting) {
      error =
          "no plan found fits device memory: the leanest found needs " + bytesText(memory) +
          " per rank" +
          (pipeline.cut.stages <= 1 ? std::string()
                                    : " (the fullest of " + std::to_string(pipeline.cut.stages) +
                                          " pipeline stages, cut " +
                                          (!pipeline.starts.empty() ? "by hand)"
                                           : options.cutForMemory   ? "to balance memory)"
                                                                    : "by time)")) +
          ", a device of cluster " + problem.cluster().name + " has " + bytesText(device) +
          (options.memoryShare < 1 ? " (the search kept to " + bytesText(limit) +
                                         ", as its estimates of the stages as cut fell short)"
                                   : "");
      return std::nullopt;
    }
    fitting->start = best->start;
    best = fitting;
  }
  best->seconds = evaluate(problem, best->choice);
  best->candidatesEvaluated = evaluated;
  return best;
}

} // namespace sbpc::search
