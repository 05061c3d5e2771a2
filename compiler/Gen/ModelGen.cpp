// Builds GPT-2 and MLP models in the graph dialect.
#include "compiler/Gen/ModelGen.h"

#include "dialects/Graph/IR/GraphOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

using namespace mlir;
using namespace sbpc::graph;

namespace {

/// Collects the model function's arguments (inputs first, then parameters in
/// checkpoint order) while the body is being built, then creates the function.
class ModelBuilder {
public:
  ModelBuilder(MLIRContext *ctx, StringRef name)
      : ctx(ctx), module(ModuleOp::create(UnknownLoc::get(ctx))), body(new Block),
        b(ctx) {
    b.setInsertionPointToStart(body);
    funcName = name.str();
  }

  Value input(StringRef name, ArrayRef<int64_t> shape, Type elementType) {
    return addArgument(GraphDialect::kInputAttr, name, RankedTensorType::get(shape, elementType));
  }

  /// A parameter initialized as `init` says; `storedShape` is its shape in
  /// the checkpoint when the graph views it with another shape.
  Value param(StringRef name, ArrayRef<int64_t> shape, sbpc::ParamInit init,
              ArrayRef<int64_t> storedShape = {}) {
    Value arg = addArgument(GraphDialect::kParamAttr, name, f32(shape));
    if (!storedShape.empty())
      argAttrs.back().emplace_back(StringAttr::get(ctx, GraphDialect::kParamShapeAttr),
                                   DenseI64ArrayAttr::get(ctx, storedShape));
    init.name = name.str();
    ArrayRef<int64_t> stored = storedShape.empty() ? shape : storedShape;
    init.storedShape.assign(stored.begin(), stored.end());
    params.push_back(std::move(init));
    return arg;
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float32Type::get(ctx));
  }

  template <typename OpT, typename... Args> Value op(Args &&...args) {
    Operation *op = b.create<OpT>(b.getUnknownLoc(), std::forward<Args>(args)...);
    if (!region.empty())
      op->setAttr(GraphDialect::kRegionAttr, b.getStringAttr(region));
    if (selective)
      op->setAttr(GraphDialect::kSelectiveAttr, b.getUnitAttr());
    return op->getResult(0);
  }

  /// The block (graph.region) the ops built next belong to; "" for none.
  std::string region;
  /// Whether the ops built next are cheap to recompute (graph.selective).
  bool selective = false;

  Value scalar(float value) {
    return op<ConstantOp>(DenseElementsAttr::get(f32({}), value));
  }

  Value reshape(Value value, ArrayRef<int64_t> shape) { return op<ReshapeOp>(f32(shape), value); }

  /// GPT-2's LayerNorm (eps 1e-5) over the last dimension.
  Value layerNorm(Value x, Value scale, Value bias) {
    return op<LayerNormOp>(x, scale, bias, b.getF64FloatAttr(1e-5));
  }

  /// x @ w + bias: a linear layer on the last dimension.
  Value linear(Value x, Value w, Value bias) { return op<AddOp>(op<MatmulOp>(x, w), bias); }

  /// The mean cross-entropy over `positions`: the summed loss times 1/N, so
  /// that a batch split over devices stays a partial sum.
  Value meanCrossEntropy(Value logits, Value targets, int64_t positions) {
    Value sum = op<CrossEntropyOp>(logits, targets);
    return op<MulOp>(sum, scalar(1.0f / static_cast<float>(positions)));
  }

  void output(StringRef name, Value value) {
    results.push_back(value);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(GraphDialect::kOutputAttr, b.getStringAttr(name))));
  }

  sbpc::GeneratedModel finish() {
    b.create<func::ReturnOp>(b.getUnknownLoc(), results);
    SmallVector<Type> argTypes(body->getArgumentTypes()), resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module->getBody());
    auto fn = mb.create<func::FuncOp>(UnknownLoc::get(ctx), funcName,
                                      FunctionType::get(ctx, argTypes, resultTypes));
    fn.getBody().push_back(body);
    // All at once: one attribute per argument set one by one rebuilds the
    // list each time (quadratic in time and in the context's memory).
    SmallVector<DictionaryAttr> argDicts;
    for (ArrayRef<NamedAttribute> attrs : argAttrs)
      argDicts.push_back(DictionaryAttr::get(ctx, attrs));
    fn.setAllArgAttrs(argDicts);
    fn.setAllResultAttrs(resultAttrs);
    return {std::move(module), std::move(params)};
  }

private:
  Value addArgument(StringRef kind, StringRef name, Type type) {
    argAttrs.push_back({NamedAttribute(StringAttr::get(ctx, kind), StringAttr::get(ctx, name))});
    return body->addArgument(type, UnknownLoc::get(ctx));
  }

  MLIRContext *ctx;
  OwningOpRef<ModuleOp> module;
  Block *body;
  OpBuilder b;
  std::string funcName;
  SmallVector<SmallVector<NamedAttribute>> argAttrs;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  std::vector<sbpc::ParamInit> params;
};

/// GPT-2's initialization: weights N(0, 0.02), residual output projections
/// N(0, 0.02/sqrt(2 layers)), LayerNorm scales 1, biases 0.
sbpc::ParamInit normal(float stddev) { return {"", {}, sbpc::ParamInit::Kind::Normal, stddev}; }
const sbpc::ParamInit kZeros{"", {}, sbpc::ParamInit::Kind::Zeros, 0.0f};
const sbpc::ParamInit kOnes{"", {}, sbpc::ParamInit::Kind::Ones, 0.0f};

struct LayerParams {
  Value ln1Scale, ln1Bias, qkvWeight, qkvBias, projWeight, projBias;
  Value ln2Scale, ln2Bias, fcWeight, fcBias, fcProjWeight, fcProjBias;
};

} // namespace

/// Checks that every named option is in [1, kMaxGenOption]; sets `error`
/// for the first that is not.
static bool allInRange(std::initializer_list<std::pair<const char *, int64_t>> options,
                       std::string &error) {
  for (auto [name, value] : options) {
    if (value <= 0) {
      error = std::string("--") + name + " must be positive, got " + std::to_string(value);
      return false;
    }
    if (value > sbpc::kMaxGenOption) {
      error = std::string("--") + name + " must be at most " +
              std::to_string(sbpc::kMaxGenOption) + ", got " + std::to_string(value);
      return false;
    }
  }
  return true;
}

/// Causal multi-head self-attention on [B, S, H]; returns [B, S, H] before c_proj.
static Value attention(ModelBuilder &m, Value x, const LayerParams &p, const sbpc::GptOptions &o,
                       Value scale) {
  int64_t h = o.hidden, nh = o.heads, d = o.hidden / o.heads, b = o.batch, s = o.seq;
  // c_attn is viewed as [H, 3, H] so that Q, K and V are each whole and can
  // later be split by heads without touching the other two.
  Value heads[3];
  for (int64_t j = 0; j < 3; ++j) {
    Value w = m.reshape(m.op<SliceOp>(p.qkvWeight, ArrayRef<int64_t>{0, j, 0},
                                      ArrayRef<int64_t>{h, j + 1, h}),
                        {h, h});
    Value bias = m.reshape(
        m.op<SliceOp>(p.qkvBias, ArrayRef<int64_t>{j, 0}, ArrayRef<int64_t>{j + 1, h}), {h});
    Value proj = m.reshape(m.linear(x, w, bias), {b, s, nh, d});
    heads[j] = m.op<TransposeOp>(proj, ArrayRef<int64_t>{0, 2, 1, 3});
  }
  // The attention core: its scores and probabilities are [B, heads, S, S],
  // the largest activations, and cheap to recompute.
  m.selective = true;
  Value scores = m.op<MatmulOp>(heads[0], heads[1], /*transpose_lhs=*/false,
                                /*transpose_rhs=*/true);
  Value probs = m.op<SoftmaxOp>(m.op<CausalMaskOp>(m.op<MulOp>(scores, scale)), 3);
  Value context = m.op<MatmulOp>(probs, heads[2]);
  m.selective = false;
  Value merged = m.op<TransposeOp>(context, ArrayRef<int64_t>{0, 2, 1, 3});
  return m.reshape(merged, {b, s, h});
}

sbpc::GeneratedModel sbpc::buildGpt(MLIRContext *ctx, const GptOptions &o, std::string &error) {
  int64_t positions = o.positions ? o.positions : o.seq;
  if (!allInRange({{"layers", o.layers}, {"hidden", o.hidden}, {"heads", o.heads},
                    {"seq", o.seq}, {"batch", o.batch}, {"vocab", o.vocab},
                    {"positions", positions}},
                   error))
    return {};
  if (o.hidden % o.heads != 0) {
    error = "--hidden " + std::to_string(o.hidden) + " is not divisible by --heads " +
            std::to_string(o.heads);
    return {};
  }
  if (positions < o.seq) {
    error = "--positions " + std::to_string(positions) + " is smaller than --seq " +
            std::to_string(o.seq);
    return {};
  }
  ctx->loadDialect<GraphDialect, func::FuncDialect>();
  ModelBuilder m(ctx, "gpt");
  int64_t h = o.hidden, b = o.batch, s = o.seq;
  Type i64 = IntegerType::get(ctx, 64);
  Value tokens = m.input("tokens", {b, s}, i64);
  Value targets = o.loss ? m.input("targets", {b, s}, i64) : Value();
  Value wte = m.param("wte.weight", {o.vocab, h}, normal(0.02f));
  Value wpe = m.param("wpe.weight", {positions, h}, normal(0.02f));
  sbpc::ParamInit residual = normal(0.02f / std::sqrt(2.0f * static_cast<float>(o.layers)));
  std::vector<LayerParams> layers(o.layers);
  for (int64_t i = 0; i < o.layers; ++i) {
    std::string p = "h." + std::to_string(i) + ".";
    LayerParams &l = layers[i];
    l.ln1Scale = m.param(p + "ln_1.weight", {h}, kOnes);
    l.ln1Bias = m.param(p + "ln_1.bias", {h}, kZeros);
    l.qkvWeight = m.param(p + "attn.c_attn.weight", {h, 3, h}, normal(0.02f), {h, 3 * h});
    l.qkvBias = m.param(p + "attn.c_attn.bias", {3, h}, kZeros, {3 * h});
    l.projWeight = m.param(p + "attn.c_proj.weight", {h, h}, residual);
    l.projBias = m.param(p + "attn.c_proj.bias", {h}, kZeros);
    l.ln2Scale = m.param(p + "ln_2.weight", {h}, kOnes);
    l.ln2Bias = m.param(p + "ln_2.bias", {h}, kZeros);
    l.fcWeight = m.param(p + "mlp.c_fc.weight", {h, 4 * h}, normal(0.02f));
    l.fcBias = m.param(p + "mlp.c_fc.bias", {4 * h}, kZeros);
    l.fcProjWeight = m.param(p + "mlp.c_proj.weight", {4 * h, h}, residual);
    l.fcProjBias = m.param(p + "mlp.c_proj.bias", {h}, kZeros);
  }
  Value lnfScale = m.param("ln_f.weight", {h}, kOnes);
  Value lnfBias = m.param("ln_f.bias", {h}, kZeros);

  Value positionsUsed =
      positions == s ? wpe
                     : m.op<SliceOp>(wpe, ArrayRef<int64_t>{0, 0}, ArrayRef<int64_t>{s, h});
  Value x = m.op<AddOp>(m.op<EmbeddingOp>(wte, tokens), positionsUsed);
  Value scale = m.scalar(1.0f / std::sqrt(static_cast<float>(o.hidden / o.heads)));
  for (auto [i, l] : llvm::enumerate(layers)) {
    m.region = "h." + std::to_string(i);
    Value a = m.layerNorm(x, l.ln1Scale, l.ln1Bias);
    x = m.op<AddOp>(x, m.linear(attention(m, a, l, o, scale), l.projWeight, l.projBias));
    Value f = m.layerNorm(x, l.ln2Scale, l.ln2Bias);
    f = m.op<GeluOp>(m.linear(f, l.fcWeight, l.fcBias));
    x = m.op<AddOp>(x, m.linear(f, l.fcProjWeight, l.fcProjBias));
  }
  m.region.clear();
  x = m.layerNorm(x, lnfScale, lnfBias);
  Value logits = m.op<MatmulOp>(x, wte, /*transpose_lhs=*/false, /*transpose_rhs=*/true);
  m.output("logits", logits);
  if (o.loss)
    m.output("loss", m.meanCrossEntropy(logits, targets, o.batch * o.seq));
  return m.finish();
}

sbpc::GeneratedModel sbpc::buildMlp(MLIRContext *ctx, const MlpOptions &o, std::string &error) {
  if (!allInRange({{"batch", o.batch}, {"inputs", o.inputs}, {"hidden", o.hidden},
                    {"outputs", o.outputs}, {"layers", o.layers}},
                   error))
    return {};
  ctx->loadDialect<GraphDialect, func::FuncDialect>();
  ModelBuilder m(ctx, "mlp");
  Value x = m.input("x", {o.batch, o.inputs}, Float32Type::get(ctx));
  Value targets = o.loss ? m.input("targets", {o.batch}, IntegerType::get(ctx, 64)) : Value();
  std::vector<std::pair<Value, Value>> weights;
  for (int64_t i = 0; i < o.layers; ++i) {
    int64_t in = i == 0 ? o.inputs : o.hidden;
    int64_t out = i + 1 == o.layers ? o.outputs : o.hidden;
    std::string p = "fc" + std::to_string(i) + ".";
    // He initialization suits the ReLU between the layers.
    Value w = m.param(p + "weight", {in, out}, normal(std::sqrt(2.0f / static_cast<float>(in))));
    weights.emplace_back(w, m.param(p + "bias", {out}, kZeros));
  }
  for (auto [i, wb] : llvm::enumerate(weights)) {
    m.region = "fc" + std::to_string(i);
    x = m.linear(x, wb.first, wb.second);
    if (i + 1 < weights.size())
      x = m.op<ReluOp>(x);
  }
  m.region.clear();
  m.output("logits", x);
  if (o.loss)
    m.output("loss", m.meanCrossEntropy(x, targets, o.batch));
  return m.finish();
}
