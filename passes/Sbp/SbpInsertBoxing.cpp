// --sbp-insert-boxing: every change of layout becomes an sbp.boxing.
//
// Walks each propagated function in order. Where an operand's layout
// differs from the one its consumer's signature needs, inserts one boxing
// (shared by every consumer that needs the same change of the same value)
// that records the cheapest plan and why it is there. Constraints become
// boxings where their operand is laid out otherwise and vanish elsewhere.
#include "passes/Sbp/Layouts.h"
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

/// Creates the boxing of `value` into `to` before `before`, recording the
/// plan and `reason`.
Value createBoxing(OpBuilder &b, Operation *before, Value value, const sbprt::NdSbp &from,
                   const sbprt::NdSbp &to, MeshOp meshOp, const sbprt::Mesh &mesh,
                   BoxingPlans &plans, const std::string &reason) {
  MLIRContext *ctx = b.getContext();
  const BoxingPlan &plan = plans.get(value, from, to);
  b.setInsertionPoint(before);
  SmallVector<StringRef> axes;
  std::vector<std::string> names = meshAxesOf(plan, mesh);
  for (const std::string &name : names)
    axes.push_back(name);
  auto boxing = b.create<BoxingOp>(
      before->getLoc(), value.getType(), value, FlatSymbolRefAttr::get(meshOp.getSymNameAttr()),
      NdSbpAttr::get(ctx, from), NdSbpAttr::get(ctx, to), b.getStringAttr(collectivesOf(plan)),
      b.getStrArrayAttr(axes),
      b.getI64IntegerAttr(static_cast<int64_t>(std::llround(plan.bytesPerRank))),
      b.getStringAttr(reason));
  return boxing.getResult();
}

LogicalResult SbpInsertBoxingPass::insertBoxings(func::FuncOp fn, LayoutContext &context) {
  MeshOp meshOp = context.meshOp;
  const sbprt::Mesh &mesh = context.mesh;
  BoxingPlans &plans = *context.plans;
  OpBuilder b(fn.getContext());
  // One boxing per (value, target layout), shared by its consumers.
  std::map<std::pair<void *, std::string>, Value> boxed;
  for (Operation &op : llvm::make_early_inc_range(fn.getBody().front())) {
    if (auto constraint = dyn_cast<ConstraintOp>(op)) {
      Value input = constraint.getInput();
      std::optional<sbprt::NdSbp> have = layoutOf(input);
      sbprt::NdSbp want = constraint.getLayout().toLayout();
      Value replacement = input;
      if (have && *have != want)
        replacement = createBoxing(b, &op, input, *have, want, meshOp, mesh, plans,
                                   "sbp.constraint at " + describeLocation(op.getLoc()) +
                                       " pins " + sbprt::toString(want));
      constraint.getResult().replaceAllUsesWith(replacement);
      constraint.erase();
      continue;
    }
    auto wanted = op.getAttrOfType<ArrayAttr>(kOperandLayouts);
    if (!wanted)
      continue;
    for (OpOperand &operand : op.getOpOperands()) {
      std::optional<sbprt::NdSbp> have = layoutOf(operand.get());
      sbprt::NdSbp want = cast<NdSbpAttr>(wanted[operand.getOperandNumber()]).toLayout();
      if (!have)
        return op.emitOpError() << "operand " << operand.getOperandNumber()
                                << " has no layout; run --sbp-propagate first";
      if (*have == want)
        continue;
      auto key = std::make_pair(operand.get().getAsOpaquePointer(), sbprt::toString(want));
      auto found = boxed.find(key);
      if (found == boxed.end()) {
        std::string reason = "consumer '" + op.getName().getStringRef().str() + "' at " +
                             describeLocation(op.getLoc()) + " needs " + sbprt::toString(want) +
                             " for operand " + std::to_string(operand.getOperandNumber());
        found = boxed.emplace(key, createBoxing(b, &op, operand.get(), *have, want, meshOp, mesh,
                                                plans, reason))
                    .first;
      }
      operand.set(found->second);
    }
  }
  return success();
}

} // namespace
