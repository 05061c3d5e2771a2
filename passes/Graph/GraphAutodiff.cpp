// --graph-autodiff: reverse-mode differentiation of a scalar loss with
// respect to every parameter, from the ops' gradient rules.
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

namespace sbpc::graph {
#define GEN_PASS_DEF_GRAPHAUTODIFF
#include "passes/Graph/Passes.h.inc"
} // namespace sbpc::graph

using namespace mlir;
using namespace sbpc::graph;

namespace {

/// Recomputation: the forward ops of each block (graph.region; with
/// `selective`, only its graph.selective ops) whose results the backward
/// pass uses are cloned just before the first backward op that needs one,
/// and the backward pass uses the clones. The originals then die in the
/// forward pass; only what the block takes from outside and what it hands
/// on to forward ops outside it (its checkpoints) stay live in between.
void addRecomputation(func::FuncOp fn, ArrayRef<Operation *> forward, bool selective) {
  llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
  llvm::MapVector<StringRef, SmallVector<Operation *>> regions;
  for (Operation *op : forward)
    if (auto region = op->getAttrOfType<StringAttr>(GraphDialect::kRegionAttr))
      if (!selective || op->hasAttr(GraphDialect::kSelectiveAttr))
        regions[region.getValue()].push_back(op);
  for (auto &[name, ops] : regions) {
    llvm::DenseSet<Operation *> inRegion(ops.begin(), ops.end());
    // Results the backward pass uses, unless forward ops outside the
    // region (or the function's results) use them too: those are kept.
    auto isBackward = [&](Operation *user) {
      return !isForward.contains(user) && !user->hasTrait<OpTrait::IsTerminator>();
    };
    auto kept = [&](Value v) {
      return llvm::any_of(v.getUsers(), [&](Operation *user) {
        return !isBackward(user) && !inRegion.contains(user);
      });
    };
    Operation *first = nullptr;
    llvm::DenseSet<Operation *> needed;
    SmallVector<Operation *> stack;
    for (Operation *op : ops)
      for (Value result : op->getResults())
        if (!kept(result))
          for (Operation *user : result.getUsers())
            if (isBackward(user)) {
              if (!first || user->isBeforeInBlock(first))
                first = user;
              if (needed.insert(op).second)
                stack.push_back(op);
            }
    if (!first)
      continue;
    // The region's ops those results depend on, up to kept values.
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && inRegion.contains(def) && !kept(operand) && needed.insert(def).second)
          stack.push_back(def);
    }
    OpBuilder b(first);
    IRMapping mapping;
    for (Operation *op : ops)
      if (needed.contains(op))
        b.clone(*op, mapping);
    for (Operation *op : ops)
      if (needed.contains(op))
        for (Value result : op->getResults())
          result.replaceUsesWithIf(mapping.lookup(result),
                                   [&](OpOperand &use) { return isBackward(use.getOwner()); });
  }
}

LogicalResult differentiate(func::FuncOp fn, StringRef lossName, StringRef recomputeMode) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  std::optional<unsigned> lossIndex;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, GraphDialect::kOutputAttr)) {
      if (name.getValue() == lossName)
        lossIndex = i;
      // The gradients' names are the pass's: --graph-optimizer finds each
      // parameter's by it.
      if (name.getValue().starts_with("grad."))
        return fn.emitOpError() << "already has an output named '" << name.getValue()
                                << "': 'grad.' names are the gradients this pass adds "
                                   "(differentiated twice, or rename the output)";
    }
  if (!lossIndex)
    return fn.emitOpError() << "has no result named '" << lossName
                            << "' (graph.output) to differentiate";
  Value loss = ret.getOperand(*lossIndex);
  auto lossType = cast<RankedTensorType>(loss.getType());
  if (lossType.getRank() != 0 || !lossType.getElementType().isF32())
    return fn.emitOpError() << "result '" << lossName << "' is " << lossType
                            << "; the loss must be a scalar tensor<f32>";

  // The values a parameter reaches: only their ops are differentiated.
  llvm::DenseSet<Value> active;
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : fn.getArguments())
    if (fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), GraphDialect::kParamAttr) &&
        cast<RankedTensorType>(arg.getType()).getElementType().isF32()) {
      params.push_back(arg);
      active.insert(arg);
    }
  SmallVector<Operation *> forward;
  for (Operation &op : fn.getBody().front().without_terminator()) {
    forward.push_back(&op);
    if (llvm::any_of(op.getOperands(), [&](Value v) { return active.contains(v); }))
      for (Value result : op.getResults())
        if (cast<RankedTensorType>(result.getType()).getElementType().isF32())
          active.insert(result);
  }

  OpBuilder b(ret);
  llvm::DenseMap<Value, Value> grads;
  grads[loss] = b.create<ConstantOp>(
      ret.getLoc(), DenseElementsAttr::get(lossType, 1.0f));
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(grads.lookup(result));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }) ||
        llvm::none_of(op->getOperands(), [&](Value v) { return active.contains(v); }))
      continue;
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitOpError() << "has no gradient rule";
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradients(b, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitOpError() << "gradient rule gave " << operandGrads.size()
                               << " gradients for " << op->getNumOperands() << " operands";
    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad || !active.contains(operand))
        continue;
      Value &sum = grads[operand];
      sum = sum ? b.create<AddOp>(op->getLoc(), sum, grad).getResult() : grad;
    }
  }

  // Every parameter's gradient, in argument order, zeros where none flows.
  SmallVector<Value> results(ret.getOperands());
  SmallVector<Type> types(fn.getResultTypes());
  for (BlockArgument param : params) {
    Value grad = grads.lookup(param);
    if (!grad)
      grad = b.create<ConstantOp>(
          ret.getLoc(), DenseElementsAttr::get(cast<RankedTensorType>(param.getType()), 0.0f));
    results.push_back(grad);
    types.push_back(grad.getType());
  }
  // The results' attributes all at once (one at a time rebuilds the list
  // each time: quadratic in the parameters).
  SmallVector<DictionaryAttr> resultAttrs;
  fn.getAllResultAttrs(resultAttrs);
  ret->setOperands(results);
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
  for (BlockArgument param : params) {
    auto name = fn.getArgAttrOfType<StringAttr>(param.getArgNumber(), GraphDialect::kParamAttr);
    SmallVector<NamedAttribute> named = {
        b.getNamedAttr(GraphDialect::kOutputAttr, b.getStringAttr("grad." + name.getValue()))};
    // A parameter stored in another shape (GPT-2's fused c_attn weight) gets
    // its gradient written in that shape, as the checkpoint holds it.
    if (auto stored = fn.getArgAttrOfType<DenseI64ArrayAttr>(param.getArgNumber(),
                                                             GraphDialect::kParamShapeAttr))
      named.push_back(b.getNamedAttr(GraphDialect::kParamShapeAttr, stored));
    resultAttrs.push_back(b.getDictionaryAttr(named));
  }
  fn.setAllResultAttrs(resultAttrs);
  if (recomputeMode != "none")
    addRecomputation(fn, forward, recomputeMode == "selective");
  // Every op made here, recomputed forward ops too, is the backward's.
  llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
  for (Operation &op : fn.getBody().front().without_terminator())
    if (!isForward.contains(&op))
      op.setAttr(GraphDialect::kBackwardAttr, b.getUnitAttr());
  // Gradients nobody needs (of inputs, of unused branches) go.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(fn.getBody().front())))
    if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() && isPure(&op))
      op.erase();
  return success();
}

class GraphAutodiffPass : public sbpc::graph::impl::GraphAutodiffBase<GraphAutodiffPass> {
public:
  using GraphAutodiffBase::GraphAutodiffBase;

  void runOnOperation() override {
    if (recompute != "none" && recompute != "full" && recompute != "selective") {
      getOperation().emitError() << "recompute must be none, full or selective, got '"
                                 << recompute << "'";
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(differentiate(fn, loss, recompute)))
        return signalPassFailure();
  }
};

} // namespace
