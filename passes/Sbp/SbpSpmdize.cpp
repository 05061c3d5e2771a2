// --sbp-spmdize: a laid-out global function becomes one rank's exec program.
//
// Every value of the program is the rank's local tensor of a global value:
// arguments are loaded shard by shard, ops are cloned on local shapes
// (cloneWithLocalShapes, as the signatures define them), boxings become one
// exec op per hop, and results are stored shard by shard. The program is the
// same for every rank; what differs (which block to load, which part to
// keep) is computed at run time from the rank's mesh coordinates.
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
  Spmdizer(func::FuncOp fn, LayoutContext &context)
      : fn(fn), context(context), b(fn.getContext()) {}

  LogicalResult run();

private:
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
  int64_t axis = static_cast<int64_t>(hop.axis);
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
void scheduleLoadsAndStores(Block &body) {
  for (auto load : llvm::to_vector(body.getOps<exec::LoadOp>())) {
    if (load.getKind() != "input")
      continue;
    Operation *first = nullptr;
    for (Operation *user : load->getUsers()) {
      Operation *inBody = body.findAncestorOpInBlock(*user);
      if (inBody && (!first || inBody->isBeforeInBlock(first)))
        first = inBody;
    }
    if (first)
      load->moveBefore(first);
  }
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

LogicalResult Spmdizer::run() {
  MLIRContext *ctx = fn.getContext();
  if (!fn->hasAttr(kFuncMesh))
    return fn.emitOpError() << "has no layouts; run --sbp-propagate (or --sbp-search) first";
  b.setInsertionPoint(fn);
  auto program = b.create<func::FuncOp>(fn.getLoc(), fn.getSymName(), b.getFunctionType({}, {}));
  program->setAttr(kFuncMesh, fn->getAttr(kFuncMesh));
  program->setAttr(exec::kProgramRanks,
                   b.getDenseI64ArrayAttr(llvm::to_vector(
                       llvm::seq<int64_t>(0, context.mesh.numDevices()))));
  Block *body = program.addEntryBlock();
  b.setInsertionPointToStart(body);

  for (BlockArgument arg : fn.getArguments()) {
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
        NdSbpAttr::get(ctx, layout),
        fn.getArgAttrOfType<DenseI64ArrayAttr>(i, graph::GraphDialect::kParamShapeAttr));
    mapping.map(arg, load.getResult());
    layouts[arg] = layout;
  }

  for (Operation &op : fn.getBody().front()) {
    b.setInsertionPointToEnd(body);
    if (auto boxing = dyn_cast<BoxingOp>(op)) {
      if (failed(lowerBoxing(boxing)))
        return failure();
      continue;
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        auto name = fn.getResultAttrOfType<StringAttr>(i, graph::GraphDialect::kOutputAttr);
        NdSbp layout = layouts.lookup(value);
        FailureOr<Value> localValue = local(value, layout, ret);
        if (failed(localValue))
          return failure();
        b.create<exec::StoreOp>(ret.getLoc(), *localValue,
                                name ? name : b.getStringAttr("result" + std::to_string(i)),
                                b.getDenseI64ArrayAttr(
                                    cast<RankedTensorType>(value.getType()).getShape()),
                                NdSbpAttr::get(ctx, layout),
                                fn.getResultAttrOfType<DenseI64ArrayAttr>(
                                    i, graph::GraphDialect::kParamShapeAttr));
      }
      b.create<func::ReturnOp>(ret.getLoc());
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
                                          cast<NdSbpAttr>(operandLayouts[i]).toLayout()));
    }
    for (auto [value, attr] : llvm::zip(op.getResults(), resultLayouts)) {
      mapping.map(value, clone->getResult(cast<OpResult>(value).getResultNumber()));
      layouts[value] = cast<NdSbpAttr>(attr).toLayout();
    }
  }
  for (NamedAttribute attr : fn->getAttrs())
    if (attr.getName().getValue().starts_with("sbp.") && attr.getName() != kFuncMesh)
      program->setAttr(attr.getName(), attr.getValue());
  scheduleLoadsAndStores(*body);
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
    if (failed(forEachFunction(getOperation(), cluster,
                               [&](func::FuncOp fn, LayoutContext &context) {
                                 if (!llvm::is_contained(functions, fn))
                                   return success();
                                 return Spmdizer(fn, context).run();
                               })))
      return signalPassFailure();
    // The global functions go once every program is built (erasing them
    // while iterating would invalidate the walk).
    for (func::FuncOp fn : functions)
      fn.erase();
  }
};

} // namespace
