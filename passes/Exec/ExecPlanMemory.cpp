// --exec-plan-memory: static first-fit placement of every local tensor in
// one arena per rank.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/Passes.h"
#include "passes/Exec/ProgramInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace sbpc::exec {
#define GEN_PASS_DEF_EXECPLANMEMORY
#include "passes/Exec/Passes.h.inc"
} // namespace sbpc::exec

using namespace mlir;
using namespace sbpc::exec;

namespace {

constexpr uint64_t kAlignment = 64;

/// Live byte ranges, kept sorted by offset.
class Arena {
public:
  /// The lowest aligned offset where `bytes` fit between live ranges.
  uint64_t place(uint64_t bytes) {
    uint64_t offset = 0;
    for (const auto &[begin, end] : live) {
      if (offset + bytes <= begin)
        break;
      offset = std::max(offset, (end + kAlignment - 1) / kAlignment * kAlignment);
    }
    live.insert(std::upper_bound(live.begin(), live.end(), std::make_pair(offset, uint64_t(0))),
                {offset, offset + bytes});
    peak = std::max(peak, offset + bytes);
    return offset;
  }
  void release(uint64_t offset, uint64_t bytes) {
    live.erase(std::find(live.begin(), live.end(), std::make_pair(offset, offset + bytes)));
  }
  uint64_t peak = 0;

private:
  std::vector<std::pair<uint64_t, uint64_t>> live;
};

LogicalResult planProgram(func::FuncOp program) {
  FailureOr<sbprt::Mesh> mesh = programMesh(program);
  if (failed(mesh))
    return failure();
  Block &body = program.getBody().front();
  // Index of every op, and of the last op that uses each value.
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  // A reshape's result is its input's bytes in the same order: it shares
  // the input's place (no value is written after its op, so sharing is
  // safe), and the place lives until the last use of any value in it.
  llvm::DenseMap<Value, Value> owner;
  llvm::DenseMap<Value, size_t> lastUse;
  for (auto [i, op] : llvm::enumerate(body))
    for (Value result : op.getResults()) {
      Value place = result;
      if (isa<sbpc::graph::ReshapeOp>(op))
        place = owner.lookup(op.getOperand(0));
      owner[result] = place;
      size_t &last = lastUse[place];
      last = std::max(last, i);
      for (Operation *user : result.getUsers())
        last = std::max(last, index.lookup(user));
    }
  llvm::DenseMap<Value, uint64_t> offsets;
  std::vector<std::vector<Value>> dyingAfter(index.size());
  Arena arena;
  Builder b(program.getContext());
  for (auto [i, op] : llvm::enumerate(body)) {
    SmallVector<int64_t> resultOffsets;
    for (Value result : op.getResults()) {
      Value place = owner.lookup(result);
      if (place == result) {
        offsets[result] = arena.place(valueBytes(result));
        dyingAfter[lastUse.lookup(result)].push_back(result);
      } else {
        offsets[result] = offsets.lookup(place);
      }
      resultOffsets.push_back(static_cast<int64_t>(offsets[result]));
    }
    if (!resultOffsets.empty())
      op.setAttr(kOffsets, b.getDenseI64ArrayAttr(resultOffsets));
    if (std::optional<CollectiveCall> call = collectiveCall(&op, *mesh)) {
      uint64_t bytes = sbprt::comm::scratchBytes(call->kind, call->input, call->groupSize,
                                                  call->dim);
      if (bytes) {
        uint64_t offset = arena.place(bytes);
        op.setAttr(kScratchOffset, b.getI64IntegerAttr(static_cast<int64_t>(offset)));
        arena.release(offset, bytes);
      }
    }
    for (Value dead : dyingAfter[i])
      arena.release(offsets[dead], valueBytes(dead));
  }
  program->setAttr(kArenaBytes, b.getI64IntegerAttr(static_cast<int64_t>(arena.peak)));
  return success();
}

class ExecPlanMemoryPass : public sbpc::exec::impl::ExecPlanMemoryBase<ExecPlanMemoryPass> {
public:
  void runOnOperation() override {
    for (auto program : getOperation().getOps<func::FuncOp>())
      if (isProgram(program) && failed(planProgram(program)))
        return signalPassFailure();
  }
};

} // namespace
