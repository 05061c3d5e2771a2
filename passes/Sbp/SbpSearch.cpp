// --sbp-search: every layout chosen by a search (compiler/Search) instead
// of propagation, with what the search did recorded on the IR for the
// report.
#include "compiler/Search/SearchProblem.h"
#include "compiler/Support/ArgAttrs.h"
#include "compiler/Support/Diagnostics.h"
#include "passes/Sbp/Passes.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPSEARCH
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;

namespace {

/// The oracle's budget: tables of up to 8M entries, 32M in all (256 MiB).
constexpr search::ExactBudget kExactBudget{size_t(1) << 23, size_t(1) << 25};

class SbpSearchPass : public sbpc::sbp::impl::SbpSearchBase<SbpSearchPass> {
public:
  using SbpSearchBase::SbpSearchBase;

  void runOnOperation() override {
    if (algorithm != "auto" && algorithm != "drec" && algorithm != "exact") {
      getOperation().emitError() << "--sbp-search: unknown algorithm '" << algorithm
                                 << "' (auto, drec or exact)";
      return signalPassFailure();
    }
    if (zero < 0 || zero > 3) {
      getOperation().emitError() << "--sbp-search: ZeRO stage must be 0, 1, 2 or 3, got "
                                 << static_cast<int64_t>(zero);
      return signalPassFailure();
    }
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 return search(fn, context);
                               })))
      signalPassFailure();
  }

private:
  /// The plans marked on the function to start from (sbp::kStarts), as
  /// choices of the problem's nodes; the marks are removed. A plan that
  /// leaves a node unmarked, or marks one with a signature the node does
  /// not have, is left out.
  static std::vector<std::pair<std::string, std::vector<size_t>>>
  takeStarts(search::SearchProblem &problem) {
    func::FuncOp fn = problem.function();
    std::map<std::string, std::vector<size_t>> plans;
    std::set<std::string> broken;
    const std::vector<search::Node> &nodes = problem.nodes();
    for (auto [n, node] : llvm::enumerate(nodes)) {
      DictionaryAttr marks =
          node.op ? node.op->getAttrOfType<DictionaryAttr>(kStarts)
                  : fn.getArgAttrOfType<DictionaryAttr>(
                        cast<BlockArgument>(node.argument).getArgNumber(), kStarts);
      if (!marks)
        continue;
      for (NamedAttribute mark : marks) {
        std::string name = mark.getName().str();
        std::vector<size_t> &plan = plans[name];
        plan.resize(nodes.size(), std::numeric_limits<size_t>::max());
        auto toLayouts = [](Attribute list) {
          std::vector<sbprt::NdSbp> layouts;
          for (Attribute layout : cast<ArrayAttr>(list))
            layouts.push_back(cast<NdSbpAttr>(layout).toLayout());
          return layouts;
        };
        std::vector<sbprt::NdSbp> operands, results;
        if (auto pair = dyn_cast<ArrayAttr>(mark.getValue())) {
          operands = toLayouts(pair[0]);
          results = toLayouts(pair[1]);
        } else {
          results = {cast<NdSbpAttr>(mark.getValue()).toLayout()};
        }
        for (size_t c = 0; c < node.numChoices() && plan[n] == std::numeric_limits<size_t>::max();
             ++c)
          if (node.choice(c).results == results && (!node.op || node.choice(c).operands == operands))
            plan[n] = c;
      }
    }
    std::vector<std::pair<std::string, std::vector<size_t>>> starts;
    for (auto &[name, plan] : plans) {
      bool complete = true;
      for (auto [n, node] : llvm::enumerate(nodes))
        if (plan[n] == std::numeric_limits<size_t>::max()) {
          if (node.numChoices() != 1)
            complete = false;
          plan[n] = 0;
        }
      if (complete)
        starts.push_back({name, std::move(plan)});
    }
    fn.walk([](Operation *op) { op->removeAttr(kStarts); });
    ArgAttrEdits argAttrs(fn);
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      argAttrs.set(i, kStarts, nullptr);
    return starts;
  }

  LogicalResult search(func::FuncOp fn, LayoutContext &context) {
    auto start = std::chrono::steady_clock::now();
    FailureOr<search::SearchProblem> problem =
        search::SearchProblem::build(fn, context.mesh, context.cluster, *context.plans,
                                     microBatchTies);
    if (failed(problem))
      return failure();
    std::string error;
    std::optional<search::Solution> solution;
    search::AutoOptions options;
    if (stages < 1)
      return fn.emitError() << "sbp-search: stages must be at least 1, got " << stages.getValue();
    options.checkMemory = memoryCheck;
    if (!(memoryShare > 0 && memoryShare <= 1)) {
      char given[32];
      std::snprintf(given, sizeof given, "%g", memoryShare.getValue());
      return fn.emitError() << "sbp-search: memory-share must be in (0, 1], got " << given;
    }
    options.memoryShare = memoryShare;
    // (Without micro-batches, every stage holds one, under any schedule.)
    options.pipeline.cut = CutShape::of(schedule, stages, 1, 0, 0);
    if (!isPipelineSchedule(schedule))
      return fn.emitError() << "sbp-search: schedule must be " << kPipelineSchedules << ", got '"
                            << schedule.getValue() << "'";
    // The micro-batches the first stage holds between their forward and
    // backward.
    int64_t microBatches = std::max<int64_t>(1, static_cast<int64_t>(microBatchOps(fn).size()));
    if (stages > 1 && microBatches > 1) {
      if (std::string error = pipelineScheduleError(schedule, stages, chunks, microBatches);
          !error.empty())
        return fn.emitError() << "sbp-search: " << error;
      options.pipeline.inFlight = stageInFlight(schedule, stages, chunks, microBatches);
      options.pipeline.cut = CutShape::of(schedule, stages, chunks, microBatches, 0);
    }
    // What planMemory says of a plan here: the fullest stage of the cut
    // --sbp-pipeline will make (by memory where the fastest would not fit,
    // unless `cut-for-memory=false`), or of the cut by hand. Starts that
    // make none are refused here as the pass would refuse them (a plan
    // checked on another cut would be no answer).
    options.pipeline.starts.assign(starts.begin(), starts.end());
    options.cutForMemory = cutForMemory;
    if (stages > 1)
      if (std::string error = handCutError(problem->pipelineBlockNames(), options.pipeline.starts,
                                           chunks > 1 ? "chunk" : "stage");
          !error.empty())
        return fn.emitOpError() << error;
    search::PipelineShare pipeline =
        options.pipelineWithin(memoryCheck ? problem->cluster().memoryBytes : 0);
    options.starts = takeStarts(*problem);
    // ZeRO works on the axes the plan splits the batch on. Guesses: those
    // of each start, the cheapest without ZeRO first (and of the fixed
    // inputs alone without starts). The search solves with a guess, and
    // again from its plan while the plan splits the batch elsewhere (three
    // solves at most; a plan still off is costed and checked against the
    // memory as ZeRO will make it); a guess under which no plan fits the
    // memory gives way to the next.
    std::vector<std::pair<double, std::vector<size_t>>> byCost;
    for (const auto &[name, plan] : options.starts)
      byCost.push_back({search::evaluate(*problem, plan), problem->dataParallelAxes(plan)});
    std::stable_sort(byCost.begin(), byCost.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<std::vector<size_t>> guesses;
    for (auto &[seconds, axes] : byCost)
      if (llvm::find(guesses, axes) == guesses.end())
        guesses.push_back(std::move(axes));
    if (guesses.empty())
      guesses.push_back(
          problem->dataParallelAxes(std::vector<size_t>(problem->nodes().size(), 0)));
    size_t nextGuess = 1;
    std::vector<size_t> axes = guesses.front();
    for (int round = 0;; ++round) {
      problem->setZero(static_cast<int>(zero), axes);
      if (algorithm == "exact")
        solution = search::solveExact(*problem, kExactBudget, error);
      else if (algorithm == "drec")
        solution = search::solveDRec(*problem);
      else
        solution = search::solveAuto(*problem, error, options);
      if (!solution && zero > 0 && nextGuess < guesses.size()) {
        axes = guesses[nextGuess++];
        round = -1;
        continue;
      }
      if (!solution)
        return fn.emitError() << error;
      std::vector<size_t> found = problem->dataParallelAxes(solution->choice);
      if (zero == 0 || found == axes)
        break;
      axes = std::move(found);
      if (round == 2) {
        // Costed (and, memory-aware, checked) as ZeRO will make it: on the
        // axes the plan splits the batch on, not those it was solved for.
        problem->setZero(static_cast<int>(zero), axes);
        solution->seconds = search::evaluate(*problem, solution->choice);
        double bytes = search::planMemory(*problem, solution->choice, pipeline);
        double limit = problem->cluster().memoryBytes * memoryShare;
        if (algorithm == "auto" && memoryCheck && bytes > limit) {
          if (nextGuess < guesses.size()) {
            axes = guesses[nextGuess++];
            round = -1;
            continue;
          }
          return fn.emitError() << "no plan found fits device memory: the last plan needs "
                                << bytesText(bytes) << " per rank under ZeRO on the axes it "
                                << "splits the batch on, over the device's " << bytesText(limit);
        }
        break;
      }
      options.starts.push_back({solution->start, solution->choice});
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    search::applySolution(*problem, *solution, context.meshOp);

    MLIRContext *ctx = fn.getContext();
    Builder b(ctx);
    for (auto [n, node] : llvm::enumerate(problem->nodes())) {
      if (!node.op || isa<ConstraintOp>(node.op))
        continue;
      std::optional<std::pair<size_t, double>> runnerUp = search::runnerUp(*problem, *solution, n);
      if (!runnerUp)
        continue;
      const NdSignature &sig = node.choice(runnerUp->first);
      DictionaryAttr mark =
          b.getDictionaryAttr({b.getNamedAttr("operands", layoutsAttr(ctx, sig.operands)),
                               b.getNamedAttr("results", layoutsAttr(ctx, sig.results)),
                               b.getNamedAttr("plan_seconds", b.getF64FloatAttr(runnerUp->second))});
      // A tied micro-batch copy's runner-up is its original's: all of them
      // change together.
      for (Operation *op : llvm::concat<Operation *const>(ArrayRef(node.op), node.copies))
        op->setAttr(kRunnerUp, mark);
    }
    fn->setAttr(
        kFuncSearch,
        b.getDictionaryAttr(
            {b.getNamedAttr("algorithm", b.getStringAttr(algorithm)),
             b.getNamedAttr("candidates_evaluated",
                            b.getI64IntegerAttr(solution->candidatesEvaluated)),
             b.getNamedAttr("plan_seconds", b.getF64FloatAttr(solution->seconds)),
             b.getNamedAttr("start", b.getStringAttr(solution->start.empty() ? algorithm.getValue()
                                                                             : solution->start)),
             b.getNamedAttr("search_seconds", b.getF64FloatAttr(seconds)),
             b.getNamedAttr("tied_copies", b.getI64IntegerAttr(problem->tiedCopies())),
             b.getNamedAttr("memory_bytes_per_rank", b.getF64FloatAttr(search::planMemory(
                                                         *problem, solution->choice, pipeline)))}));
    return success();
  }
};

} // namespace
