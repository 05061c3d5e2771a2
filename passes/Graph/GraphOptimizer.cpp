// --graph-optimizer: a differentiated model becomes one training step.
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace sbpc::graph {
#define GEN_PASS_DEF_GRAPHOPTIMIZER
#include "passes/Graph/Passes.h.inc"
} // namespace sbpc::graph

using namespace mlir;
using namespace sbpc::graph;

namespace {

struct Settings {
  bool adamw;
  double lr, momentum, beta1, beta2, eps, weightDecay;
};

LogicalResult addOptimizer(func::FuncOp fn, const Settings &settings) {
  MLIRContext *ctx = fn.getContext();
  Builder attrs(ctx);
  // The optimizer's states are named 'optimizer.*', as arguments and as
  // outputs: a name of the user's there would be taken for one.
  auto taken = [](StringAttr name) { return name && name.getValue().starts_with("optimizer."); };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    for (StringRef kind : {GraphDialect::kParamAttr, GraphDialect::kInputAttr})
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, kind); taken(name))
        return fn.emitOpError() << "already has an argument named '" << name.getValue()
                                << "': 'optimizer.' names are the states this pass adds "
                                   "(an optimizer added twice, or rename the argument)";
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, GraphDialect::kOutputAttr); taken(name))
      return fn.emitOpError() << "already has an output named '" << name.getValue()
                              << "': 'optimizer.' names are the states this pass adds "
                                 "(an optimizer added twice, or rename the output)";
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  llvm::StringMap<BlockArgument> params;
  for (BlockArgument arg : fn.getArguments())
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), GraphDialect::kParamAttr))
      params[name.getValue()] = arg;

  // The outputs to keep, and each gradient with its parameter.
  SmallVector<std::tuple<Value, StringAttr, DenseI64ArrayAttr>> kept;
  SmallVector<std::tuple<Value, BlockArgument, std::string>> updates;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto name = fn.getResultAttrOfType<StringAttr>(i, GraphDialect::kOutputAttr);
    StringRef text = name ? name.getValue() : "";
    if (!text.starts_with("grad.")) {
      kept.push_back(
          {value, name, fn.getResultAttrOfType<DenseI64ArrayAttr>(i, GraphDialect::kParamShapeAttr)});
      continue;
    }
    auto param = params.find(text.drop_front(5));
    if (param == params.end())
      return fn.emitOpError() << "output '" << text << "' names no parameter";
    updates.push_back({value, param->second, text.drop_front(5).str()});
  }
  if (updates.empty())
    return fn.emitOpError() << "has no grad.* outputs; run --graph-autodiff first";

  // State arguments: typed as their parameter, and stored as it is, so
  // that layouts (and strategies' seeds) apply to them alike. Added to the
  // block here and to the function's type and attributes once at the end
  // (one at a time rebuilds the list each time: quadratic in the states).
  Block &entry = fn.getBody().front();
  SmallVector<DictionaryAttr> argAttrs;
  fn.getAllArgAttrs(argAttrs);
  auto addParam = [&](Type type, const std::string &name, DenseI64ArrayAttr stored) {
    SmallVector<NamedAttribute> named = {
        attrs.getNamedAttr(GraphDialect::kParamAttr, attrs.getStringAttr(name))};
    if (stored)
      named.push_back(attrs.getNamedAttr(GraphDialect::kParamShapeAttr, stored));
    argAttrs.push_back(attrs.getDictionaryAttr(named));
    return entry.addArgument(type, fn.getLoc());
  };
  OpBuilder b(ret);
  Location loc = ret.getLoc();
  // The new values: each with its name and the shape its file has.
  SmallVector<std::tuple<Value, std::string, DenseI64ArrayAttr>> next;
  Value step;
  if (settings.adamw) {
    step = addParam(RankedTensorType::get({}, b.getF32Type()), "optimizer.step", nullptr);
    auto one = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), 1.0f));
    auto increment = b.create<AddOp>(loc, step, one);
    // Not the forward's: --sbp-pipeline would cut it as a forward op that
    // reads a parameter, after the last block, and put every update that
    // reads the step on the last stage.
    for (Operation *op : {one.getOperation(), increment.getOperation()})
      op->setAttr(GraphDialect::kBackwardAttr, b.getUnitAttr());
    next.push_back({increment, "optimizer.step", nullptr});
  }
  for (auto [outputGrad, param, name] : updates) {
    // The update runs in the parameter's type, and so do its results: a
    // reshape to the stored shape would move a tensor-parallel update's
    // shards all-to-all for nothing. The files get the stored shape.
    auto type = cast<RankedTensorType>(param.getType());
    auto stored = fn.getArgAttrOfType<DenseI64ArrayAttr>(param.getArgNumber(),
                                                         GraphDialect::kParamShapeAttr);
    Value grad = outputGrad, value = param;
    if (grad.getType() != type)
      grad = b.create<ReshapeOp>(loc, type, grad);
    if (settings.adamw) {
      Value m = addParam(type, "optimizer.m." + name, stored);
      Value v = addParam(type, "optimizer.v." + name, stored);
      auto update = b.create<AdamwUpdateOp>(
          loc, value, grad, m, v, step, b.getF64FloatAttr(settings.lr),
          b.getF64FloatAttr(settings.beta1), b.getF64FloatAttr(settings.beta2),
          b.getF64FloatAttr(settings.eps), b.getF64FloatAttr(settings.weightDecay));
      next.push_back({update.getNewParam(), name, stored});
      next.push_back({update.getNewM(), "optimizer.m." + name, stored});
      next.push_back({update.getNewV(), "optimizer.v." + name, stored});
    } else {
      Value velocity = addParam(type, "optimizer.velocity." + name, stored);
      auto update = b.create<SgdUpdateOp>(loc, value, grad, velocity,
                                          b.getF64FloatAttr(settings.lr),
                                          b.getF64FloatAttr(settings.momentum),
                                          b.getF64FloatAttr(settings.weightDecay));
      next.push_back({update.getNewParam(), name, stored});
      next.push_back({update.getNewVelocity(), "optimizer.velocity." + name, stored});
    }
  }

  SmallVector<Value> results;
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> resultAttrs;
  auto output = [&](Value value, StringAttr name, DenseI64ArrayAttr stored) {
    results.push_back(value);
    types.push_back(value.getType());
    SmallVector<NamedAttribute> resultAttr;
    if (name)
      resultAttr.push_back(attrs.getNamedAttr(GraphDialect::kOutputAttr, name));
    if (stored)
      resultAttr.push_back(attrs.getNamedAttr(GraphDialect::kParamShapeAttr, stored));
    resultAttrs.push_back(attrs.getDictionaryAttr(resultAttr));
  };
  for (auto [value, name, stored] : kept)
    output(value, name, stored);
  for (auto [value, name, stored] : next)
    output(value, attrs.getStringAttr(name), stored);
  ret->setOperands(results);
  fn.setType(FunctionType::get(ctx, entry.getArgumentTypes(), types));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  return success();
}

class GraphOptimizerPass : public sbpc::graph::impl::GraphOptimizerBase<GraphOptimizerPass> {
public:
  using GraphOptimizerBase::GraphOptimizerBase;

  void runOnOperation() override {
    if (optimizer != "sgd" && optimizer != "adamw") {
      getOperation().emitError() << "optimizer must be sgd or adamw, got '" << optimizer << "'";
      return signalPassFailure();
    }
    Settings settings{optimizer == "adamw", lr, momentum, beta1, beta2, eps, weightDecay};
    // Checked here, before any update op is built: a builder that infers
    // types cannot report its op's error.
    std::vector<std::pair<StringRef, double>> used = {{"lr", lr}, {"weight_decay", weightDecay}};
    if (settings.adamw)
      used.insert(used.end(), {{"beta1", beta1}, {"beta2", beta2}, {"eps", eps}});
    else
      used.push_back({"momentum", momentum});
    for (auto [name, value] : used)
      if (std::string problem = hyperparameterProblem(name, value); !problem.empty()) {
        getOperation().emitError() << "graph-optimizer: " << name << " " << problem;
        return signalPassFailure();
      }
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal() && failed(addOptimizer(fn, settings)))
        return signalPassFailure();
  }
};

} // namespace
