// --sbp-micro-batches: gradient accumulation by splitting the batch.
//
// Running a function on N micro-batches one after another is data
// parallelism over time: the micro-batches are the shards of the batch on
// an axis of N steps instead of N devices. So the SBP rules say how: the
// function is laid out on a one-axis mesh of N with every input's batch
// S(0) and every parameter B (propagation, on a copy); if no op then needs
// a boxing, each op runs on a micro-batch as its local computation
// (cloneWithLocalShapes), and each result is combined by its layout: a
// P(sum) result (the loss, every gradient) is the sum of the micro-batches'
// results, an S(0) one (logits) their rows in order, a B one any copy.
//
// Micro-batch i holds rows i, i+N, i+2N, ... of every input (a reshape to
// [B/N, N, ...] and a slice), so that an input split across data-parallel
// ranks stays split the same way within each micro-batch. Micro-batch i's
// forward and backward both run before micro-batch i+1's, and each result
// is accumulated as soon as it is ready (a sum's add right after the op
// that makes its term): only one micro-batch's activations, and one
// term at a time, are live.
#include "compiler/Sbp/ValueLayouts.h"
#include "compiler/Support/ArgAttrs.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPMICROBATCHES
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;
using sbprt::NdSbp;
using sbprt::Sbp;

namespace {

constexpr llvm::StringLiteral kMeshName = "micro_batches";

/// The name of a function result (graph.output) for messages.
std::string resultName(func::FuncOp fn, unsigned i) {
  if (auto name = fn.getResultAttrOfType<StringAttr>(i, graph::GraphDialect::kOutputAttr))
    return name.str();
  return "#" + std::to_string(i);
}

/// Marks an op made for micro-batch `i` (sbp.micro_batch), the first's
/// too: the search ties each op of a later micro-batch to the same op of
/// the first.
void markMicroBatch(Operation *op, int64_t i) {
  op->setAttr(kMicroBatch, IntegerAttr::get(IntegerType::get(op->getContext(), 64), i));
}

class MicroBatcher {
public:
  MicroBatcher(func::FuncOp fn, int64_t count) : fn(fn), count(count), b(fn.getContext()) {}
  LogicalResult run();

private:
  /// Lays a copy of the function out over the micro-batch axis; fills
  /// `layouts` with the layout of every op result and argument, by
  /// position, and `resultLayouts` with those of the function's results.
  LogicalResult layOut();
  /// Micro-batch `i` of `input`: its rows i, i+N, ... as a [B/N, ...] tensor.
  Value microBatchOf(Value input, int64_t i, Location loc);

  func::FuncOp fn;
  int64_t count;
  OpBuilder b;
  sbprt::Mesh mesh;
  int64_t batch = 0;
  std::vector<std::vector<NdSbp>> opLayouts; // per op in order, per result
  std::vector<NdSbp> resultLayouts;
};

LogicalResult MicroBatcher::layOut() {
  MLIRContext *ctx = fn.getContext();
  mesh.axes = {"micro_batch"};
  mesh.shape = {count};
  // A module of its own with the function and a mesh, seeded like data
  // parallelism, then propagated.
  OwningOpRef<ModuleOp> copy = ModuleOp::create(fn.getLoc());
  OpBuilder cb(ctx);
  cb.setInsertionPointToStart(copy->getBody());
  cb.create<MeshOp>(fn.getLoc(), kMeshName, cb.getStrArrayAttr({"micro_batch"}),
                                  cb.getDenseI64ArrayAttr({count}));
  auto clone = cast<func::FuncOp>(cb.clone(*fn));
  ArgAttrEdits cloneAttrs(clone);
  for (BlockArgument arg : clone.getArguments()) {
    bool input = clone.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr) != nullptr;
    NdSbp layout = {input ? Sbp::split(0) : Sbp::broadcast()};
    if (input) {
      auto type = cast<RankedTensorType>(arg.getType());
      auto name = clone.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     graph::GraphDialect::kInputAttr);
      if (type.getRank() == 0 || type.getDimSize(0) % count != 0)
        return emitError(fn.getArgument(arg.getArgNumber()).getLoc())
               << "input '" << name.getValue() << "' " << graph::formatShape(type.getShape())
               << " cannot be split into " << count
               << " micro-batches: its batch (dimension 0) is not divisible by " << count;
      if (batch && batch != type.getDimSize(0))
        return emitError(fn.getArgument(arg.getArgNumber()).getLoc())
               << "input '" << name.getValue() << "' has batch " << type.getDimSize(0)
               << " but another input has " << batch << "; micro-batches need one batch size";
      batch = type.getDimSize(0);
    }
    cloneAttrs.set(arg.getArgNumber(), kArgLayout, NdSbpAttr::get(ctx, layout));
  }
  cloneAttrs.apply();
  if (!batch)
    return fn.emitOpError() << "has no graph.input to split into micro-batches";
  PassManager pm(ctx);
  pm.addPass(createSbpPropagate());
  if (failed(pm.run(*copy)))
    return failure();

  // Every op must take its operands as they come: a boxing would mean
  // exchanging data between micro-batches.
  for (auto [op, original] :
       llvm::zip(clone.getBody().front().without_terminator(), fn.getBody().front())) {
    auto operands = op.getAttrOfType<ArrayAttr>(kOperandLayouts);
    auto results = op.getAttrOfType<ArrayAttr>(kResultLayouts);
    if (!operands || !results)
      return original.emitOpError() << "has no SBP rule; it cannot run on micro-batches";
    for (auto [i, attr] : llvm::enumerate(operands)) {
      std::optional<NdSbp> have = layoutOf(op.getOperand(i));
      NdSbp want = cast<NdSbpAttr>(attr).toLayout();
      if (have && *have != want)
        return original.emitOpError()
               << "needs operand " << i << " as " << sbprt::toString(want)
               << " over the batch but it is " << sbprt::toString(*have)
               << ": the batch cannot be split into micro-batches here";
    }
    std::vector<NdSbp> layouts;
    for (Attribute attr : results)
      layouts.push_back(cast<NdSbpAttr>(attr).toLayout());
    opLayouts.push_back(std::move(layouts));
  }
  auto ret = cast<func::ReturnOp>(clone.getBody().front().getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    NdSbp layout = layoutOf(value).value_or(NdSbp{Sbp::broadcast()});
    const Sbp &s = layout[0];
    auto type = cast<RankedTensorType>(value.getType());
    bool rows = s.isSplit() && s.dim == 0 && type.getDimSize(0) == batch;
    if (!(s.isBroadcast() || rows || (s.isPartial() && s.reduce == Sbp::Reduce::Sum)))
      return fn.emitOpError() << "result '" << resultName(fn, i) << "' is "
                              << sbprt::toString(layout)
                              << " over the batch; only sums (P(sum)), rows of the batch "
                                 "(S(0)) and copies (B) can be assembled from micro-batches";
    resultLayouts.push_back(layout);
  }
  return success();
}

Value MicroBatcher::microBatchOf(Value input, int64_t i, Location loc) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> grouped = {batch / count, count};
  grouped.append(type.getShape().begin() + 1, type.getShape().end());
  Value x = b.create<graph::ReshapeOp>(loc, RankedTensorType::get(grouped, type.getElementType()),
                                       input);
  SmallVector<int64_t> starts(grouped.size(), 0), limits(grouped);
  starts[1] = i;
  limits[1] = i + 1;
  Operation *grouping = x.getDefiningOp();
  x = b.create<graph::SliceOp>(loc, x, starts, limits);
  Operation *slice = x.getDefiningOp();
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = batch / count;
  x = b.create<graph::ReshapeOp>(loc, RankedTensorType::get(shape, type.getElementType()), x);
  for (Operation *op : {grouping, slice, x.getDefiningOp()})
    markMicroBatch(op, i);
  return x;
}

LogicalResult MicroBatcher::run() {
  // The step is unrolled before it is laid out on a mesh of devices.
  if (auto constraints = fn.getOps<ConstraintOp>(); !constraints.empty())
    return (*constraints.begin()).emitOpError()
           << "pins a layout before --sbp-micro-batches: unroll the micro-batches first, then "
              "lay the step out";
  if (failed(layOut()))
    return failure();
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  b.setInsertionPoint(ret);

  SmallVector<Value> sums(ret.getNumOperands());
  SmallVector<SmallVector<Value>> pieces(ret.getNumOperands());
  for (int64_t i = 0; i < count; ++i) {
    IRMapping mapping;
    for (BlockArgument arg : fn.getArguments())
      mapping.map(arg, fn.getArgAttr(arg.getArgNumber(), graph::GraphDialect::kInputAttr)
                           ? microBatchOf(arg, i, arg.getLoc())
                           : Value(arg));
    for (auto [op, layouts] : llvm::zip(ops, opLayouts)) {
      SmallVector<Type> types;
      for (auto [result, layout] : llvm::zip(op->getResults(), layouts)) {
        auto type = cast<RankedTensorType>(result.getType());
        types.push_back(RankedTensorType::get(localShape(mesh, layout, shapeOf(result)),
                                              type.getElementType()));
      }
      Operation *local = cloneWithLocalShapes(b, op, mapping, types);
      markMicroBatch(local, i);
      for (auto [result, localResult] : llvm::zip(op->getResults(), local->getResults()))
        mapping.map(result, localResult);
    }
    // Each result joins the others as soon as this micro-batch has it.
    for (auto [k, value] : llvm::enumerate(ret.getOperands())) {
      Value mine = mapping.lookupOrDefault(value);
      const Sbp &s = resultLayouts[k][0];
      if (s.isPartial() && sums[k]) {
        // Right after the term is made, so that a micro-batch's gradients
        // do not all live to the end of its backward.
        OpBuilder::InsertionGuard atTerm(b);
        if (Operation *def = mine.getDefiningOp())
          b.setInsertionPointAfter(def);
        auto add = b.create<graph::AddOp>(ret.getLoc(), sums[k], mine);
        add->setAttr(graph::GraphDialect::kAccumulateAttr, b.getUnitAttr());
        markMicroBatch(add, i);
        sums[k] = add;
      } else if (s.isSplit()) {
        pieces[k].push_back(mine);
      } else if (s.isPartial() || i == 0) {
        sums[k] = mine; // the first partial sum, or a broadcast result's copy
      }
    }
  }
  // Rows come back in their order: micro-batch i held rows i, i+N, ...
  for (auto [k, value] : llvm::enumerate(ret.getOperands())) {
    if (pieces[k].empty())
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<Value> grouped;
    for (auto [i, piece] : llvm::enumerate(pieces[k])) {
      SmallVector<int64_t> shape = {batch / count, 1};
      shape.append(type.getShape().begin() + 1, type.getShape().end());
      grouped.push_back(b.create<graph::ReshapeOp>(
          ret.getLoc(), RankedTensorType::get(shape, type.getElementType()), piece));
      markMicroBatch(grouped.back().getDefiningOp(), static_cast<int64_t>(i));
      grouped.back().getDefiningOp()->setAttr(kOutputJoin, b.getUnitAttr());
    }
    // Marked so that, laid out as the pieces are, the join goes and each
    // piece is stored as it is made (--sbp-spmdize).
    auto all = b.create<graph::ConcatOp>(ret.getLoc(), grouped, 1);
    all->setAttr(kOutputJoin, b.getUnitAttr());
    auto joined = b.create<graph::ReshapeOp>(ret.getLoc(), type, all);
    joined->setAttr(kOutputJoin, b.getUnitAttr());
    sums[k] = joined;
  }
  ret->setOperands(sums);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  return success();
}

class SbpMicroBatchesPass : public sbpc::sbp::impl::SbpMicroBatchesBase<SbpMicroBatchesPass> {
public:
  using SbpMicroBatchesBase::SbpMicroBatchesBase;

  void runOnOperation() override {
    if (count < 1) {
      getOperation().emitError() << "micro-batch count must be at least 1, got " << static_cast<int64_t>(count);
      return signalPassFailure();
    }
    if (count == 1)
      return;
    SmallVector<func::FuncOp> functions;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal())
        functions.push_back(fn);
    for (func::FuncOp fn : functions)
      if (failed(MicroBatcher(fn, count).run()))
        return signalPassFailure();
  }
};

} // namespace
