// --exec-bf16: an exec program's computation in bf16, its parameters'
// updates in f32.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

namespace sbpc::exec {
#define GEN_PASS_DEF_EXECBF16
#include "passes/Exec/Passes.h.inc"
} // namespace sbpc::exec

using namespace mlir;
using namespace sbpc;

namespace {

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// The optimizer's gradient operand: the one input of an update that comes
/// from the (bf16) backward.
Value gradientOf(Operation *update) {
  if (auto adamw = dyn_cast<graph::AdamwUpdateOp>(update))
    return adamw.getGrad();
  if (auto sgd = dyn_cast<graph::SgdUpdateOp>(update))
    return sgd.getGrad();
  return nullptr;
}

/// The ops of `program` that stay f32: the optimizer updates, every op
/// that an update's state or a stored value depends on without depending on
/// an input (the step counter, a ZeRO shard of a parameter, the updated
/// parameters on their way to their stores), and the sums over
/// micro-batches (graph.accumulate). The rest depends on the inputs (the
/// forward and backward) or is used only there, and runs in bf16.
llvm::DenseSet<Operation *> f32Ops(func::FuncOp program) {
  llvm::DenseSet<Operation *> fromInputs, keep;
  for (Operation &op : program.getBody().front()) {
    auto load = dyn_cast<exec::LoadOp>(op);
    if ((load && load.getKind() == "input") || isa<exec::RecvOp>(op) ||
        (!gradientOf(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
          return v.getDefiningOp() && fromInputs.contains(v.getDefiningOp());
        })))
      fromInputs.insert(&op);
  }
  SmallVector<Value> work;
  for (Operation &op : program.getBody().front()) {
    if (Value grad = gradientOf(&op)) {
      keep.insert(&op);
      for (Value operand : op.getOperands())
        if (operand != grad)
          work.push_back(operand);
    } else if (auto store = dyn_cast<exec::StoreOp>(op)) {
      work.push_back(store.getValue());
    }
  }
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || fromInputs.contains(def) || !keep.insert(def).second)
      continue;
    llvm::append_range(work, def->getOperands());
  }
  // Sums over micro-batches accumulate in f32: each micro-batch's bf16
  // result is widened and added to an f32 total.
  program.walk([&](Operation *op) {
    if (op->hasAttr(graph::GraphDialect::kAccumulateAttr))
      keep.insert(op);
  });
  return keep;
}

LogicalResult toBf16(func::FuncOp program) {
  MLIRContext *ctx = program.getContext();
  Type f32 = Float32Type::get(ctx), bf16 = BFloat16Type::get(ctx);
  llvm::DenseSet<Operation *> keep = f32Ops(program);
  // One conversion of a value to each type, right after the value is made,
  // shared by every use.
  DenseMap<std::pair<Value, Type>, Value> converted;
  auto convert = [&](Value value, Type element) {
    Value &slot = converted[{value, element}];
    if (!slot) {
      OpBuilder b(ctx);
      b.setInsertionPointAfterValue(value);
      auto type = cast<RankedTensorType>(value.getType()).clone(element);
      slot = b.create<exec::ConvertOp>(value.getLoc(), type, value);
    }
    return slot;
  };
  SmallVector<Operation *> ops;
  for (Operation &op : program.getBody().front())
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (op->getNumRegions())
      return op->emitOpError() << "is already fused: run --exec-bf16 before --exec-fuse";
    if (isa<exec::StoreOp, exec::ConvertOp>(op))
      continue; // a store writes f32 from either
    // Constants keep their f32 attribute; their users convert them.
    bool inF32 = keep.contains(op) || isa<graph::ConstantOp>(op);
    Type element = inF32 ? f32 : bf16;
    for (OpOperand &operand : op->getOpOperands())
      if (isFloatTensor(operand.get()) &&
          cast<RankedTensorType>(operand.get().getType()).getElementType() != element)
        operand.set(convert(operand.get(), element));
    if (!inF32)
      for (OpResult result : op->getResults())
        if (isFloatTensor(result))
          result.setType(cast<RankedTensorType>(result.getType()).clone(bf16));
  }
  return success();
}

class ExecBf16Pass : public sbpc::exec::impl::ExecBf16Base<ExecBf16Pass> {
public:
  void runOnOperation() override {
    for (auto program : getOperation().getOps<func::FuncOp>())
      if (exec::isProgram(program) && failed(toBf16(program)))
        return signalPassFailure();
  }
};

} // namespace
