// --exec-fuse: elementwise chains of an exec program into exec.fused ops.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace sbpc::exec {
#define GEN_PASS_DEF_EXECFUSE
#include "passes/Exec/Passes.h.inc"
} // namespace sbpc::exec

using namespace mlir;
using namespace sbpc;

namespace {

/// The graph ops an exec.fused body may hold: one f32 result from operands
/// that broadcast to it.
bool isElementwise(Operation *op) {
  if (!isa<graph::NegOp, graph::ExpOp, graph::LogOp, graph::TanhOp, graph::SqrtOp,
           graph::RsqrtOp, graph::ReluOp, graph::GeluOp, graph::AddOp, graph::SubOp,
           graph::MulOp, graph::DivOp, graph::ReluGradOp, graph::GeluGradOp>(op))
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && type.getElementType().isF32() && type.hasStaticShape();
}

/// The chain ending at `root`: elementwise producers of its operands, and of
/// theirs, each used only once (within the chain) and making a value of the
/// root's type, so nothing in between needs memory.
SmallVector<Operation *> chainOf(Operation *root) {
  Type type = root->getResult(0).getType();
  SmallVector<Operation *> chain = {root}, work = {root};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != root->getBlock() || !isElementwise(def) ||
          !operand.hasOneUse() || operand.getType() != type || llvm::is_contained(chain, def))
        continue;
      chain.push_back(def);
      work.push_back(def);
    }
  }
  llvm::sort(chain, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return chain;
}

/// Replaces `chain` (in program order, ending at its root) by one exec.fused.
void fuse(ArrayRef<Operation *> chain) {
  Operation *root = chain.back();
  llvm::SmallPtrSet<Operation *, 8> inChain(chain.begin(), chain.end());
  llvm::SetVector<Value> inputs;
  for (Operation *op : chain)
    for (Value operand : op->getOperands())
      if (!inChain.contains(operand.getDefiningOp()))
        inputs.insert(operand);
  OpBuilder b(root);
  auto type = cast<RankedTensorType>(root->getResult(0).getType());
  auto fused = b.create<exec::FusedOp>(root->getLoc(), type, inputs.getArrayRef());
  Block *body = b.createBlock(&fused.getBody());
  IRMapping map;
  for (Value input : inputs)
    map.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *op : chain)
    b.clone(*op, map);
  b.create<exec::YieldOp>(root->getLoc(), map.lookup(root->getResult(0)));
  root->getResult(0).replaceAllUsesWith(fused.getResult());
  for (Operation *op : llvm::reverse(chain))
    op->erase();
}

class ExecFusePass : public exec::impl::ExecFuseBase<ExecFusePass> {
public:
  void runOnOperation() override {
    for (auto program : getOperation().getOps<func::FuncOp>()) {
      if (!exec::isProgram(program))
        continue;
      // Roots from the end, so that each chain is as long as it can be.
      SmallVector<Operation *> ops;
      for (Operation &op : program.getBody().front())
        ops.push_back(&op);
      llvm::DenseSet<Operation *> gone;
      for (Operation *op : llvm::reverse(ops)) {
        if (gone.contains(op) || !isElementwise(op))
          continue;
        SmallVector<Operation *> chain = chainOf(op);
        if (chain.size() < 2)
          continue;
        gone.insert(chain.begin(), chain.end());
        fuse(chain);
      }
    }
  }
};

} // namespace
