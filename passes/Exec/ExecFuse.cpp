// --exec-fuse: elementwise chains of an exec program into exec.fused ops.
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/FusedAttention.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Exec/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace sbpc::exec {
#define GEN_PASS_DEF_EXECFUSE
#include "passes/Exec/Passes.h.inc"
} // namespace sbpc::exec

using namespace mlir;
using namespace sbpc;
using graph::attentionShapes;
using graph::lhsReaders;
using graph::overLastAxis;
using graph::scaledOperand;
using graph::soleProducer;

namespace {

/// The graph ops an exec.fused body may hold: one float result from operands
/// that broadcast to it.
bool isElementwise(Operation *op) {
  if (!isa<graph::NegOp, graph::ExpOp, graph::LogOp, graph::TanhOp, graph::SqrtOp,
           graph::RsqrtOp, graph::ReluOp, graph::GeluOp, graph::AddOp, graph::SubOp,
           graph::MulOp, graph::DivOp, graph::ReluGradOp, graph::GeluGradOp>(op))
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && isa<FloatType>(type.getElementType()) && type.hasStaticShape();
}

/// The chain ending at `root`: elementwise producers of its operands, and of
/// theirs, each used only once (within the chain) and making a value of the
/// root's type, so nothing in between needs memory. Not a sum over
/// micro-batches (graph.accumulate) nor its first term: its adds run as
/// each micro-batch's term is made, and fused into the last they would
/// keep every micro-batch's gradient until the last micro-batch's.
SmallVector<Operation *> chainOf(Operation *root) {
  Type type = root->getResult(0).getType();
  SmallVector<Operation *> chain = {root}, work = {root};
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    // An add of a sum over micro-batches takes the running sum (or the
    // first micro-batch's term) as operand 0: made earlier, it stays out.
    bool accumulates = op->hasAttr(graph::GraphDialect::kAccumulateAttr);
    for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
      Operation *def = operand.getDefiningOp();
      if (!def || (accumulates && k == 0) || def->getBlock() != root->getBlock() ||
          !isElementwise(def) || def->hasAttr(graph::GraphDialect::kAccumulateAttr) ||
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

/// softmax(causal_mask(x * s)) over the last axis, with the mask or the
/// scale or both, into exec.softmax. The intermediates must have no other
/// use.
void fuseSoftmax(graph::SoftmaxOp softmax) {
  if (!overLastAxis(softmax.getInput(), softmax.getAxis()))
    return;
  Block *block = softmax->getBlock();
  SmallVector<Operation *> gone;
  Value input = softmax.getInput(), scale;
  auto mask = soleProducer<graph::CausalMaskOp>(input, block);
  if (mask) {
    gone.push_back(mask);
    input = mask.getInput();
  }
  if (auto mul = soleProducer<graph::MulOp>(input, block))
    if (auto scaled = scaledOperand(mul)) {
      gone.push_back(mul);
      std::tie(input, scale) = *scaled;
    }
  if (gone.empty())
    return;
  OpBuilder b(softmax);
  auto fused = b.create<exec::SoftmaxOp>(softmax.getLoc(), softmax.getType(), input, scale,
                                         static_cast<bool>(mask));
  fused->setDiscardableAttrs(softmax->getDiscardableAttrDictionary());
  softmax.getResult().replaceAllUsesWith(fused.getResult());
  softmax->erase();
  for (Operation *op : gone)
    op->erase();
}

/// The gradient chain ending at `root`: softmax_grad over the last axis,
/// then causal_mask_grad, then a mul by a scalar scale (the mask or the
/// mul or both), into exec.softmax_grad. With the mask, only where the
/// probabilities are a causal exec.softmax's: the fused op reads a row only
/// up to the diagonal, which is the whole gradient only when they are 0
/// past it. Returns the ops it erased (none when it fused nothing).
SmallVector<Operation *> fuseSoftmaxGrad(Operation *root) {
  Block *block = root->getBlock();
  SmallVector<Operation *> chain = {root};
  Value value = root->getResult(0), scale;
  if (auto mul = dyn_cast<graph::MulOp>(root)) {
    auto scaled = scaledOperand(mul);
    if (!scaled)
      return {};
    std::tie(value, scale) = *scaled;
  }
  auto maskGrad = dyn_cast<graph::CausalMaskGradOp>(root);
  if (!maskGrad && (maskGrad = soleProducer<graph::CausalMaskGradOp>(value, block)))
    chain.push_back(maskGrad);
  Value grad = maskGrad ? maskGrad.getGrad() : value;
  auto softmaxGrad = soleProducer<graph::SoftmaxGradOp>(grad, block);
  if (!softmaxGrad || !overLastAxis(grad, softmaxGrad.getAxis()))
    return {};
  auto probs = softmaxGrad.getOutput().getDefiningOp<exec::SoftmaxOp>();
  if (maskGrad && !(probs && probs.getCausal()))
    return {};
  chain.push_back(softmaxGrad);
  OpBuilder b(root);
  auto fused = b.create<exec::SoftmaxGradOp>(root->getLoc(), softmaxGrad.getType(),
                                             softmaxGrad.getOutput(), softmaxGrad.getGrad(),
                                             scale, static_cast<bool>(maskGrad));
  fused->setDiscardableAttrs(root->getDiscardableAttrDictionary());
  root->getResult(0).replaceAllUsesWith(fused.getResult());
  for (Operation *op : chain)
    op->erase();
  return chain;
}

/// add(matmul(x, w), b), then a gelu of the sum, into exec.linear: a
/// product by a shared weight, not transposing x, whose only use is the add
/// of a bias [N] (either operand order). Where the sum has uses besides the
/// gelu (a training step's gelu_grad), the linear layer's second result,
/// the preactivation, takes them.
void fuseLinear(graph::AddOp add) {
  Block *block = add->getBlock();
  auto type = cast<RankedTensorType>(add.getType());
  for (auto [product, bias] : {std::make_pair(add.getLhs(), add.getRhs()),
                               std::make_pair(add.getRhs(), add.getLhs())}) {
    auto matmul = soleProducer<graph::MatmulOp>(product, block);
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (!matmul || matmul.getTransposeLhs() || product.getType() != type ||
        cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2 ||
        biasType.getShape() != type.getShape().take_back() ||
        biasType.getElementType() != type.getElementType())
      continue;
    Operation *root = add;
    graph::GeluOp gelu;
    for (Operation *user : add->getUsers())
      if (auto found = dyn_cast<graph::GeluOp>(user); found && found->getBlock() == block) {
        gelu = found;
        break;
      }
    if (gelu)
      root = gelu;
    bool keepSum = gelu && !add->hasOneUse();
    OpBuilder b(add);
    auto linear = b.create<exec::LinearOp>(root->getLoc(), type, keepSum ? type : Type(),
                                           matmul.getLhs(), matmul.getRhs(), bias, Value(),
                                           matmul.getTransposeRhs(), static_cast<bool>(gelu));
    linear->setDiscardableAttrs(root->getDiscardableAttrDictionary());
    root->getResult(0).replaceAllUsesWith(linear.getResult());
    if (gelu) {
      gelu->erase();
      add.getResult().replaceAllUsesWith(linear.getPreactivation());
    }
    add->erase();
    matmul->erase();
    return;
  }
}

/// `value` as reshape(slice(whole)) taking index `index` of axis `axis`
/// and all of every other axis of `whole`, the slice's axis dropped by the
/// reshape; null where it is not.
Value wholeOfSlice(Value value, int64_t axis, int64_t &index) {
  auto reshape = value.getDefiningOp<graph::ReshapeOp>();
  auto slice = reshape ? reshape.getInput().getDefiningOp<graph::SliceOp>() : nullptr;
  if (!slice)
    return nullptr;
  auto whole = cast<RankedTensorType>(slice.getInput().getType());
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits();
  if (whole.getRank() <= axis || limits[axis] != starts[axis] + 1)
    return nullptr;
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < whole.getRank(); ++d) {
    if (d == axis)
      continue;
    if (starts[d] != 0 || limits[d] != whole.getDimSize(d))
      return nullptr;
    kept.push_back(whole.getDimSize(d));
  }
  if (cast<RankedTensorType>(value.getType()).getShape() != ArrayRef<int64_t>(kept))
    return nullptr;
  index = starts[axis];
  return slice.getInput();
}

/// GPT's query, key and value: exec.linear ops on one input whose weights
/// are the G slices w[:, g, :] of one [K, G, N] weight and whose biases the
/// slices b[g, :] of one [G, N] bias (c_attn, sliced so that tensor
/// parallelism splits heads, not q, k and v), into one exec.linear by the
/// whole [K, G * N] weight and the slices of its product: one GEMM G times
/// as wide, which keeps more of the GPU busy than G narrow ones.
bool fuseSiblingLinears(Value input) {
  // Group the input's plain linear layers by their weight's and bias's whole.
  // Each with the index of its slice.
  llvm::MapVector<std::pair<Value, Value>, SmallVector<std::pair<int64_t, exec::LinearOp>>>
      groups;
  for (Operation *user : input.getUsers()) {
    auto linear = dyn_cast<exec::LinearOp>(user);
    if (!linear || linear.getInput() != input || linear.getTransposeRhs() || linear.getGelu() ||
        linear.getResidual())
      continue;
    int64_t wIndex = -1, bIndex = -1;
    Value w = wholeOfSlice(linear.getWeight(), 1, wIndex),
          b = wholeOfSlice(linear.getBias(), 0, bIndex);
    if (!w || !b || wIndex != bIndex || linear->getBlock() != input.getParentBlock())
      continue;
    groups[{w, b}].push_back({wIndex, linear});
  }
  bool fused = false;
  for (auto &[wholes, linears] : groups) {
    auto [w, b] = wholes;
    auto wType = cast<RankedTensorType>(w.getType());
    auto bType = cast<RankedTensorType>(b.getType());
    if (wType.getRank() != 3 || bType.getRank() != 2)
      continue;
    int64_t k = wType.getDimSize(0), g = wType.getDimSize(1), n = wType.getDimSize(2);
    if (bType.getDimSize(0) != g || bType.getDimSize(1) != n ||
        static_cast<int64_t>(linears.size()) != g || g < 2)
      continue;
    // Each slice exactly once.
    SmallVector<exec::LinearOp> bySlice(g);
    for (auto [index, linear] : linears)
      if (index < g && !bySlice[index])
        bySlice[index] = linear;
    if (llvm::is_contained(bySlice, exec::LinearOp()))
      continue;
    exec::LinearOp first = *llvm::min_element(
        bySlice, [](exec::LinearOp a, exec::LinearOp b) { return a->isBeforeInBlock(b); });
    // The whole weight and bias must be there before the first of them.
    auto before = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return !def || def->isBeforeInBlock(first);
    };
    if (!before(w) || !before(b))
      continue;
    OpBuilder builder(first);
    Location loc = first.getLoc();
    auto outType = cast<RankedTensorType>(first.getResult().getType());
    Type element = outType.getElementType();
    SmallVector<int64_t> wide(outType.getShape()), grouped(outType.getShape());
    wide.back() = g * n;
    grouped.back() = g;
    grouped.push_back(n);
    Value weight = builder.create<graph::ReshapeOp>(
        loc, RankedTensorType::get({k, g * n}, wType.getElementType()), w);
    Value bias = builder.create<graph::ReshapeOp>(
        loc, RankedTensorType::get({g * n}, bType.getElementType()), b);
    auto linear = builder.create<exec::LinearOp>(loc, RankedTensorType::get(wide, element), Type(),
                                                 input, weight, bias, Value(), false, false);
    linear->setDiscardableAttrs(first->getDiscardableAttrDictionary());
    Value all = builder.create<graph::ReshapeOp>(loc, RankedTensorType::get(grouped, element),
                                                 linear.getResult());
    for (auto [index, old] : llvm::enumerate(bySlice)) {
      SmallVector<int64_t> starts(grouped.size(), 0), limits(grouped);
      starts[grouped.size() - 2] = index;
      limits[grouped.size() - 2] = index + 1;
      Value part = builder.create<graph::SliceOp>(old.getLoc(), all, starts, limits);
      auto result = builder.create<graph::ReshapeOp>(old.getLoc(), old.getResult().getType(), part);
      result->setDiscardableAttrs(old->getDiscardableAttrDictionary());
      old.getResult().replaceAllUsesWith(result.getResult());
    }
    for (exec::LinearOp old : bySlice) {
      Value oldWeight = old.getWeight(), oldBias = old.getBias();
      old->erase();
      // The weight's and bias's slices, unless the backward uses them too.
      for (Value dead : {oldWeight, oldBias})
        if (dead.use_empty()) {
          Operation *reshape = dead.getDefiningOp();
          Value sliced = reshape->getOperand(0);
          reshape->erase();
          if (sliced.use_empty())
            sliced.getDefiningOp()->erase();
        }
    }
    fused = true;
  }
  return fused;
}

/// add(linear, r) (either operand order) of an exec.linear without a GELU
/// or residual, used only there, and an r of the sum's type: a residual
/// connection, into the linear layer's epilogue (cuBLASLt adds r as its C).
/// The new linear goes where the add was, after all it reads.
void fuseResidual(graph::AddOp add) {
  for (auto [product, residual] : {std::make_pair(add.getLhs(), add.getRhs()),
                                   std::make_pair(add.getRhs(), add.getLhs())}) {
    auto linear = product.getDefiningOp<exec::LinearOp>();
    if (!linear || !linear->hasOneUse() || linear.getGelu() || linear.getResidual() ||
        linear->getBlock() != add->getBlock() || residual.getType() != add.getType() ||
        product.getType() != add.getType() || residual == product)
      continue;
    OpBuilder b(add);
    auto fused = b.create<exec::LinearOp>(add.getLoc(), add.getType(), Type(), linear.getInput(),
                                          linear.getWeight(), linear.getBias(), residual,
                                          linear.getTransposeRhs(), false);
    fused->setDiscardableAttrs(add->getDiscardableAttrDictionary());
    add.getResult().replaceAllUsesWith(fused.getResult());
    add->erase();
    linear->erase();
    return;
  }
}

/// Whether exec.attention's GPU kernels take q [..., S, D], k [..., T, D]
/// and v [..., T, D]: bf16, one rank (3 or more) and the same leading
/// dimensions, heads of an even width up to 128.
bool attentionOperands(Value q, Value k, Value v) {
  return cast<RankedTensorType>(q.getType()).getElementType().isBF16() &&
         attentionShapes(q, k, v);
}

/// matmul(softmax(matmul(q, k^T)), v), the softmax an exec.softmax (its
/// scale and mask) or a graph.softmax over the last axis, in bf16, into
/// exec.attention: the scores' product used only by the softmax, the
/// probabilities only by the product by v, q, k and v ones the GPU kernel
/// takes (attentionOperands).
void fuseAttention(Operation *softmax, Value scale, bool causal) {
  Block *block = softmax->getBlock();
  auto scores = soleProducer<graph::MatmulOp>(softmax->getOperand(0), block);
  Value probs = softmax->getResult(0);
  if (!scores || scores.getTransposeLhs() || !scores.getTransposeRhs() || !probs.hasOneUse())
    return;
  auto product = dyn_cast<graph::MatmulOp>(*probs.user_begin());
  if (!product || product->getBlock() != block || product.getLhs() != probs ||
      product.getTransposeLhs() || product.getTransposeRhs())
    return;
  Value q = scores.getLhs(), k = scores.getRhs(), v = product.getRhs();
  if (!attentionOperands(q, k, v))
    return;
  OpBuilder b(product);
  auto attention =
      b.create<exec::AttentionOp>(product.getLoc(), product.getType(), Type(), q, k, v, scale,
                                  causal);
  attention->setDiscardableAttrs(product->getDiscardableAttrDictionary());
  product.getResult().replaceAllUsesWith(attention.getResult());
  product->erase();
  softmax->erase();
  scores->erase();
}

/// Attention's backward around `ds`, the gradient of its scores (an
/// exec.softmax_grad of an exec.softmax, or a graph.softmax_grad of a
/// graph.softmax over the last axis), into exec.attention_grad, and its
/// forward into exec.attention with the log-sum-exp: in bf16, the scores
/// matmul(q, k^T) read only by the softmax; the probabilities p read by ds,
/// by matmul(p^T, dO) (the values' gradient) and by matmul(p, v) (the
/// output), the last missing where the forward is an exec.attention of q,
/// k and v already (the probabilities recomputed for the backward, as
/// --recompute selective does); ds's other operand matmul(dO, v^T) read
/// only by it; ds read by matmul(ds, k) and matmul(ds^T, q) (the queries'
/// and keys' gradients) alone; the head's width one the GPU kernels have.
/// Nothing [..., S, T] is left.
void fuseAttentionGrad(Operation *ds) {
  Block *block = ds->getBlock();
  Value probs, dp, scale;
  bool causal = false;
  if (auto grad = dyn_cast<exec::SoftmaxGradOp>(ds)) {
    auto softmax = grad.getProbs().getDefiningOp<exec::SoftmaxOp>();
    if (!softmax || softmax.getScale() != grad.getScale() ||
        softmax.getCausal() != grad.getCausal())
      return;
    std::tie(probs, dp, scale, causal) =
        std::make_tuple(grad.getProbs(), grad.getGrad(), grad.getScale(), grad.getCausal());
  } else if (auto grad = dyn_cast<graph::SoftmaxGradOp>(ds)) {
    auto softmax = grad.getOutput().getDefiningOp<graph::SoftmaxOp>();
    if (!softmax || !overLastAxis(softmax.getInput(), softmax.getAxis()) ||
        !overLastAxis(grad.getGrad(), grad.getAxis()))
      return;
    std::tie(probs, dp) = std::make_pair(grad.getOutput(), grad.getGrad());
  } else {
    return;
  }
  Operation *softmax = probs.getDefiningOp();
  auto scores = soleProducer<graph::MatmulOp>(softmax->getOperand(0), block);
  auto dpProduct = soleProducer<graph::MatmulOp>(dp, block);
  if (softmax->getBlock() != block || !scores || scores.getTransposeLhs() ||
      !scores.getTransposeRhs() || !dpProduct || dpProduct.getTransposeLhs() ||
      !dpProduct.getTransposeRhs())
    return;
  Value q = scores.getLhs(), k = scores.getRhs(), dO = dpProduct.getLhs(), v = dpProduct.getRhs();
  graph::MatmulOp output, dvProduct, dqProduct, dkProduct;
  if (!lhsReaders(probs, ds, block, output, dvProduct) || !dvProduct ||
      dvProduct.getRhs() != dO || (output && output.getRhs() != v) ||
      !lhsReaders(ds->getResult(0), nullptr, block, dqProduct, dkProduct) || !dqProduct ||
      !dkProduct || dqProduct.getRhs() != k || dkProduct.getRhs() != q)
    return;
  auto qType = cast<RankedTensorType>(q.getType()), kType = cast<RankedTensorType>(k.getType());
  if (!attentionOperands(q, k, v) || dO.getType() != qType)
    return;
  // The forward: p v, or an exec.attention of the same operands before the
  // backward (the latest of them).
  Operation *first = dvProduct->isBeforeInBlock(dpProduct) ? dvProduct : dpProduct;
  Operation *forward = output;
  if (!output)
    for (Operation *user : q.getUsers())
      if (auto attention = dyn_cast<exec::AttentionOp>(user))
        if (attention->getBlock() == block && attention.getQuery() == q &&
            attention.getKey() == k && attention.getValue() == v &&
            attention.getScale() == scale && attention.getCausal() == causal &&
            attention->isBeforeInBlock(first) &&
            (!forward || forward->isBeforeInBlock(attention)))
          forward = attention;
  if (!forward || !forward->isBeforeInBlock(first))
    return;
  OpBuilder b(forward);
  auto attention = dyn_cast<exec::AttentionOp>(forward);
  if (!attention || !attention.getLse()) {
    auto lseType = RankedTensorType::get(qType.getShape().drop_back(),
                                         Float32Type::get(ds->getContext()));
    attention = b.create<exec::AttentionOp>(forward->getLoc(), qType, lseType, q, k, v, scale,
                                            causal);
    attention->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
    forward->getResult(0).replaceAllUsesWith(attention.getResult());
    forward->erase();
  }
  b.setInsertionPoint(first);
  auto grad = b.create<exec::AttentionGradOp>(ds->getLoc(), qType, kType, kType, q, k, v,
                                              attention.getResult(), attention.getLse(), dO,
                                              scale, causal);
  grad->setDiscardableAttrs(ds->getDiscardableAttrDictionary());
  dqProduct.getResult().replaceAllUsesWith(grad.getQueryGrad());
  dkProduct.getResult().replaceAllUsesWith(grad.getKeyGrad());
  dvProduct.getResult().replaceAllUsesWith(grad.getValueGrad());
  for (Operation *op : {dqProduct.getOperation(), dkProduct.getOperation(), ds,
                        dvProduct.getOperation(), dpProduct.getOperation(), softmax,
                        scores.getOperation()})
    op->erase();
}

/// Whether `reduce` sums `value` over every axis but the last: a bias's
/// gradient.
bool sumsAllButLast(graph::ReduceSumOp reduce, Value value) {
  auto rank = cast<RankedTensorType>(value.getType()).getRank();
  return reduce.getInput() == value && rank >= 1 &&
         llvm::equal(reduce.getDims(), llvm::seq<int64_t>(0, rank - 1));
}

/// The graph.reduce_sum in `block` that sums `value` over every axis but
/// the last, if one does.
graph::ReduceSumOp biasGradOf(Value value, Block *block) {
  for (Operation *user : value.getUsers())
    if (auto reduce = dyn_cast<graph::ReduceSumOp>(user))
      if (reduce->getBlock() == block && sumsAllButLast(reduce, value))
        return reduce;
  return nullptr;
}

/// gelu_grad(pre, matmul(g, w)), a product by a shared weight not
/// transposing g and used only there, into exec.matmul_gelu_grad; with
/// the reduce_sum of the gradient over all axes but the last (the bias's
/// gradient of the layer before the GELU) as its second result.
void fuseGeluGrad(graph::GeluGradOp geluGrad) {
  Block *block = geluGrad->getBlock();
  auto matmul = soleProducer<graph::MatmulOp>(geluGrad.getGrad(), block);
  if (!matmul || matmul.getTransposeLhs() ||
      cast<RankedTensorType>(matmul.getRhs().getType()).getRank() != 2 ||
      cast<RankedTensorType>(matmul.getLhs().getType()).getRank() < 2 ||
      matmul.getType() != geluGrad.getType() || geluGrad.getInput().getType() != geluGrad.getType())
    return;
  graph::ReduceSumOp reduce = biasGradOf(geluGrad.getResult(), block);
  OpBuilder b(geluGrad);
  auto fused = b.create<exec::MatmulGeluGradOp>(
      geluGrad.getLoc(), geluGrad.getType(), reduce ? reduce.getType() : Type(), matmul.getLhs(),
      matmul.getRhs(), geluGrad.getInput(), matmul.getTransposeRhs());
  fused->setDiscardableAttrs(geluGrad->getDiscardableAttrDictionary());
  geluGrad.getResult().replaceAllUsesWith(fused.getResult());
  geluGrad->erase();
  matmul->erase();
  if (reduce) {
    reduce.getResult().replaceAllUsesWith(fused.getBiasGrad());
    reduce->erase();
  }
}

/// Whether `at` can use `value`: it is made before `at` (or is an
/// argument), or by reshapes of such a value, which can be copied to `at`.
bool availableAt(Value value, Operation *at) {
  Operation *def = value.getDefiningOp();
  if (!def || (def->getBlock() == at->getBlock() && def->isBeforeInBlock(at)))
    return true;
  auto reshape = dyn_cast<graph::ReshapeOp>(def);
  return reshape && def->getBlock() == at->getBlock() && availableAt(reshape.getInput(), at);
}

/// `value` for `at` to use (availableAt): itself, or copies of its
/// reshapes just before `at`.
Value bringTo(Value value, Operation *at) {
  Operation *def = value.getDefiningOp();
  if (!def || (def->getBlock() == at->getBlock() && def->isBeforeInBlock(at)))
    return value;
  auto reshape = cast<graph::ReshapeOp>(def);
  Value input = bringTo(reshape.getInput(), at);
  OpBuilder b(at);
  return b.create<graph::ReshapeOp>(reshape.getLoc(), reshape.getType(), input);
}

/// A weight's gradient, matmul(x, g2) with x transposed, where g2 is the
/// gradient g as [T, N] and a reduce_sum sums g over every axis but the
/// last (the bias's gradient), into exec.matmul_bias_grad, at the reduce
/// or the matmul, whichever comes first.
void fuseBiasGrad(graph::MatmulOp matmul) {
  Block *block = matmul->getBlock();
  auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
  if (!matmul.getTransposeLhs() || matmul.getTransposeRhs() || lhs.getRank() != 2 ||
      rhs.getRank() != 2)
    return;
  // The gradient the reduce sums: the rhs, or what one of its reshapes read.
  graph::ReduceSumOp reduce;
  for (Value grad = matmul.getRhs(); grad && !reduce;) {
    if (cast<RankedTensorType>(grad.getType()).getShape().back() == rhs.getDimSize(1))
      reduce = biasGradOf(grad, block);
    auto reshape = grad.getDefiningOp<graph::ReshapeOp>();
    grad = reshape ? reshape.getInput() : Value();
  }
  if (!reduce)
    return;
  Operation *at = reduce->isBeforeInBlock(matmul) ? reduce.getOperation() : matmul;
  if (!availableAt(matmul.getLhs(), at) || !availableAt(matmul.getRhs(), at))
    return;
  Value input = bringTo(matmul.getLhs(), at), gradRows = bringTo(matmul.getRhs(), at);
  OpBuilder b(at);
  auto fused = b.create<exec::MatmulBiasGradOp>(matmul.getLoc(), matmul.getType(), reduce.getType(),
                                                input, gradRows);
  fused->setDiscardableAttrs(matmul->getDiscardableAttrDictionary());
  matmul.getResult().replaceAllUsesWith(fused.getResult());
  reduce.getResult().replaceAllUsesWith(fused.getBiasGrad());
  for (Operation *gone : {matmul.getOperation(), reduce.getOperation()}) {
    SmallVector<Value> operands(gone->getOperands());
    gone->erase();
    // Reshapes left without a use (copied to the fused op's place).
    for (Value operand : operands)
      while (auto reshape = operand.getDefiningOp<graph::ReshapeOp>()) {
        if (!reshape->use_empty())
          break;
        operand = reshape.getInput();
        reshape->erase();
      }
  }
}

/// Whether `value` is 0 above the diagonal of its trailing square: the
/// probabilities of a causal exec.softmax or the gradient of a causal
/// exec.softmax_grad.
bool zeroAboveDiagonal(Value value) {
  Operation *op = value.getDefiningOp();
  if (auto softmax = dyn_cast_or_null<exec::SoftmaxOp>(op))
    return softmax.getCausal();
  auto grad = dyn_cast_or_null<exec::SoftmaxGradOp>(op);
  return grad && grad.getCausal();
}

/// Whether every use of `value` reads it only on and below the diagonal: a
/// causal exec.softmax's scores or a causal exec.softmax_grad's gradient.
bool readOnlyToDiagonal(Value value) {
  return !value.use_empty() && llvm::all_of(value.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto softmax = dyn_cast<exec::SoftmaxOp>(user))
      return softmax.getCausal();
    auto grad = dyn_cast<exec::SoftmaxGradOp>(user);
    return grad && grad.getCausal() && use.getOperandNumber() == 1; // the gradient
  });
}

/// A batched matmul of causal attention into exec.causal_matmul: its lhs
/// zero above the diagonal (p v, ds k, p^T dO, ds^T q), or its result read
/// only up to it (q k^T, dO v^T), on square trailing matrices.
void fuseCausalMatmul(graph::MatmulOp matmul) {
  auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
  auto result = cast<RankedTensorType>(matmul.getType());
  auto square = [](RankedTensorType type) {
    auto shape = type.getShape();
    return shape.size() >= 2 && shape[shape.size() - 1] == shape[shape.size() - 2];
  };
  bool lowerLhs = square(lhs) && zeroAboveDiagonal(matmul.getLhs());
  bool lowerResult = !lowerLhs && square(result) && readOnlyToDiagonal(matmul.getResult());
  if (!lowerLhs && !lowerResult)
    return;
  OpBuilder b(matmul);
  auto causal = b.create<exec::CausalMatmulOp>(matmul.getLoc(), result, matmul.getLhs(),
                                               matmul.getRhs(), matmul.getTransposeLhs(),
                                               matmul.getTransposeRhs(), lowerLhs, lowerResult);
  causal->setDiscardableAttrs(matmul->getDiscardableAttrDictionary());
  matmul.getResult().replaceAllUsesWith(causal.getResult());
  matmul->erase();
}

class ExecFusePass : public exec::impl::ExecFuseBase<ExecFusePass> {
public:
  using ExecFuseBase::ExecFuseBase;
  void runOnOperation() override {
    for (auto program : getOperation().getOps<func::FuncOp>()) {
      if (!exec::isProgram(program))
        continue;
      // Linear layers and softmax first: their adds, gelus and muls are
      // elementwise too.
      SmallVector<graph::AddOp> adds(program.getOps<graph::AddOp>());
      for (graph::AddOp add : adds)
        fuseLinear(add);
      // Linear layers that share an input and slice one weight: one GEMM
      // (Again after each fusion, which erases linear layers.)
      for (bool fused = true; fused;) {
        fused = false;
        for (auto linear : program.getOps<exec::LinearOp>())
          if ((fused = fuseSiblingLinears(linear.getInput())))
            break;
      }
      // Residual connections after them.
      SmallVector<graph::AddOp> residuals(program.getOps<graph::AddOp>());
      for (graph::AddOp add : residuals)
        fuseResidual(add);
      // The backward's linear layers: the GELU's gradient (with its bias's)
      // before the elementwise chains take it, then the other biases'
      // gradients with their weights'.
      SmallVector<graph::GeluGradOp> geluGrads(program.getOps<graph::GeluGradOp>());
      for (graph::GeluGradOp geluGrad : geluGrads)
        fuseGeluGrad(geluGrad);
      SmallVector<graph::MatmulOp> weightGrads(program.getOps<graph::MatmulOp>());
      for (graph::MatmulOp matmul : weightGrads)
        fuseBiasGrad(matmul);
      SmallVector<graph::SoftmaxOp> softmaxes(program.getOps<graph::SoftmaxOp>());
      for (graph::SoftmaxOp softmax : softmaxes)
        fuseSoftmax(softmax);
      // Attention whose probabilities nothing else reads (inference, or a
      // training step's forward that recomputes them for the backward).
      if (attention) {
        SmallVector<exec::SoftmaxOp> fused(program.getOps<exec::SoftmaxOp>());
        for (exec::SoftmaxOp softmax : fused)
          fuseAttention(softmax, softmax.getScale(), softmax.getCausal());
        SmallVector<graph::SoftmaxOp> plain(program.getOps<graph::SoftmaxOp>());
        for (graph::SoftmaxOp softmax : plain)
          if (overLastAxis(softmax.getInput(), softmax.getAxis()))
            fuseAttention(softmax, Value(), false);
      }
      SmallVector<Operation *> gradRoots;
      for (Operation &op : program.getBody().front())
        if (isa<graph::MulOp, graph::CausalMaskGradOp>(op))
          gradRoots.push_back(&op);
      // From the end: a mul after a mask gradient is the longer chain.
      llvm::DenseSet<Operation *> erased;
      for (Operation *root : llvm::reverse(gradRoots))
        if (!erased.contains(root))
          for (Operation *op : fuseSoftmaxGrad(root))
            erased.insert(op);
      // Attention's backward, where its probabilities' gradient is one op
      // (above) and the forward's exec.attention, if any, is there.
      if (attention) {
        SmallVector<Operation *> grads;
        for (Operation &op : program.getBody().front())
          if (isa<exec::SoftmaxGradOp, graph::SoftmaxGradOp>(op))
            grads.push_back(&op);
        for (Operation *grad : grads)
          fuseAttentionGrad(grad);
      }
      // After softmax's fusions, which say where the mask is.
      SmallVector<graph::MatmulOp> matmuls(program.getOps<graph::MatmulOp>());
      for (graph::MatmulOp matmul : matmuls)
        fuseCausalMatmul(matmul);
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
