// The f32 part of a program computed in bf16.
#include "dialects/Graph/IR/Precision.h"
#include "dialects/Graph/IR/GraphOps.h"

#include "llvm/ADT/SmallVector.h"

using namespace mlir;

namespace sbpc::graph {

namespace {

/// The optimizer's gradient operand: the one input of an update that comes
/// from the (bf16) backward.
OpOperand *gradientOf(Operation *op) {
  if (auto adamw = dyn_cast<AdamwUpdateOp>(op))
    return &adamw.getGradMutable();
  if (auto sgd = dyn_cast<SgdUpdateOp>(op))
    return &sgd.getGradMutable();
  return nullptr;
}

} // namespace

bool F32Storage::isF32(Value value) const {
  if (isa<BlockArgument>(value))
    return arguments.contains(value);
  return ops.contains(value.getDefiningOp());
}

F32Storage findF32Storage(Block &block, function_ref<bool(Value)> isInput,
                          function_ref<bool(Operation *)> isStore) {
  // What depends on an input. An update does not: its gradient comes from
  // the inputs, its result is the new state.
  llvm::DenseSet<Value> fromInputs;
  for (BlockArgument arg : block.getArguments())
    if (isInput(arg))
      fromInputs.insert(arg);
  for (Operation &op : block) {
    bool depends = llvm::any_of(op.getResults(), isInput) ||
                   (!gradientOf(&op) && llvm::any_of(op.getOperands(), [&](Value v) {
                     return fromInputs.contains(v);
                   }));
    if (depends)
      fromInputs.insert(op.result_begin(), op.result_end());
  }
  // Back from the updates' states and the stores, up to the inputs.
  F32Storage keep;
  SmallVector<OpOperand *> work;
  auto pushUses = [&](Operation *op, OpOperand *except) {
    for (OpOperand &use : op->getOpOperands())
      if (&use != except)
        work.push_back(&use);
  };
  for (Operation &op : block) {
    if (OpOperand *grad = gradientOf(&op)) {
      keep.ops.insert(&op);
      pushUses(&op, grad);
    } else if (isStore(&op)) {
      pushUses(&op, nullptr);
    }
  }
  while (!work.empty()) {
    OpOperand *use = work.pop_back_val();
    Value value = use->get();
    if (fromInputs.contains(value))
      continue;
    keep.uses.insert(use);
    if (isa<BlockArgument>(value)) {
      keep.arguments.insert(value);
    } else if (Operation *def = value.getDefiningOp(); keep.ops.insert(def).second) {
      pushUses(def, nullptr);
    }
  }
  // Sums over micro-batches accumulate in f32: each micro-batch's bf16
  // result is widened and added to an f32 total.
  block.walk([&](Operation *op) {
    if (op->hasAttr(GraphDialect::kAccumulateAttr))
      keep.ops.insert(op);
  });
  return keep;
}

} // namespace sbpc::graph
