// --sbp-spmdize: a laid-out global function becomes one rank's exec program.
//
// Every value of the program is the rank's local tensor of a global value:
// arguments are loaded shard by shard, ops are cloned on local shapes
// (cloneWithLocalShapes, as the signatures define them), boxings become one
// exec op per hop, and results are stored shard by shard. The program is the
// same for every rank; what differs (which block to load, which part to
// keep) is computed at run time from the rank's mesh coordinates.
//
// A function placed on pipeline stages (--sbp-pipeline) becomes one
// program per stage, on the mesh with the stages as a first axis ("pp"):
// each stage's program computes that stage's ops, loads what they read,
// and sends each value another stage reads to the rank at the same
// coordinates of that stage, right after computing it; the reader
// receives it just before its first use. Every rank meets its sends and
// collectives in one global order and receives no earlier than the send,
// and sends do not wait for their receivers, so no cycle of waits can form.
#include "compiler/Sbp/IndexPlaces.h"
#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Sbp/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace sbpc::sbp {
#define GEN_PASS_DEF_SBPSPMDIZE
#include "passes/Sbp/Passes.h.inc"
} // namespace sbpc::sbp

using namespace mlir;
using namespace sbpc;
using namespace sbpc::sbp;
using sbprt::NdSbp;
using sbprt::Sbp;

namespace {

class Spmdizer {
public:
  /// The program of `stage` of `stages` (the only one when `stages` is 1).
  Spmdizer(func::FuncOp fn, LayoutContext &context, int64_t stages = 1, int64_t stage = 0)
      : fn(fn), context(context), b(fn.getContext()), stages(stages), stage(stage) {}

  LogicalResult run();

private:
  bool pipelined() const { return stages > 1; }
  bool mine(Operation *op) const { return !pipelined() || stageOf(op) == stage; }
  /// A layout of the stage's sub-mesh on the program's mesh: broadcast on
  /// the pipeline axis, which comes first.
  NdSbp onProgramMesh(const NdSbp &layout) const {
    if (!pipelined())
      return layout;
    NdSbp full = {Sbp::broadcast()};
    full.insert(full.end(), layout.begin(), layout.end());
    return full;
  }
  int64_t programAxis(size_t axis) const { return static_cast<int64_t>(axis) + pipelined(); }
  LogicalResult load(BlockArgument arg);
  /// Sends or receives `op`'s results that other stages read, where this
  /// stage is the one that computes them or one that reads them.
  LogicalResult exchange(Operation *op);

  RankedTensorType localType(Value global, const NdSbp &layout) {
    auto type = cast<RankedTensorType>(global.getType());
    return localTypeOf(type, layout);
  }
  RankedTensorType localTypeOf(RankedTensorType type, const NdSbp &layout) {
    std::vector<int64_t> shape = localShape(context.mesh, layout, shapeOf(type));
    return RankedTensorType::get(shape, type.getElementType());
  }
  static std::vector<int64_t> shapeOf(RankedTensorType type) {
    return {type.getShape().begin(), type.getShape().end()};
  }
  /// The local value of `global` laid out as `layout`, or an error at `user`.
  FailureOr<Value> local(Value global, const NdSbp &want, Operation *user);
  LogicalResult lowerBoxing(BoxingOp boxing);
  /// Emits the exec ops of one hop on `value` (laid out as `current` before).
  Value lowerHop(Location loc, Value value, RankedTensorType globalType, NdSbp &current,
                 const sbprt::Hop &hop);

  func::FuncOp fn;
  LayoutContext &context;
  OpBuilder b;
  int64_t stages, stage;
  int64_t transfers = 0; // sends so far in the function's order: their tags
  IRMapping mapping;
  llvm::DenseMap<Value, NdSbp> layouts; // of the global values mapped so far
};

FailureOr<Value> Spmdizer::local(Value global, const NdSbp &want, Operation *user) {
  auto found = layouts.find(global);
  if (found == layouts.end() || !mapping.contains(global))
    return user->emitOpError() << "uses a value spmdize has not seen";
  if (found->second != want)
    return user->emitOpError() << "needs an operand as " << sbprt::toString(want)
                               << " but it is laid out as " << sbprt::toString(found->second)
                               << "; run --sbp-insert-boxing first";
  return mapping.lookup(global);
}

Value Spmdizer::lowerHop(Location loc, Value value, RankedTensorType globalType,
                         NdSbp &current, const sbprt::Hop &hop) {
  NdSbp next = current;
  next[hop.axis] = hop.to;
  RankedTensorType type = localTypeOf(globalType, next);
  int64_t axis = programAxis(hop.axis);
  const Sbp &from = hop.from, &to = hop.to;
  current = next;
  // An axis of one device holds the whole group tensor in every layout.
  if (context.mesh.shape[hop.axis] == 1 || from == to)
    return value;
  auto reduceOf = [&](const Sbp &s) { return b.getStringAttr(exec::reduceName(s.reduce)); };
  if (from.isBroadcast()) {
    if (to.isSplit())
      return b.create<exec::LocalSliceOp>(loc, type, value, axis, to.dim);
    // B -> P: max over copies is the value itself; a sum keeps one copy.
    return to.reduce == Sbp::Reduce::Max ? value
                                         : b.create<exec::KeepOneOp>(loc, value.getType(), value, axis).getResult();
  }
  if (from.isSplit()) {
    if (to.isBroadcast())
      return b.create<exec::AllGatherOp>(loc, type, value, axis, from.dim);
    if (to.isSplit())
      return b.create<exec::AllToAllOp>(loc, type, value, axis, to.dim, from.dim);
    return b.create<exec::ZeroPadOp>(loc, type, value, axis, from.dim, reduceOf(to));
  }
  if (to.isSplit())
    return b.create<exec::ReduceScatterOp>(loc, type, value, axis, to.dim, reduceOf(from));
  Value reduced = b.create<exec::AllReduceOp>(loc, value.getType(), value, axis, reduceOf(from));
  // P -> P of the other kind: reduce, then hold it as the new partial.
  if (to.isPartial() && to.reduce == Sbp::Reduce::Sum)
    return b.create<exec::KeepOneOp>(loc, reduced.getType(), reduced, axis);
  return reduced;
}

LogicalResult Spmdizer::lowerBoxing(BoxingOp boxing) {
  NdSbp from = boxing.getFrom().toLayout(), to = boxing.getTo().toLayout();
  FailureOr<Value> value = local(boxing.getInput(), from, boxing);
  if (failed(value))
    return failure();
  // insert-boxing makes one boxing per hop; lower that hop as it is, so the
  // bytes moved are the bytes reported. Anything else follows a fresh plan.
  std::vector<sbprt::Hop> hops;
  std::vector<size_t> changed;
  for (size_t axis = 0; axis < from.size(); ++axis)
    if (from[axis] != to[axis])
      changed.push_back(axis);
  if (changed.size() == 1 && sbprt::isDirectHop(from, {changed[0], from[changed[0]], to[changed[0]]}))
    hops.push_back({changed[0], from[changed[0]], to[changed[0]]});
  else if (!changed.empty())
    for (const BoxingStep &step : context.plans->get(boxing.getInput(), from, to, elementBytes(boxing)).steps)
      hops.push_back(step.hop);
  auto globalType = cast<RankedTensorType>(boxing.getType());
  NdSbp current = from;
  Value result = *value;
  for (const sbprt::Hop &hop : hops)
    result = lowerHop(boxing.getLoc(), result, globalType, current, hop);
  if (current != to)
    return boxing.emitOpError() << "has no plan from " << sbprt::toString(from) << " to "
                                << sbprt::toString(to);
  mapping.map(boxing.getResult(), result);
  layouts[boxing.getResult()] = to;
  return success();
}

/// Inputs are loaded just before their first use and results stored just
/// after they are computed, so that neither takes arena space longer than
/// it must. Parameters (and optimizer states) stay loaded from the start:
/// they are what a rank holds resident from one step to the next, and the
/// memory plan should count them so.
/// The op of `body` that first reads a result of `op`, or null.
Operation *firstReaderIn(Block &body, Operation *op) {
  Operation *first = nullptr;
  for (Operation *user : op->getUsers()) {
    Operation *inBody = body.findAncestorOpInBlock(*user);
    if (inBody && (!first || inBody->isBeforeInBlock(first)))
      first = inBody;
  }
  return first;
}

void scheduleLoadsAndStores(Block &body) {
  for (auto load : llvm::to_vector(body.getOps<exec::LoadOp>()))
    if (load.getKind() == "input")
      if (Operation *first = firstReaderIn(body, load))
        load->moveBefore(first);
  llvm::DenseMap<Operation *, Operation *> lastStore; // keeps the stores' order
  for (auto store : llvm::to_vector(body.getOps<exec::StoreOp>())) {
    Value value = store->getOperand(0);
    if (Operation *def = value.getDefiningOp(); def && def->getBlock() == &body) {
      Operation *&after = lastStore[def];
      store->moveAfter(after ? after : def);
      after = store;
    }
  }
}

/// Moves each receive to just before its first reader. A sender never
/// waits for its receiver (Communicator::send), so a rank may receive
/// later than the value was sent in the function's order without a cycle
/// of waits: a rank waiting at a receive waits for a send earlier in that
/// order. Receiving early would hold the stage until the other had caught
/// up, where it had work of its own to do. Receives from one peer under one
/// tag (tags wrap around) keep their order.
void receiveWhenRead(Block &body) {
  llvm::DenseMap<std::pair<int64_t, int64_t>, Operation *> later;
  SmallVector<exec::RecvOp> recvs = llvm::to_vector(body.getOps<exec::RecvOp>());
  for (exec::RecvOp recv : llvm::reverse(recvs)) {
    Operation *first = firstReaderIn(body, recv);
    Operation *&next =
        later[{static_cast<int64_t>(recv.getPeer()), static_cast<int64_t>(recv.getTag())}];
    if (next && (!first || next->isBeforeInBlock(first)))
      first = next;
    if (first)
      recv->moveBefore(first);
    next = recv;
  }
}

LogicalResult Spmdizer::load(BlockArgument arg) {
  unsigned i = arg.getArgNumber();
  auto param = fn.getArgAttrOfType<StringAttr>(i, graph::GraphDialect::kParamAttr);
  auto input = fn.getArgAttrOfType<StringAttr>(i, graph::GraphDialect::kInputAttr);
  if (!param == !input)
    return mlir::emitError(arg.getLoc())
           << "argument #" << i << " of @" << fn.getSymName()
           << " must be marked with exactly one of graph.param or graph.input";
  NdSbp layout = layoutOf(arg).value_or(NdSbp(context.mesh.shape.size(), Sbp::broadcast()));
  auto type = cast<RankedTensorType>(arg.getType());
  auto load = b.create<exec::LoadOp>(
      arg.getLoc(), localType(arg, layout), b.getStringAttr(param ? "param" : "input"),
      param ? param : input, b.getDenseI64ArrayAttr(type.getShape()),
      NdSbpAttr::get(fn.getContext(), onProgramMesh(layout)),
      fn.getArgAttrOfType<DenseI64ArrayAttr>(i, graph::GraphDialect::kParamShapeAttr));
  mapping.map(arg, load.getResult());
  layouts[arg] = layout;
  return success();
}

LogicalResult Spmdizer::exchange(Operation *op) {
  int64_t from = stageOf(op);
  for (Value result : op->getResults()) {
    for (int64_t to : stagesReading(result)) {
      int64_t tag = transfers++ % 32768; // MPI guarantees tags up to 32767
      if (from == stage) {
        FailureOr<Value> value = local(result, layouts.lookup(result), op);
        if (failed(value))
          return failure();
        b.create<exec::SendOp>(op->getLoc(), *value, 0, to, tag);
      } else if (to == stage) {
        std::optional<NdSbp> layout = layoutOf(result);
        if (!layout)
          return op->emitOpError() << "has no layout for a result another stage reads";
        auto received = b.create<exec::RecvOp>(op->getLoc(), localType(result, *layout), 0, from, tag);
        mapping.map(result, received.getResult());
        layouts[result] = *layout;
      }
    }
  }
  return success();
}

LogicalResult Spmdizer::run() {
  MLIRContext *ctx = fn.getContext();
  if (!fn->hasAttr(kFuncMesh))
    return fn.emitOpError() << "has no layouts; run --sbp-propagate (or --sbp-search) first";
  b.setInsertionPoint(fn);
  std::string name = fn.getSymName().str();
  if (pipelined())
    name += "_stage" + std::to_string(stage);
  auto program = b.create<func::FuncOp>(fn.getLoc(), name, b.getFunctionType({}, {}));
  program->setAttr(kFuncMesh, fn->getAttr(kFuncMesh));
  // The pipeline axis comes first: stage s is ranks [s * n, (s + 1) * n).
  int64_t perStage = context.mesh.numDevices();
  program->setAttr(exec::kProgramRanks,
                   b.getDenseI64ArrayAttr(llvm::to_vector(
                       llvm::seq<int64_t>(stage * perStage, (stage + 1) * perStage))));
  if (pipelined())
    program->setAttr(kStage, b.getI64IntegerAttr(stage));
  Block *body = program.addEntryBlock();
  b.setInsertionPointToStart(body);

  // The arguments this stage reads (all of them without stages), or stores
  // (an argument returned as it is: by the first stage).
  Block &global = fn.getBody().front();
  for (BlockArgument arg : fn.getArguments()) {
    if ((!pipelined() || stageLoads(arg, stage)) && failed(load(arg)))
      return failure();
  }

  for (Operation &op : global) {
    b.setInsertionPointToEnd(body);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto name = fn.getResultAttrOfType<StringAttr>(i, graph::GraphDialect::kOutputAttr);
        if (!name)
          name = b.getStringAttr("result" + std::to_string(i));
        // Micro-batch pieces laid out as the result: each stores its rows
        // (scheduleLoadsAndStores moves the store to just after it).
        if (std::optional<StoredJoin> join = storedJoinOf(value.getDefiningOp())) {
          NdSbp layout = *layoutOf(join->result); // every piece's (storedJoinOf)
          int64_t count = static_cast<int64_t>(join->pieces.size());
          for (auto [k, piece] : llvm::enumerate(join->pieces)) {
            if (!mine(piece.getDefiningOp()))
              continue;
            FailureOr<Value> localValue = local(piece, layout, ret);
            if (failed(localValue))
              return failure();
            b.create<exec::StoreOp>(
                ret.getLoc(), *localValue, name,
                b.getDenseI64ArrayAttr(cast<RankedTensorType>(value.getType()).getShape()),
                NdSbpAttr::get(ctx, onProgramMesh(layout)),
                fn.getResultAttrOfType<DenseI64ArrayAttr>(i, graph::GraphDialect::kParamShapeAttr),
                b.getDenseI64ArrayAttr({static_cast<int64_t>(k), count}));
          }
          continue;
        }
        if (!mine(value.getDefiningOp()))
          continue;
        NdSbp layout = layouts.lookup(value);
        FailureOr<Value> localValue = local(value, layout, ret);
        if (failed(localValue))
          return failure();
        b.create<exec::StoreOp>(
            ret.getLoc(), *localValue, name,
            b.getDenseI64ArrayAttr(cast<RankedTensorType>(value.getType()).getShape()),
            NdSbpAttr::get(ctx, onProgramMesh(layout)),
            fn.getResultAttrOfType<DenseI64ArrayAttr>(i, graph::GraphDialect::kParamShapeAttr),
            /*rows=*/nullptr);
      }
      b.create<func::ReturnOp>(ret.getLoc());
      continue;
    }
    if (isStoredJoin(&op))
      continue; // its pieces are stored as they are made
    if (!mine(&op)) {
      if (pipelined() && failed(exchange(&op)))
        return failure();
      continue;
    }
    if (auto boxing = dyn_cast<BoxingOp>(op)) {
      if (failed(lowerBoxing(boxing)) || (pipelined() && failed(exchange(&op))))
        return failure();
      continue;
    }
    auto operandLayouts = op.getAttrOfType<ArrayAttr>(kOperandLayouts);
    auto resultLayouts = op.getAttrOfType<ArrayAttr>(kResultLayouts);
    if (!operandLayouts || !resultLayouts || operandLayouts.size() != op.getNumOperands() ||
        resultLayouts.size() != op.getNumResults())
      return op.emitOpError() << "has no signature; run --sbp-propagate (or --sbp-search) and "
                                 "--sbp-insert-boxing first";
    IRMapping operands;
    for (auto [value, attr] : llvm::zip(op.getOperands(), operandLayouts)) {
      FailureOr<Value> localValue = local(value, cast<NdSbpAttr>(attr).toLayout(), &op);
      if (failed(localValue))
        return failure();
      operands.map(value, *localValue);
    }
    SmallVector<Type> types;
    for (auto [value, attr] : llvm::zip(op.getResults(), resultLayouts))
      types.push_back(localType(value, cast<NdSbpAttr>(attr).toLayout()));
    Operation *clone = cloneWithLocalShapes(b, &op, operands, types);
    for (StringRef name : {kOperandLayouts.data(), kResultLayouts.data(), kRunnerUp.data()})
      clone->removeAttr(name);
    if (OpOperand *ids = idsOperandOf(&op)) {
      unsigned i = ids->getOperandNumber();
      clone->setAttr(exec::kIndexPlace,
                     exec::indexPlaceAttr(ctx, indexPlaceOf(ids->get()),
                                          onProgramMesh(cast<NdSbpAttr>(operandLayouts[i]).toLayout())));
    }
    clone->removeAttr(kStage);
    for (auto [value, attr] : llvm::zip(op.getResults(), resultLayouts)) {
      mapping.map(value, clone->getResult(cast<OpResult>(value).getResultNumber()));
      layouts[value] = cast<NdSbpAttr>(attr).toLayout();
    }
    if (pipelined() && failed(exchange(&op)))
      return failure();
  }
  for (NamedAttribute attr : fn->getAttrs())
    if (attr.getName().getValue().starts_with("sbp.") && attr.getName() != kFuncMesh &&
        attr.getName() != kFuncStages)
      program->setAttr(attr.getName(), attr.getValue());
  scheduleLoadsAndStores(*body);
  receiveWhenRead(*body);
  return success();
}

class SbpSpmdizePass : public sbpc::sbp::impl::SbpSpmdizeBase<SbpSpmdizePass> {
public:
  using SbpSpmdizeBase::SbpSpmdizeBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> functions;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && !exec::isProgram(fn))
        functions.push_back(fn);
    std::optional<int64_t> pipelineStages;
    MeshOp meshOp;
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) -> LogicalResult {
                                 if (!llvm::is_contained(functions, fn))
                                   return success();
                                 auto attr = fn->getAttrOfType<IntegerAttr>(kFuncStages);
                                 int64_t stages = attr ? attr.getInt() : 1;
                                 if (stages > 1 && llvm::is_contained(context.mesh.axes,
                                                                      kPipelineAxis.str()))
                                   return fn.emitOpError()
                                          << "is placed on pipeline stages, but its mesh "
                                             "already has an axis named '"
                                          << kPipelineAxis << "'";
                                 // (The programs' mesh is the stages' by the
                                 // function's: it must be one sbpc runs.)
                                 if (stages > 1) {
                                   sbprt::Mesh whole = context.meshOp.toMesh();
                                   whole.axes.insert(whole.axes.begin(), kPipelineAxis.str());
                                   whole.shape.insert(whole.shape.begin(), stages);
                                   if (std::string problem = sbprt::checkMesh(whole);
                                       !problem.empty())
                                     return fn.emitOpError()
                                            << "cannot run " << stages
                                            << " pipeline stages: their mesh " << problem;
                                 }
                                 if (pipelineStages && *pipelineStages != stages)
                                   return fn.emitOpError()
                                          << "has " << stages << " pipeline stages, another "
                                          << "function of the module " << *pipelineStages;
                                 pipelineStages = stages;
                                 meshOp = context.meshOp;
                                 for (int64_t s = 0; s < stages; ++s)
                                   if (failed(Spmdizer(fn, context, stages, s).run()))
                                     return failure();
                                 return success();
                               })))
      return signalPassFailure();
    // The programs run on the mesh of the stages, the pipeline axis first.
    if (pipelineStages && *pipelineStages > 1) {
      sbprt::Mesh sub = meshOp.toMesh();
      SmallVector<StringRef> axes = {kPipelineAxis};
      axes.append(sub.axes.begin(), sub.axes.end());
      SmallVector<int64_t> shape = {*pipelineStages};
      shape.append(sub.shape.begin(), sub.shape.end());
      OpBuilder b(meshOp);
      meshOp.setAxesAttr(b.getStrArrayAttr(axes));
      meshOp.setShapeAttr(b.getDenseI64ArrayAttr(shape));
    }
    // The global functions go once every program is built (erasing them
    // while iterating would invalidate the walk).
    for (func::FuncOp fn : functions)
      fn.erase();
  }
};

} // namespace
