// --exec-plan-memory: a static place for every local tensor in one arena
// per rank, the smaller of two plans: first fit in program order, and
// largest first.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/Passes.h"
#include "passes/Exec/ProgramInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <limits>
#include <numeric>

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

/// A block of memory the plan places: a value's (with the reshapes that
/// share it), or a collective's scratch, live from op `first` to op
/// `last`.
struct Piece {
  uint64_t bytes;
  size_t first, last;
};

uint64_t aligned(uint64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

/// In program order, each block at the lowest offset free while it lives
/// (first fit, as the program makes and frees them). Returns the arena's
/// size.
/// (`blocks` come in program order: by `first`.)
uint64_t placeInOrder(const std::vector<Piece> &blocks, std::vector<uint64_t> &offsets) {
  // Released after their last op, before the next op's blocks are placed.
  std::vector<size_t> byLast(blocks.size());
  std::iota(byLast.begin(), byLast.end(), 0);
  std::stable_sort(byLast.begin(), byLast.end(),
                   [&](size_t a, size_t b) { return blocks[a].last < blocks[b].last; });
  Arena arena;
  size_t released = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    for (; released < byLast.size() && blocks[byLast[released]].last < blocks[k].first; ++released)
      arena.release(offsets[byLast[released]], blocks[byLast[released]].bytes);
    offsets[k] = arena.place(blocks[k].bytes);
  }
  return arena.peak;
}

/// Largest first, each block in the smallest gap left between the blocks
/// already placed that live at the same time as it, or above them all
/// (greedy by size, as Pisarchyk and Lee's offline planner): knowing every
/// lifetime ahead, it leaves fewer holes than placing in program order,
/// where the micro-batches' values come and go in turn. Returns the
/// arena's size.
uint64_t placeLargestFirst(const std::vector<Piece> &blocks, std::vector<uint64_t> &offsets) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(blocks[a].bytes, blocks[b].first) >
           std::make_pair(blocks[b].bytes, blocks[a].first);
  });
  std::vector<size_t> placed; // by offset
  uint64_t peak = 0;
  for (size_t k : order) {
    const Piece &block = blocks[k];
    uint64_t cursor = 0, best = 0, bestGap = std::numeric_limits<uint64_t>::max();
    for (size_t other : placed) {
      const Piece &o = blocks[other];
      if (o.last < block.first || o.first > block.last)
        continue;
      if (offsets[other] >= cursor + block.bytes && offsets[other] - cursor < bestGap) {
        bestGap = offsets[other] - cursor;
        best = cursor;
      }
      cursor = std::max(cursor, aligned(offsets[other] + o.bytes));
    }
    offsets[k] = bestGap == std::numeric_limits<uint64_t>::max() ? cursor : best;
    peak = std::max(peak, offsets[k] + block.bytes);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), k,
                                   [&](size_t a, size_t b) { return offsets[a] < offsets[b]; }),
                  k);
  }
  return peak;
}

/// Whether `op` computes its result `result` from its operand `operand`
/// element by element, each element read before it is written, so that
/// the two may share a place: an optimizer's update of a parameter or of
/// one of its states.
bool updatesInPlace(Operation *op, unsigned operand, unsigned result) {
  if (isa<sbpc::graph::AdamwUpdateOp>(op))
    return (operand == 0 && result == 0) || (operand == 2 && result == 1) ||
           (operand == 3 && result == 2);
  if (isa<sbpc::graph::SgdUpdateOp>(op))
    return (operand == 0 && result == 0) || (operand == 2 && result == 1);
  return false;
}

/// A parameter's place and the place of its update that takes it over.
struct Resident {
  LoadOp load;
  StoreOp store;
  Value oldPlace, newPlace;
};

/// The parameters whose update (stored under the parameter's name, whole,
/// in its type) can take the parameter's place: the parameter dead before
/// the update is made, or read by the op that makes it in place.
std::vector<Resident> findResidents(Block &body, const llvm::DenseMap<Operation *, size_t> &index,
                                    const llvm::DenseMap<Value, Value> &owner,
                                    const llvm::DenseMap<Value, size_t> &lastUse) {
  llvm::StringMap<LoadOp> loads;
  llvm::StringSet<> twice;
  for (auto load : body.getOps<LoadOp>())
    if (load.getKind() == "param" && !loads.try_emplace(load.getName(), load).second)
      twice.insert(load.getName());
  std::vector<Resident> residents;
  llvm::DenseSet<Value> taken;
  for (auto store : body.getOps<StoreOp>()) {
    auto load = loads.lookup(store.getName());
    // (A partial sum is not what the next step's load makes of its file.)
    if (!load || twice.contains(store.getName()) || store.getRows() ||
        store.getValue().getType() != load.getType() || store.getLayout() != load.getLayout() ||
        store.getGlobalShape() != load.getGlobalShape() ||
        llvm::any_of(load.getLayout().toLayout(),
                     [](const sbprt::Sbp &sbp) { return sbp.isPartial(); }))
      continue;
    Value oldPlace = owner.lookup(load.getResult()), newPlace = owner.lookup(store.getValue());
    Operation *maker = newPlace.getDefiningOp();
    if (oldPlace == newPlace || !maker || isa<LoadOp>(maker) ||
        valueBytes(oldPlace) != valueBytes(newPlace) || !taken.insert(oldPlace).second ||
        !taken.insert(newPlace).second)
      continue;
    size_t dies = lastUse.lookup(oldPlace), made = index.lookup(maker);
    bool inPlace = false;
    if (dies == made)
      for (OpOperand &use : maker->getOpOperands())
        if (owner.lookup(use.get()) == oldPlace)
          inPlace = updatesInPlace(maker, use.getOperandNumber(),
                                   cast<OpResult>(newPlace).getResultNumber()) &&
                    llvm::count_if(maker->getOperands(),
                                   [&](Value v) { return owner.lookup(v) == oldPlace; }) == 1;
    if (dies < made || inPlace)
      residents.push_back({load, store, oldPlace, newPlace});
  }
  return residents;
}

/// Past this many blocks the largest-first plan (quadratic: 0.4 s for
/// 21,000) is not tried.
constexpr size_t kMostBlocksLargestFirst = 40000;

LogicalResult planProgram(func::FuncOp program, StringRef placement) {
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
  // A training step's update of a parameter takes the parameter's place,
  // which lives through the whole program: the next step run in the same
  // process finds it there and loads nothing.
  std::vector<Resident> residents = findResidents(body, index, owner, lastUse);
  llvm::DenseMap<Value, Value> sharing; // the update's place -> the parameter's
  for (const Resident &r : residents)
    sharing[r.newPlace] = r.oldPlace;
  // The blocks: each place's, and each collective's scratch during its op.
  std::vector<Piece> blocks;
  llvm::DenseMap<Value, size_t> blockOf;
  llvm::DenseMap<Operation *, size_t> scratchOf;
  size_t end = body.getOperations().size() - 1;
  for (auto [i, op] : llvm::enumerate(body)) {
    for (Value result : op.getResults())
      if (owner.lookup(result) == result && !sharing.count(result)) {
        blockOf[result] = blocks.size();
        blocks.push_back({valueBytes(result), i, lastUse.lookup(result)});
      }
    if (std::optional<CollectiveCall> call = collectiveCall(&op, *mesh))
      if (uint64_t bytes =
              sbprt::comm::scratchBytes(call->kind, call->input, call->groupSize, call->dim)) {
        scratchOf[&op] = blocks.size();
        blocks.push_back({bytes, i, i});
      }
  }
  for (const auto &[newPlace, oldPlace] : sharing) {
    size_t block = blockOf.lookup(oldPlace);
    blockOf[newPlace] = block;
    blocks[block].first = 0;
    blocks[block].last = end;
  }
  // The plans take blocks in program order: by their first op.
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return blocks[a].first < blocks[b].first; });
  std::vector<Piece> ordered;
  for (size_t k : order)
    ordered.push_back(blocks[k]);
  // In program order, largest first, or (`smaller`) the smaller of the two.
  std::vector<uint64_t> placed(blocks.size()), largestFirst(blocks.size());
  uint64_t arenaBytes = 0;
  if (placement != "largest-first")
    arenaBytes = placeInOrder(ordered, placed);
  if (placement == "largest-first" ||
      (placement == "smaller" && blocks.size() <= kMostBlocksLargestFirst))
    if (uint64_t bytes = placeLargestFirst(ordered, largestFirst);
        placement == "largest-first" || bytes < arenaBytes) {
      arenaBytes = bytes;
      placed.swap(largestFirst);
    }
  std::vector<uint64_t> offsets(blocks.size());
  for (size_t k = 0; k < order.size(); ++k)
    offsets[order[k]] = placed[k];
  Builder b(program.getContext());
  for (Operation &op : body) {
    SmallVector<int64_t> resultOffsets;
    for (Value result : op.getResults())
      resultOffsets.push_back(static_cast<int64_t>(offsets[blockOf.lookup(owner.lookup(result))]));
    if (!resultOffsets.empty())
      op.setAttr(kOffsets, b.getDenseI64ArrayAttr(resultOffsets));
    if (auto scratch = scratchOf.find(&op); scratch != scratchOf.end())
      op.setAttr(kScratchOffset,
                 b.getI64IntegerAttr(static_cast<int64_t>(offsets[scratch->second])));
  }
  for (const Resident &r : residents) {
    r.load->setAttr(kResident, b.getUnitAttr());
    r.store->setAttr(kResident, b.getUnitAttr());
  }
  program->setAttr(kArenaBytes, b.getI64IntegerAttr(static_cast<int64_t>(arenaBytes)));
  return success();
}

class ExecPlanMemoryPass : public sbpc::exec::impl::ExecPlanMemoryBase<ExecPlanMemoryPass> {
public:
  using ExecPlanMemoryBase::ExecPlanMemoryBase;

  void runOnOperation() override {
    if (placement != "smaller" && placement != "in-order" && placement != "largest-first") {
      getOperation().emitError() << "exec-plan-memory: placement must be smaller, in-order or "
                                 << "largest-first, got '" << placement << "'";
      return signalPassFailure();
    }
    for (auto program : getOperation().getOps<func::FuncOp>())
      if (isProgram(program) && failed(planProgram(program, placement)))
        return signalPassFailure();
  }
};

} // namespace
