// --sbp-search: every layout chosen by a search (compiler/Search) instead
// of propagation, with what the search did recorded on the IR for the
// report.
#include "compiler/Search/SearchProblem.h"
#include "passes/Sbp/Passes.h"

#include <chrono>

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
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 return search(fn, context);
                               })))
      signalPassFailure();
  }

private:
  LogicalResult search(func::FuncOp fn, LayoutContext &context) {
    auto start = std::chrono::steady_clock::now();
    FailureOr<search::SearchProblem> problem =
        search::SearchProblem::build(fn, context.mesh, context.cluster, *context.plans);
    if (failed(problem))
      return failure();
    std::string error;
    std::optional<search::Solution> solution;
    if (algorithm == "exact")
      solution = search::solveExact(*problem, kExactBudget, error);
    else if (algorithm == "drec")
      solution = search::solveDRec(*problem);
    else
      solution = search::solveAuto(*problem, error, {memoryCheck});
    if (!solution)
      return fn.emitError() << error;
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
      node.op->setAttr(kRunnerUp,
                       b.getDictionaryAttr({b.getNamedAttr("operands", layoutsAttr(ctx, sig.operands)),
                                            b.getNamedAttr("results", layoutsAttr(ctx, sig.results)),
                                            b.getNamedAttr("plan_seconds",
                                                           b.getF64FloatAttr(runnerUp->second))}));
    }
    fn->setAttr(kFuncSearch,
                b.getDictionaryAttr(
                    {b.getNamedAttr("algorithm", b.getStringAttr(algorithm)),
                     b.getNamedAttr("candidates_evaluated",
                                    b.getI64IntegerAttr(solution->candidatesEvaluated)),
                     b.getNamedAttr("plan_seconds", b.getF64FloatAttr(solution->seconds)),
                     b.getNamedAttr("search_seconds", b.getF64FloatAttr(seconds)),
                     b.getNamedAttr("memory_bytes_per_rank",
                                    b.getF64FloatAttr(search::planMemory(*problem, solution->choice)))}));
    return success();
  }
};

} // namespace
