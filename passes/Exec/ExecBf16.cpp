// --exec-bf16: an exec program's computation in bf16, its parameters'
// updates in f32.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Graph/IR/Precision.h"
#include "passes/Exec/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>
#include <tuple>

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

/// The ops of `program` that stay f32 (graph::findF32Storage): the inputs
/// are the loads of inputs and the received values, the stores exec.store.
llvm::DenseSet<Operation *> f32Ops(func::FuncOp program) {
  auto isInput = [](Value v) {
    auto load = v.getDefiningOp<exec::LoadOp>();
    return (load && load.getKind() == "input") || v.getDefiningOp<exec::RecvOp>();
  };
  auto isStore = [](Operation *op) { return isa<exec::StoreOp>(op); };
  return graph::findF32Storage(program.getBody().front(), isInput, isStore).ops;
}

/// A message between pipeline stages, as both sides know it: the sending
/// and receiving programs' stages (sbp.stage), its tag and how many
/// messages of that tag went between the two before it (tags repeat past
/// 32767; a receiver may receive in another order than the sends, but
/// those of one tag in theirs).
using Message = std::tuple<int64_t, int64_t, int64_t, int64_t>;

int64_t stageOf(func::FuncOp program) {
  auto stage = program->getAttrOfType<IntegerAttr>("sbp.stage");
  return stage ? stage.getInt() : -1;
}

LogicalResult toBf16(func::FuncOp program, llvm::DenseSet<Operation *> keep) {
  MLIRContext *ctx = program.getContext();
  Type f32 = Float32Type::get(ctx), bf16 = BFloat16Type::get(ctx);
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
    SmallVector<func::FuncOp> programs;
    for (auto program : getOperation().getOps<func::FuncOp>())
      if (exec::isProgram(program))
        programs.push_back(program);
    // What each program keeps in f32; a message between pipeline stages
    // whose value the sender keeps in f32 (a sum of gradients for an
    // update on the other stage) goes and arrives in f32, the others in
    // bf16.
    std::vector<llvm::DenseSet<Operation *>> keep;
    std::set<Message> f32Messages;
    for (func::FuncOp program : programs) {
      keep.push_back(f32Ops(program));
      int64_t stage = stageOf(program);
      std::map<std::pair<int64_t, int64_t>, int64_t> sent; // by receiving stage and tag
      program.walk([&](exec::SendOp send) {
        auto to = static_cast<int64_t>(send.getPeer());
        auto tag = static_cast<int64_t>(send.getTag());
        int64_t ordinal = sent[{to, tag}]++;
        Operation *def = send.getInput().getDefiningOp();
        if (stage >= 0 && def && keep.back().contains(def)) {
          keep.back().insert(send);
          f32Messages.insert({stage, to, tag, ordinal});
        }
      });
    }
    for (auto [program, kept] : llvm::zip(programs, keep)) {
      int64_t stage = stageOf(program);
      std::map<std::pair<int64_t, int64_t>, int64_t> received; // by sending stage and tag
      program.walk([&](exec::RecvOp recv) {
        auto from = static_cast<int64_t>(recv.getPeer());
        auto tag = static_cast<int64_t>(recv.getTag());
        if (f32Messages.count({from, stage, tag, received[{from, tag}]++}))
          kept.insert(recv);
      });
      if (failed(toBf16(program, kept)))
        return signalPassFailure();
    }
  }
};

} // namespace
