// --sbp-propagate: gives every value a layout, greedily in program order.
//
// Propagation is consistency with the neighbours, not optimization: each op
// takes the signature that needs the least boxing (α-β time) from the
// layouts its operands already have, then the least compute on local
// shapes. Trading compute for communication across the graph is the
// search's job. Values without a layout yet (unseeded arguments) take what
// their first consumer wants at no cost. One pass over the ops; per op,
// every nd signature (a few dozen) with memoized boxing plans.
#include "compiler/Sbp/Signatures.h"
#include "compiler/Support/ArgAttrs.h"
#include "runtime/Tensor.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "passes/Sbp/Passes.h"


namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPPROPAGATE
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;

namespace {

class SbpPropagatePass : public sbpc::sbp::impl::SbpPropagateBase<SbpPropagatePass> {
public:
  using SbpPropagateBase::SbpPropagateBase;

  void runOnOperation() override {
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 return propagate(fn, context);
                               })))
      signalPassFailure();
  }

private:
  LogicalResult propagate(func::FuncOp fn, LayoutContext &context);
};

LogicalResult SbpPropagatePass::propagate(func::FuncOp fn, LayoutContext &context) {
  MeshOp meshOp = context.meshOp;
  const sbprt::Mesh &mesh = context.mesh;
  BoxingPlans &plans = *context.plans;
  ElementSizes sizes(fn);
  llvm::DenseMap<Value, sbprt::NdSbp> layouts;
  SignatureCache signatures(mesh);
  // The attributes of each cached signature chosen so far.
  llvm::DenseMap<const NdSignature *, std::pair<ArrayAttr, ArrayAttr>> signatureAttrs;
  // In a micro-batched step, each later micro-batch's op and the same op of
  // micro-batch 0, and what that one chose: a copy that has the same
  // candidates, reads its operands in the same layouts and element sizes
  // and stores as much of each value would choose the same again.
  llvm::DenseMap<Operation *, Operation *> originals;
  {
    std::vector<std::vector<Operation *>> batches = microBatchOps(fn);
    for (size_t i = 1; i < batches.size(); ++i)
      for (auto [copy, original] : llvm::zip(batches[i], batches[0]))
        originals[copy] = original;
  }
  llvm::DenseMap<Operation *, const NdSignature *> chosen;
  auto choseAlike = [&](Operation &op, const std::vector<NdSignature> &candidates)
      -> const NdSignature * {
    Operation *original = originals.lookup(&op);
    const NdSignature *choice = original ? chosen.lookup(original) : nullptr;
    // The same candidates: the original's choice is one of this op's.
    if (!choice || choice < candidates.data() || choice >= candidates.data() + candidates.size() ||
        original->getNumOperands() != op.getNumOperands() ||
        original->getNumResults() != op.getNumResults() ||
        sizes.computesInBf16(original) != sizes.computesInBf16(&op))
      return nullptr;
    for (auto [mine, theirs] : llvm::zip(op.getOpOperands(), original->getOpOperands())) {
      auto have = layouts.find(mine.get()), had = layouts.find(theirs.get());
      if ((have == layouts.end()) != (had == layouts.end()) ||
          (have != layouts.end() && have->second != had->second) ||
          sizes.ofUse(mine) != sizes.ofUse(theirs) ||
          sizes.storedShare(mine.get()) != sizes.storedShare(theirs.get()))
        return nullptr;
    }
    for (auto [mine, theirs] : llvm::zip(op.getResults(), original->getResults()))
      if (sizes.of(mine) != sizes.of(theirs) || sizes.storedShare(mine) != sizes.storedShare(theirs))
        return nullptr;
    return choice;
  };
  for (BlockArgument arg : fn.getArguments()) {
    Attribute attr = fn.getArgAttr(arg.getArgNumber(), kArgLayout);
    if (!attr)
      continue;
    auto seed = dyn_cast<NdSbpAttr>(attr);
    if (!seed)
      return emitError(arg.getLoc()) << "argument #" << arg.getArgNumber() << ": '" << kArgLayout
                                     << "' must be an #sbp.nd layout";
    std::string problem = checkValueLayout(mesh, seed.toLayout(), arg);
    if (!problem.empty())
      return emitError(arg.getLoc()) << "argument #" << arg.getArgNumber() << " layout "
                                     << sbprt::toString(seed.toLayout()) << ": " << problem;
    layouts[arg] = seed.toLayout();
  }

  for (Operation &op : fn.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (auto constraint = dyn_cast<ConstraintOp>(op)) {
      // The constraint's result has the pinned layout; an input laid out
      // otherwise is boxed into it, a free one takes it.
      sbprt::NdSbp seed = constraint.getLayout().toLayout();
      layouts[constraint.getResult()] = seed;
      layouts.try_emplace(constraint.getInput(), seed);
      continue;
    }
    if (auto boxing = dyn_cast<BoxingOp>(op)) {
      sbprt::NdSbp from = boxing.getFrom().toLayout();
      auto have = layouts.find(boxing.getInput());
      if (have != layouts.end() && have->second != from)
        return boxing.emitOpError() << "boxes from " << sbprt::toString(from)
                                    << " but its operand is laid out "
                                    << sbprt::toString(have->second);
      layouts[boxing.getResult()] = boxing.getTo().toLayout();
      layouts.try_emplace(boxing.getInput(), from);
      continue;
    }
    const std::vector<NdSignature> &candidates = signatures.of(&op);
    if (candidates.empty()) {
      std::string operands;
      for (Value operand : op.getOperands()) {
        auto have = layouts.find(operand);
        operands += (operands.empty() ? "" : ", ") +
                    (have == layouts.end() ? std::string("?") : sbprt::toString(have->second));
      }
      return op.emitOpError() << "has no SBP signature on mesh @" << meshOp.getSymName()
                              << " (operands laid out " << (operands.empty() ? "-" : operands)
                              << ")";
    }

    // Consistency first: the least boxing from the operands' layouts; then
    // the least compute; then the first signature. Signatures that need no
    // boxing at all are looked at first: most ops have one, and planning a
    // boxing for each of thousands of nd signatures (on 4-D meshes) is what
    // would cost time.
    auto needsNoBoxing = [&](const NdSignature &sig) {
      for (auto [operand, wanted] : llvm::zip(op.getOperands(), sig.operands)) {
        auto have = layouts.find(operand);
        if (have != layouts.end() && have->second != wanted)
          return false;
      }
      return true;
    };
    // Otherwise candidates are ranked by a per-axis estimate of their
    // boxing and only the best few are planned exactly.
    auto boxingCost = [&](const NdSignature &sig, bool exact) {
      double seconds = 0;
      for (auto [use, wanted] : llvm::zip(op.getOpOperands(), sig.operands)) {
        Value operand = use.get();
        auto have = layouts.find(operand);
        if (have == layouts.end() || have->second == wanted)
          continue;
        if (exact) {
          seconds += plans.get(operand, have->second, wanted, sizes.ofUse(use)).seconds;
          continue;
        }
        double bytes = static_cast<double>(sizes.ofUse(use)) *
                       static_cast<double>(sbprt::numElements(shapeOf(operand)));
        for (size_t axis = 0; axis < wanted.size(); ++axis)
          if (have->second[axis] != wanted[axis])
            seconds += costHop(mesh, have->second, {axis, have->second[axis], wanted[axis]}, bytes,
                               context.cluster)
                           .seconds;
      }
      return seconds;
    };
    const NdSignature *best = choseAlike(op, candidates);
    if (!best) {
      using Ranked = std::pair<std::pair<double, double>, const NdSignature *>;
      std::vector<Ranked> ranked;
      bool anyFree = llvm::any_of(candidates, needsNoBoxing);
      for (const NdSignature &sig : candidates)
        if (!anyFree || needsNoBoxing(sig))
          ranked.push_back({{anyFree ? 0.0 : boxingCost(sig, /*exact=*/false),
                             computeSecondsOf(&op, sig, mesh, context.cluster, sizes)},
                            &sig});
      std::stable_sort(ranked.begin(), ranked.end(),
                       [](const Ranked &a, const Ranked &b) { return a.first < b.first; });
      constexpr size_t kPlannedExactly = 8;
      std::pair<double, double> bestCost;
      for (size_t i = 0; i < ranked.size() && (anyFree ? i < 1 : i < kPlannedExactly); ++i) {
        std::pair<double, double> cost{anyFree ? 0.0 : boxingCost(*ranked[i].second, true),
                                       ranked[i].first.second};
        if (!best || cost < bestCost) {
          best = ranked[i].second;
          bestCost = cost;
        }
      }
    }
    if (!originals.empty() && !originals.count(&op))
      chosen[&op] = best;
    for (auto [operand, wanted] : llvm::zip(op.getOperands(), best->operands))
      layouts.try_emplace(operand, wanted);
    for (auto [result, layout] : llvm::zip(op.getResults(), best->results))
      layouts[result] = layout;
    auto [memo, isNew] = signatureAttrs.try_emplace(best);
    if (isNew)
      memo->second = {layoutsAttr(fn.getContext(), best->operands),
                      layoutsAttr(fn.getContext(), best->results)};
    setSignature(&op, memo->second.first, memo->second.second);
  }

  MLIRContext *ctx = fn.getContext();
  ArgAttrEdits argAttrs(fn);
  for (BlockArgument arg : fn.getArguments()) {
    auto it = layouts.find(arg);
    sbprt::NdSbp layout = it != layouts.end() ? it->second
                                              : sbprt::NdSbp(mesh.shape.size(), sbprt::Sbp::broadcast());
    argAttrs.set(arg.getArgNumber(), kArgLayout, NdSbpAttr::get(ctx, layout));
  }
  argAttrs.apply();
  fn->setAttr(kFuncMesh, FlatSymbolRefAttr::get(meshOp.getSymNameAttr()));
  return success();
}

} // namespace
