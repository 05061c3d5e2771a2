// --sbp-zero: ZeRO as layouts of a laid-out training step.
//
// The data-parallel axes are the mesh axes that split the batch (an input
// laid out S(0) there). On them a replicated parameter's update is
// redundant: every rank applies the same update to the same copy. ZeRO
// splits it instead. Each update op (graph.adamw_update, graph.sgd_update)
// whose parameter is B on a data-parallel axis gets S(d) there, for the
// largest dimension d that divides, on every operand and result but the
// step count; then, by stage,
//   1: the optimizer states are stored split (their arguments' layouts);
//      the gradient is still reduced whole (a constraint pins the layout
//      the update had wanted) and each rank keeps its slice;
//   2: the gradient is reduced straight into slices (P(sum) -> S(d) is a
//      reduce-scatter); in a micro-batched step each micro-batch's, and
//      the running sum is kept in slices (also where the plan split the
//      update on a data-parallel axis itself);
//   3: the parameter is stored split too, and gathered where it is used,
//      once per use (sbp.gather_per_use), so that the whole copy lives
//      only around its consumer (also where the plan stores it split on a
//      data-parallel axis itself).
// The updated parameter comes out split; it is stored so and gathered
// where the next step needs it. Stage 0 only does the accounting, and
// leaves a searched plan's updates as the search chose them.
// --sbp-insert-boxing then makes all of it collectives.
#include "compiler/Sbp/ValueLayouts.h"
#include "compiler/Support/ArgAttrs.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPZERO
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;
using sbprt::NdSbp;
using sbprt::Sbp;

namespace {

/// An optimizer update: which operands are the parameter, its gradient and
/// its states, and which results are the new parameter and states.
struct Update {
  Operation *op;
  SmallVector<unsigned> states; // operand indices; result i+1 is the new state
};

std::optional<Update> asUpdate(Operation &op) {
  if (std::optional<SmallVector<unsigned>> states = updateStateOperands(&op))
    return Update{&op, std::move(*states)};
  return std::nullopt;
}

/// The name a parameter has (graph.param), for the report.
std::string paramName(func::FuncOp fn, Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value))
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    graph::GraphDialect::kParamAttr))
      return name.str();
  return describeLocation(value.getLoc());
}

/// Gives `op` (whose operand now arrives as `operandLayout`) the signature
/// that takes it as it is and changes its results on no other axis than
/// `axis`; false when it has none.
bool followOperand(Operation *op, const NdSbp &operandLayout, size_t axis,
                   const LayoutContext &context) {
  auto results = op->getAttrOfType<ArrayAttr>(kResultLayouts);
  if (op->getNumOperands() != 1 || op->getNumResults() != 1 || !results)
    return false;
  NdSbp old = cast<NdSbpAttr>(results[0]).toLayout();
  for (const NdSignature &sig : ndSignatures(op, context.mesh)) {
    if (sig.operands[0] != operandLayout)
      continue;
    bool same = true;
    for (size_t i = 0; i < old.size(); ++i)
      same &= i == axis || sig.results[0][i] == old[i];
    if (same) {
      setSignature(op, sig.operands, sig.results);
      return true;
    }
  }
  return false;
}

/// Stage 2 and up in a micro-batched step: the gradient's accumulating adds
/// (graph.accumulate, the running sum their first operand) take the
/// update's split `layout`, so that each micro-batch's gradient is
/// reduce-scattered as it joins and the running sum is stored split. Summed
/// whole, a full gradient per rank (two, the new sum beside the old) would
/// live across the micro-batches, which is what stage 2 is to save. Stops
/// at an add read by anything but the next add or `update`, or without
/// such a signature.
void accumulateSplit(Operation *update, const NdSbp &layout, SignatureCache &signatures) {
  for (Operation *add : accumulatingAdds(update)) {
    if (llvm::none_of(signatures.of(add), [&](const NdSignature &sig) {
          return sig.operands[0] == layout && sig.operands[1] == layout &&
                 sig.results[0] == layout;
        }))
      return;
    setSignature(add, {layout, layout}, {layout});
  }
}

LogicalResult applyZero(func::FuncOp fn, LayoutContext &context, int64_t stage) {
  MLIRContext *ctx = fn.getContext();
  const sbprt::Mesh &mesh = context.mesh;
  Builder attrs(ctx);

  std::vector<size_t> dpAxes =
      dataParallelAxes(fn, mesh, [](Value arg) { return layoutOf(arg); });

  // The search prices an update's return to its parameter's and states'
  // stored layouts, and may split an update on a data-parallel axis on its
  // own (ZeRO-1's saving, where it pays): without ZeRO its updates stay as
  // it chose them. Propagation does not see that the next step needs the
  // whole parameter again, so its updates are replicated there.
  const bool searched = fn->hasAttr(kFuncSearch);
  int64_t paramBytes = 0, gradientBytes = 0, stateBytes = 0, sharded = 0;
  ElementSizes sizes(fn); // a gradient is bf16 under bf16, the rest f32
  SmallVector<Attribute> unsharded;
  SignatureCache signatures(mesh);
  SmallVector<Update> updates;
  for (Operation &op : fn.getBody().front())
    if (std::optional<Update> update = asUpdate(op))
      updates.push_back(*update);
  // Each update edits its own parameter's and states' arguments only.
  ArgAttrEdits argAttrs(fn);
  for (Update &update : updates) {
    Operation *op = update.op;
    auto operandsAttr = op->getAttrOfType<ArrayAttr>(kOperandLayouts);
    auto resultsAttr = op->getAttrOfType<ArrayAttr>(kResultLayouts);
    if (!operandsAttr || !resultsAttr)
      return op->emitOpError() << "has no signature; run --sbp-propagate or --sbp-search first";
    SmallVector<NdSbp> operands, results;
    for (Attribute a : operandsAttr)
      operands.push_back(cast<NdSbpAttr>(a).toLayout());
    for (Attribute a : resultsAttr)
      results.push_back(cast<NdSbpAttr>(a).toLayout());
    Value param = op->getOperand(0), grad = op->getOperand(1);
    std::optional<NdSbp> stored = layoutOf(param);
    // Without ZeRO, an update is replicated where its parameter is, as in
    // plain data parallelism: the gradient is all-reduced, every rank
    // updates the whole parameter. (Propagation alone may split it, since
    // it does not see that the next step needs the whole parameter again.)
    // A searched plan's update stays as the search chose it, split on a
    // data-parallel axis or not; where it is whole, ZeRO splits it even if
    // the plan stores the parameter split there (the search costs the
    // step so: SearchProblem::setZero).
    NdSbp before = operands[0];
    std::vector<size_t> replicatedAxes, axes;
    for (size_t axis : dpAxes) {
      if (stored && !(*stored)[axis].isBroadcast() && !searched)
        continue;
      if (!searched)
        before[axis] = Sbp::broadcast();
      (before[axis].isBroadcast() ? replicatedAxes : axes).push_back(axis);
    }
    NdSbp reduced = before;

    // Split the update on each data-parallel axis the parameter is
    // replicated on, along the largest dimension that still divides.
    NdSbp layout = before;
    if (stage > 0)
      for (size_t axis : zeroSplit(mesh, layout, param, replicatedAxes))
        axes.push_back(axis);
    SmallVector<unsigned> split = {0, 1};
    split.append(update.states);
    for (unsigned i : split)
      operands[i] = layout;
    for (NdSbp &result : results)
      result = layout;
    setSignature(op, operands, results);
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers())
        if (isa<graph::ReshapeOp>(user))
          for (size_t axis : replicatedAxes)
            (void)followOperand(user, layout, axis, context);
    // The states are stored as the update uses them: whole without ZeRO
    // (unless the search split them), split from stage 1.
    for (unsigned i : update.states)
      if (auto arg = dyn_cast<BlockArgument>(op->getOperand(i));
          arg && llvm::all_of(arg.getUsers(), [&](Operation *user) { return user == op; }))
        argAttrs.set(arg.getArgNumber(), kArgLayout, NdSbpAttr::get(ctx, layout));
    if (axes.empty()) {
      if (stage > 0)
        unsharded.push_back(attrs.getStringAttr(paramName(fn, param)));
    } else {
      ++sharded;
      // The gradient reduced whole first (stage 1), or straight into slices.
      if (stage == 1) {
        OpBuilder b(op);
        auto pin = b.create<ConstraintOp>(grad.getLoc(), grad.getType(), grad,
                                          FlatSymbolRefAttr::get(context.meshOp.getSymNameAttr()),
                                          NdSbpAttr::get(ctx, reduced));
        op->setOperand(1, pin);
      }
      if (stage >= 3)
        if (auto arg = dyn_cast<BlockArgument>(param))
          argAttrs.set(arg.getArgNumber(), kArgLayout, NdSbpAttr::get(ctx, layout));
    }
    // Whoever split them on a data-parallel axis, ZeRO or the plan: from
    // stage 2 the gradient's running sum is kept split, at 3 the parameter
    // is gathered before each use rather than once for all.
    auto splitOnDp = [&](const NdSbp &l) {
      return llvm::any_of(dpAxes, [&](size_t axis) { return l[axis].isSplit(); });
    };
    if (stage >= 2 && splitOnDp(layout))
      accumulateSplit(op, layout, signatures);
    if (stage >= 3)
      if (auto arg = dyn_cast<BlockArgument>(param)) {
        auto storedNow = dyn_cast_or_null<NdSbpAttr>(argAttrs.get(arg.getArgNumber(), kArgLayout));
        if (storedNow && splitOnDp(storedNow.toLayout()))
          argAttrs.set(arg.getArgNumber(), kGatherPerUse, UnitAttr::get(ctx));
      }

    // What each rank keeps between steps and in the update.
    paramBytes += localBytes(mesh, stage >= 3 ? layout : before, param, sizes.of(param));
    gradientBytes += localBytes(mesh, stage >= 2 ? layout : reduced, grad, sizes.of(grad));
    for (unsigned i : update.states)
      stateBytes += localBytes(mesh, stage >= 1 ? layout : before, op->getOperand(i),
                               sizes.of(op->getOperand(i)));
  }

  argAttrs.apply();

  SmallVector<Attribute> axisNames;
  for (size_t axis : dpAxes)
    axisNames.push_back(attrs.getStringAttr(mesh.axes[axis]));
  fn->setAttr(kFuncZero,
              attrs.getDictionaryAttr({
                  attrs.getNamedAttr("stage", attrs.getI64IntegerAttr(stage)),
                  attrs.getNamedAttr("axes", attrs.getArrayAttr(axisNames)),
                  attrs.getNamedAttr("updates", attrs.getI64IntegerAttr(updates.size())),
                  attrs.getNamedAttr("sharded_updates", attrs.getI64IntegerAttr(sharded)),
                  attrs.getNamedAttr("unsharded", attrs.getArrayAttr(unsharded)),
                  attrs.getNamedAttr("param_bytes_per_rank", attrs.getI64IntegerAttr(paramBytes)),
                  attrs.getNamedAttr("gradient_bytes_per_rank",
                                     attrs.getI64IntegerAttr(gradientBytes)),
                  attrs.getNamedAttr("optimizer_state_bytes_per_rank",
                                     attrs.getI64IntegerAttr(stateBytes)),
              }));
  return success();
}

class SbpZeroPass : public sbpc::sbp::impl::SbpZeroBase<SbpZeroPass> {
public:
  using SbpZeroBase::SbpZeroBase;

  void runOnOperation() override {
    if (stage < 0 || stage > 3) {
      getOperation().emitError() << "ZeRO stage must be 0, 1, 2 or 3, got " << static_cast<int64_t>(stage);
      return signalPassFailure();
    }
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 return applyZero(fn, context, stage);
                               })))
      signalPassFailure();
  }
};

} // namespace
