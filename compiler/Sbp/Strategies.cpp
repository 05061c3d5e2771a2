// Named strategies as seeds.
//
// Megatron's tensor parallelism in GPT-2 names: the fused QKV weight
// (viewed [H, 3, H]) and the MLP's first weight are split by output
// columns (heads), the two output projections by input rows; their biases
// follow the columns or stay broadcast. Everything else is broadcast, and
// the residual stream is pinned broadcast on the tp axis (embeddings out,
// layer norms in and out; in training, the stream's gradient into and out
// of the layer norms' gradients and into the embeddings'), which leaves
// one all-reduce per attention and per MLP, each way.
#include "compiler/Sbp/Strategies.h"

#include "compiler/Sbp/ValueLayouts.h"
#include "dialects/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

namespace sbpc {

using sbprt::NdSbp;
using sbprt::Sbp;

std::vector<std::string> strategyNames() {
  return {"auto", "drec", "exact", "dp", "tp", "dp-tp", "propagate"};
}

bool isSearchStrategy(const std::string &strategy) {
  return strategy == "auto" || strategy == "drec" || strategy == "exact";
}

std::optional<sbprt::Mesh> parseMesh(const std::string &text, std::string &error) {
  // Quoted back on one line, whatever it holds.
  std::string shown;
  llvm::raw_string_ostream os(shown);
  llvm::printEscapedString(text, os);
  sbprt::Mesh mesh;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(text).split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    long long value = 0;
    if (name.empty() || size.empty() || size.trim().getAsInteger(10, value)) {
      error = "--mesh '" + shown + "' must be NAME=SIZE[,NAME=SIZE...], e.g. dp=2,tp=4";
      return std::nullopt;
    }
    mesh.axes.push_back(name.trim().str());
    mesh.shape.push_back(value);
  }
  std::string problem = sbprt::checkMesh(mesh);
  if (!problem.empty()) {
    error = "--mesh '" + shown + "' " + problem;
    return std::nullopt;
  }
  return mesh;
}

namespace {

/// Megatron's layout of a parameter on one axis, by its GPT-2 or MLP name.
Sbp megatron(llvm::StringRef name) {
  if (name.ends_with("attn.c_attn.weight"))
    return Sbp::split(2); // [H, 3, H]: by heads
  if (name.ends_with("attn.c_attn.bias"))
    return Sbp::split(1); // [3, H]
  if (name.ends_with("mlp.c_fc.weight"))
    return Sbp::split(1);
  if (name.ends_with("mlp.c_fc.bias"))
    return Sbp::split(0);
  if (name.ends_with("c_proj.weight"))
    return Sbp::split(0);
  // MLP layers alternate column and row splits: fc0, fc2, ... by columns.
  if (name.starts_with("fc")) {
    unsigned layer = 0;
    auto [number, rest] = name.drop_front(2).split('.');
    if (!number.getAsInteger(10, layer))
      return layer % 2 == 0 ? (rest == "weight" ? Sbp::split(1) : Sbp::split(0))
                            : (rest == "weight" ? Sbp::split(0) : Sbp::broadcast());
  }
  return Sbp::broadcast();
}

/// The mesh axis a strategy part uses: the one named `name` if any, else
/// the only axis; -1 when neither exists.
int axisNamed(const sbprt::Mesh &mesh, const std::string &name) {
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i] == name)
      return static_cast<int>(i);
  return mesh.axes.size() == 1 ? 0 : -1;
}

} // namespace

std::optional<Seeds> strategySeeds(const std::string &strategy, const ModelSignature &model,
                                   const sbprt::Mesh &mesh, std::string &error) {
  size_t axes = mesh.axes.size();
  Seeds seeds;
  NdSbp allBroadcast(axes, Sbp::broadcast());
  // Propagation and search start from the user's seeds alone.
  if (strategy == "propagate" || isSearchStrategy(strategy))
    return seeds;
  if (strategy == "dp") {
    // The batch is split over every axis; parameters are replicated.
    for (const ModelArgument &arg : model.arguments)
      seeds.arguments[arg.name] =
          arg.kind == ModelArgument::Kind::Input ? NdSbp(axes, Sbp::split(0)) : allBroadcast;
    return seeds;
  }
  if (strategy != "tp" && strategy != "dp-tp") {
    error = "unknown strategy '" + strategy + "' (expected " + llvm::join(strategyNames(), ", ") + ")";
    return std::nullopt;
  }
  int tp = strategy == "tp" && axes == 1 ? 0 : axisNamed(mesh, "tp");
  int dp = strategy == "dp-tp" ? axisNamed(mesh, "dp") : -1;
  if (tp < 0 || (strategy == "dp-tp" && (dp < 0 || dp == tp || axes != 2))) {
    error = "strategy '" + strategy + "' needs " +
            (strategy == "tp" ? "a 1-D mesh or an axis named 'tp'"
                              : "a 2-D mesh with axes named 'dp' and 'tp'") +
            " (a pipeline's first axis pp aside)";
    return std::nullopt;
  }
  NdSbp activations = allBroadcast;
  if (dp >= 0)
    activations[dp] = Sbp::split(0);
  for (const ModelArgument &arg : model.arguments) {
    NdSbp layout = arg.kind == ModelArgument::Kind::Param ? allBroadcast : activations;
    if (arg.kind == ModelArgument::Kind::Param)
      layout[tp] = megatron(arg.name);
    seeds.arguments[arg.name] = layout;
  }
  seeds.residualStream = activations;
  return seeds;
}

} // namespace sbpc

using namespace mlir;

/// Pins the residual stream to `layout` with constraints: what embeddings
/// produce, what layer norms take and produce, and the model's results
/// where the layout fits them.
void sbpc::pinResidualStream(func::FuncOp fn, sbp::MeshOp mesh, const sbprt::NdSbp &layout) {
  OpBuilder b(fn.getContext());
  auto attr = sbp::NdSbpAttr::get(fn.getContext(), layout);
  auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  auto pinResult = [&](Operation *op) {
    b.setInsertionPointAfter(op);
    Value result = op->getResult(0);
    auto constraint = b.create<sbp::ConstraintOp>(op->getLoc(), result.getType(), result, meshRef, attr);
    result.replaceAllUsesExcept(constraint.getResult(), constraint);
  };
  // Each value pinned as an operand, once: its pinned value.
  llvm::DenseMap<Value, Value> pinned;
  auto pinOperand = [&](Operation *op, OpOperand &operand) {
    Value value = operand.get();
    Value &constraint = pinned[value];
    if (!constraint) {
      b.setInsertionPointAfterValue(value);
      constraint = b.create<sbp::ConstraintOp>(op->getLoc(), value.getType(), value, meshRef, attr);
    }
    operand.set(constraint);
  };
  fn.walk([&](Operation *op) {
    if (isa<graph::EmbeddingOp>(op))
      pinResult(op);
    if (auto norm = dyn_cast<graph::LayerNormOp>(op)) {
      pinOperand(norm, norm.getInputMutable());
      pinResult(norm);
    }
    // A training step's backward: the stream's gradient too, into and out
    // of each layer norm's gradient and into the embeddings' (Megatron's
    // backward all-reduces where its forward did); the norm's input is the
    // forward's pinned one.
    if (auto normGrad = dyn_cast<graph::LayerNormGradOp>(op)) {
      pinOperand(normGrad, normGrad.getInputMutable());
      pinOperand(normGrad, normGrad.getGradMutable());
      pinResult(normGrad);
    }
    if (auto embeddingGrad = dyn_cast<graph::EmbeddingGradOp>(op))
      pinOperand(embeddingGrad, embeddingGrad.getGradMutable());
  });
  sbprt::Mesh plain = mesh.toMesh();
  Operation *ret = fn.getBody().front().getTerminator();
  b.setInsertionPoint(ret);
  for (OpOperand &result : ret->getOpOperands()) {
    Value v = result.get();
    // A training step's updated parameters and optimizer states (or
    // reshapes of them) stay in their parameters' layouts, written shard by
    // shard, not gathered.
    Value made = v;
    while (auto reshape = made.getDefiningOp<graph::ReshapeOp>())
      made = reshape.getInput();
    if (!sbprt::checkLayout(plain, layout, sbp::shapeOf(v)).empty() ||
        made.getDefiningOp<graph::SgdUpdateOp>() || made.getDefiningOp<graph::AdamwUpdateOp>())
      continue;
    result.set(b.create<sbp::ConstraintOp>(ret->getLoc(), v.getType(), v, meshRef, attr));
  }
}

