// --graph-autodiff: reverse-mode differentiation of a scalar loss with
// respect to every parameter, from the ops' gradient rules.
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace sbpc::graph {
#define GEN_PASS_DEF_GRAPHAUTODIFF
#include "passes/Graph/Passes.h.inc"
} // namespace sbpc::graph

using namespace mlir;
using namespace sbpc::graph;

namespace {

LogicalResult differentiate(func::FuncOp fn, StringRef lossName) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  std::optional<unsigned> lossIndex;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, GraphDialect::kOutputAttr))
      if (name.getValue() == lossName)
        lossIndex = i;
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
    // A parameter stored in another shape (GPT-2's fused c_attn weight) gets
    // its gradient in that shape, as the checkpoint holds it.
    if (auto stored = fn.getArgAttrOfType<DenseI64ArrayAttr>(param.getArgNumber(),
                                                             GraphDialect::kParamShapeAttr))
      grad = b.create<ReshapeOp>(ret.getLoc(),
                                 RankedTensorType::get(stored.asArrayRef(), b.getF32Type()), grad);
    results.push_back(grad);
    types.push_back(grad.getType());
  }
  unsigned first = fn.getNumResults();
  ret->setOperands(results);
  fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), types));
  for (auto [i, param] : llvm::enumerate(params)) {
    auto name = fn.getArgAttrOfType<StringAttr>(param.getArgNumber(), GraphDialect::kParamAttr);
    fn.setResultAttr(first + i, GraphDialect::kOutputAttr,
                     b.getStringAttr("grad." + name.getValue()));
  }
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
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(differentiate(fn, loss)))
        return signalPassFailure();
  }
};

} // namespace
