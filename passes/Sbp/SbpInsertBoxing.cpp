// --sbp-insert-boxing: every change of layout becomes an sbp.boxing.
//
// Walks each propagated function in order. Where an operand's layout
// differs from the one its consumer's signature needs, inserts the
// cheapest plan as a chain of boxings, one per hop (so each records the one
// collective and mesh axis it uses), shared by every consumer that needs
// the same change of the same value, each saying why it is there.
// Constraints become boxings where their operand is laid out otherwise and
// vanish elsewhere.
#include "compiler/Sbp/ValueLayouts.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPINSERTBOXING
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;

namespace {

class SbpInsertBoxingPass : public sbpc::sbp::impl::SbpInsertBoxingBase<SbpInsertBoxingPass> {
public:
  using SbpInsertBoxingBase::SbpInsertBoxingBase;

  void runOnOperation() override {
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 return insertBoxings(fn, context);
                               })))
      signalPassFailure();
  }

private:
  LogicalResult insertBoxings(func::FuncOp fn, LayoutContext &context);
};

/// Boxes `value` from `from` into `to` before `before`: one sbp.boxing per
/// hop of the cheapest plan for elements of `elementBytes`, each at `loc`
/// (its consumer's) with its collective, axis, bytes and `reason`, and
/// marked bf16 where it moves 2-byte elements of an f32 value. Returns the
/// boxed value.
Value createBoxings(OpBuilder &b, Operation *before, Location loc, Value value,
                    const sbprt::NdSbp &from, const sbprt::NdSbp &to, size_t elementBytes,
                    LayoutContext &context, const std::string &reason) {
  MLIRContext *ctx = b.getContext();
  const BoxingPlan &plan = context.plans->get(value, from, to, elementBytes);
  bool bf16 = elementBytes < sbp::elementBytes(value);
  auto mesh = FlatSymbolRefAttr::get(context.meshOp.getSymNameAttr());
  b.setInsertionPoint(before);
  sbprt::NdSbp current = from;
  for (const BoxingStep &step : plan.steps) {
    sbprt::NdSbp next = current;
    next[step.hop.axis] = step.hop.to;
    value = b.create<BoxingOp>(
        loc, value.getType(), value, mesh, NdSbpAttr::get(ctx, current),
        NdSbpAttr::get(ctx, next), b.getStringAttr(sbprt::collectiveName(step.collective)),
        b.getStrArrayAttr({context.mesh.axes[step.hop.axis]}),
        b.getI64IntegerAttr(static_cast<int64_t>(std::llround(step.bytesPerRank))),
        b.getStringAttr(reason));
    if (bf16)
      value.getDefiningOp()->setAttr(kBoxingBf16, b.getUnitAttr());
    current = next;
  }
  return value;
}

LogicalResult SbpInsertBoxingPass::insertBoxings(func::FuncOp fn, LayoutContext &context) {
  if (!fn->hasAttr(kFuncMesh))
    return fn.emitOpError() << "has no layouts; run --sbp-propagate first";
  OpBuilder b(fn.getContext());
  ElementSizes sizes(fn);
  // One chain of boxings per (value, target layout, element size), shared
  // by its consumers; per consumer for arguments gathered at each use
  // (ZeRO-3). Under bf16 an f32 value's consumers that read it in bf16 share
  // one chain of 2-byte elements, those that read f32 (an optimizer update)
  // another.
  std::map<std::tuple<void *, std::string, Operation *, size_t>, Value> boxed;
  auto box = [&](OpOperand &use, const sbprt::NdSbp &have, const sbprt::NdSbp &want,
                 const std::string &reason, bool atDefinition = false) {
    Operation *before = use.getOwner();
    Value value = use.get();
    size_t elementBytes = sizes.ofUse(use);
    auto arg = dyn_cast<BlockArgument>(value);
    bool perUse = arg && fn.getArgAttr(arg.getArgNumber(), kGatherPerUse);
    auto key = std::make_tuple(value.getAsOpaquePointer(), sbprt::toString(want),
                               perUse ? before : nullptr, elementBytes);
    auto found = boxed.find(key);
    if (found != boxed.end())
      return found->second;
    // A change that shrinks what a rank holds (a reduce-scatter, a slice)
    // happens as soon as the value is computed, so that the larger form
    // dies at once; one that grows it (a gather), just before its use;
    // one for a result, which is stored as soon as it is computed, then.
    Operation *at = before;
    if (Operation *def = value.getDefiningOp();
        def && !isa<ConstraintOp>(def) &&
        (atDefinition ||
         localBytes(context.mesh, want, value) < localBytes(context.mesh, have, value)))
      at = def->getNextNode();
    return boxed
        .emplace(key, createBoxings(b, at, before->getLoc(), value, have, want, elementBytes,
                                    context, reason))
        .first->second;
  };
  // A training step's new parameters and optimizer states go back to the
  // layouts their arguments are stored in, so that the next step reads them
  // as this one did: where an update ran in another layout (ZeRO-1 and 2
  // split it on the data-parallel axes), the step ends with that change
  // back, the all-gather of the new parameters (the search prices it, as
  // SearchProblem's round trips).
  DenseMap<Value, BlockArgument> replaces;
  for (Operation &op : fn.getBody().front())
    if (std::optional<SmallVector<unsigned>> replaced = updateReplacedOperands(&op))
      for (auto [r, k] : llvm::enumerate(*replaced))
        if (auto arg = dyn_cast<BlockArgument>(op.getOperand(k)))
          replaces[op.getResult(r)] = arg;
  for (Operation &op : llvm::make_early_inc_range(fn.getBody().front())) {
    if (isa<func::ReturnOp>(op)) {
      for (OpOperand &operand : op.getOpOperands()) {
        auto arg = replaces.find(operand.get());
        if (arg == replaces.end())
          continue;
        std::optional<sbprt::NdSbp> have = layoutOf(operand.get()), want = layoutOf(arg->second);
        if (!have || !want || *have == want)
          continue;
        auto name = fn.getArgAttrOfType<StringAttr>(arg->second.getArgNumber(),
                                                    graph::GraphDialect::kParamAttr);
        operand.set(box(operand, *have, *want,
                        "the next step reads " +
                            (name ? "'" + name.str() + "'" : std::string("the new state")) +
                            " as stored, " + sbprt::toString(*want),
                        /*atDefinition=*/true));
      }
      continue;
    }
    if (auto constraint = dyn_cast<ConstraintOp>(op)) {
      Value input = constraint.getInput();
      std::optional<sbprt::NdSbp> have = layoutOf(input);
      if (!have)
        return constraint.emitOpError() << "operand has no layout; run --sbp-propagate first";
      sbprt::NdSbp want = constraint.getLayout().toLayout();
      Value replacement = *have == want
                              ? input
                              : box(constraint.getInputMutable(), *have, want,
                                    "sbp.constraint at " + describeLocation(op.getLoc()) +
                                        " pins " + sbprt::toString(want));
      constraint.getResult().replaceAllUsesWith(replacement);
      constraint.erase();
      continue;
    }
    auto wanted = op.getAttrOfType<ArrayAttr>(kOperandLayouts);
    if (!wanted)
      continue;
    if (wanted.size() != op.getNumOperands() ||
        !llvm::all_of(wanted, [](Attribute a) { return isa<NdSbpAttr>(a); }))
      return op.emitOpError() << "'" << kOperandLayouts << "' must hold one #sbp.nd per operand";
    for (OpOperand &operand : op.getOpOperands()) {
      std::optional<sbprt::NdSbp> have = layoutOf(operand.get());
      sbprt::NdSbp want = cast<NdSbpAttr>(wanted[operand.getOperandNumber()]).toLayout();
      if (!have)
        return op.emitOpError() << "operand " << operand.getOperandNumber()
                                << " has no layout; run --sbp-propagate first";
      if (*have == want)
        continue;
      operand.set(box(operand, *have, want,
                      "consumer '" + op.getName().getStringRef().str() + "' at " +
                          describeLocation(op.getLoc()) + " needs " + sbprt::toString(want) +
                          " for operand " + std::to_string(operand.getOperandNumber())));
    }
  }
  return success();
}

} // namespace
