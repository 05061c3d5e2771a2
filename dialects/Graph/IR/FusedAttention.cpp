// Attention's cores that --exec-fuse makes flash attention, on the graph.
#include "dialects/Graph/IR/FusedAttention.h"

#include "llvm/ADT/SmallVector.h"

#include <tuple>

using namespace mlir;

namespace sbpc::graph {

std::optional<std::pair<Value, Value>> scaledOperand(MulOp mul) {
  auto isScalar = [](Value v) { return cast<RankedTensorType>(v.getType()).getRank() == 0; };
  if (isScalar(mul.getRhs()) && mul.getLhs().getType() == mul.getResult().getType())
    return std::make_pair(mul.getLhs(), mul.getRhs());
  if (isScalar(mul.getLhs()) && mul.getRhs().getType() == mul.getResult().getType())
    return std::make_pair(mul.getRhs(), mul.getLhs());
  return std::nullopt;
}

bool overLastAxis(Value value, int64_t axis) {
  return axis == cast<RankedTensorType>(value.getType()).getRank() - 1;
}

bool attentionShapes(Value q, Value k, Value v) {
  auto qType = cast<RankedTensorType>(q.getType());
  auto kType = cast<RankedTensorType>(k.getType()), vType = cast<RankedTensorType>(v.getType());
  int64_t rank = qType.getRank(), d = qType.getShape().back();
  return rank >= 3 && kType == vType && kType.getRank() == rank &&
         kType.getElementType() == qType.getElementType() && kType.getShape().back() == d &&
         qType.getShape().drop_back(2) == kType.getShape().drop_back(2) && d > 0 && d % 2 == 0 &&
         d <= 128;
}

bool lhsReaders(Value value, Operation *except, Block *block, MatmulOp &plain,
                MatmulOp &transposed) {
  for (Operation *user : value.getUsers()) {
    if (user == except)
      continue;
    auto matmul = dyn_cast<MatmulOp>(user);
    if (!matmul || matmul->getBlock() != block || matmul.getLhs() != value ||
        matmul.getRhs() == value || matmul.getTransposeRhs())
      return false;
    MatmulOp &slot = matmul.getTransposeLhs() ? transposed : plain;
    if (slot)
      return false;
    slot = matmul;
  }
  return true;
}

namespace {

/// A softmax's forward chain: its probabilities, from matmul(q, k^T), then
/// a scale and a causal mask (each optional).
struct Scores {
  Value q, k, scale;
  bool causal = false;
  /// The scores, their scaled and masked forms, the probabilities.
  SmallVector<Value, 4> values;
};

/// softmax(causal_mask(matmul(q, k^T) * s)) over the last axis, each
/// intermediate read only by the next.
std::optional<Scores> scoresOf(SoftmaxOp softmax) {
  if (!overLastAxis(softmax.getInput(), softmax.getAxis()))
    return std::nullopt;
  Block *block = softmax->getBlock();
  Scores scores;
  scores.values.push_back(softmax.getResult());
  Value input = softmax.getInput();
  if (auto mask = soleProducer<CausalMaskOp>(input, block)) {
    scores.causal = true;
    scores.values.push_back(input);
    input = mask.getInput();
  }
  if (auto mul = soleProducer<MulOp>(input, block))
    if (auto scaled = scaledOperand(mul)) {
      scores.values.push_back(input);
      std::tie(input, scores.scale) = *scaled;
    }
  auto product = soleProducer<MatmulOp>(input, block);
  if (!product || product.getTransposeLhs() || !product.getTransposeRhs())
    return std::nullopt;
  scores.values.push_back(input);
  scores.q = product.getLhs();
  scores.k = product.getRhs();
  return scores;
}

/// The only reader of `value`, in `block`, when it has one.
Operation *soleReader(Value value, Block *block) {
  if (!value.hasOneUse())
    return nullptr;
  Operation *user = *value.user_begin();
  return user->getBlock() == block ? user : nullptr;
}

/// A forward core: the probabilities, read only by matmul(p, v).
struct Forward {
  Value q, k, v, scale, probs;
  bool causal;
  Operation *output;
};

} // namespace

double FusedAttention::storedShare(Value value, size_t elementBytes,
                                   function_ref<bool(unsigned)> fuses) const {
  auto core = coreOf.find(value);
  if (core == coreOf.end() || !fuses(core->second))
    return 1.0;
  auto kept = keptBy.find(value);
  if (kept == keptBy.end() || cores[kept->second].logSumExp != value || !fuses(kept->second))
    return 0.0;
  int64_t keys = cast<RankedTensorType>(value.getType()).getShape().back();
  return 4.0 / (static_cast<double>(elementBytes) * static_cast<double>(keys));
}

Operation *FusedAttention::livesUntil(Value value, function_ref<bool(unsigned)> fuses) const {
  auto kept = keptBy.find(value);
  if (kept == keptBy.end() || !fuses(kept->second))
    return nullptr;
  // The log-sum-exp exists only where the forward fuses too.
  if (auto core = coreOf.find(value); core != coreOf.end() && !fuses(core->second))
    return nullptr;
  return cores[kept->second].backward;
}

FusedAttention findFusedAttention(Block &block, function_ref<bool(Value)> inBf16) {
  FusedAttention found;
  auto takes = [&](Value q, Value k, Value v) {
    return attentionShapes(q, k, v) && inBf16(q) && inBf16(k) && inBf16(v);
  };
  auto add = [&](FusedAttention::Core core) {
    unsigned index = found.cores.size();
    for (Value value : core.unstored)
      found.coreOf[value] = index;
    for (Value value : {core.logSumExp, core.output})
      if (value)
        found.keptBy[value] = index;
    found.cores.push_back(std::move(core));
    return index;
  };
  auto opsOf = [](ArrayRef<Value> values, std::initializer_list<Operation *> more) {
    SmallVector<Operation *> ops;
    for (Value value : values)
      ops.push_back(value.getDefiningOp());
    ops.append(more.begin(), more.end());
    return ops;
  };
  // Forwards whose probabilities nothing else reads.
  SmallVector<std::pair<Forward, unsigned>> forwards;
  for (SoftmaxOp softmax : block.getOps<SoftmaxOp>()) {
    std::optional<Scores> scores = scoresOf(softmax);
    auto output = dyn_cast_or_null<MatmulOp>(soleReader(softmax.getResult(), &block));
    if (!scores || !output || output.getLhs() != softmax.getResult() ||
        output.getTransposeLhs() || output.getTransposeRhs() ||
        !takes(scores->q, scores->k, output.getRhs()))
      continue;
    FusedAttention::Core core;
    core.unstored.assign(scores->values.begin(), scores->values.end());
    core.ops = opsOf(core.unstored, {output});
    forwards.push_back({{scores->q, scores->k, output.getRhs(), scores->scale,
                         softmax.getResult(), scores->causal, output},
                        add(std::move(core))});
    ++found.forwards;
  }
  // Backwards, from the softmax's gradient.
  for (SoftmaxGradOp grad : block.getOps<SoftmaxGradOp>()) {
    auto softmax = grad.getOutput().getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax->getBlock() != &block || !overLastAxis(grad.getGrad(), grad.getAxis()))
      continue;
    std::optional<Scores> scores = scoresOf(softmax);
    if (!scores)
      continue;
    // The scores' gradient ds: the mask's and the scale's gradients after
    // the softmax's where the forward has them.
    SmallVector<Value, 8> values(scores->values.begin(), scores->values.end());
    Value ds = grad.getResult();
    values.push_back(ds);
    if (scores->causal) {
      auto maskGrad = dyn_cast_or_null<CausalMaskGradOp>(soleReader(ds, &block));
      if (!maskGrad)
        continue;
      ds = maskGrad.getResult();
      values.push_back(ds);
    }
    if (scores->scale) {
      auto mul = dyn_cast_or_null<MulOp>(soleReader(ds, &block));
      std::optional<std::pair<Value, Value>> scaled;
      if (mul)
        scaled = scaledOperand(mul);
      if (!scaled || scaled->first != ds || scaled->second != scores->scale)
        continue;
      ds = mul.getResult();
      values.push_back(ds);
    }
    auto dpProduct = soleProducer<MatmulOp>(grad.getGrad(), &block);
    if (!dpProduct || dpProduct.getTransposeLhs() || !dpProduct.getTransposeRhs())
      continue;
    values.push_back(grad.getGrad());
    Value probs = grad.getOutput(), q = scores->q, k = scores->k;
    Value dO = dpProduct.getLhs(), v = dpProduct.getRhs();
    MatmulOp output, dvProduct, dqProduct, dkProduct;
    if (!lhsReaders(probs, grad, &block, output, dvProduct) || !dvProduct ||
        dvProduct.getRhs() != dO || (output && output.getRhs() != v) ||
        !lhsReaders(ds, nullptr, &block, dqProduct, dkProduct) || !dqProduct || !dkProduct ||
        dqProduct.getRhs() != k || dkProduct.getRhs() != q || !takes(q, k, v) ||
        dO.getType() != q.getType())
      continue;
    // The forward that keeps the log-sum-exp: p v, or the latest earlier
    // core of the same operands (the probabilities recomputed).
    Operation *first = dvProduct->isBeforeInBlock(dpProduct) ? dvProduct : dpProduct;
    FusedAttention::Core core;
    core.unstored.assign(values.begin(), values.end());
    core.ops = opsOf(core.unstored, {dvProduct, dqProduct, dkProduct});
    core.backward = first;
    if (output) {
      if (!output->isBeforeInBlock(first))
        continue;
      core.ops.push_back(output);
      core.logSumExp = probs;
      core.output = output.getResult();
      ++found.forwards;
    } else {
      const std::pair<Forward, unsigned> *latest = nullptr;
      for (const auto &entry : forwards) {
        const Forward &forward = entry.first;
        if (forward.q == q && forward.k == k && forward.v == v && forward.scale == scores->scale &&
            forward.causal == scores->causal && forward.output->isBeforeInBlock(first) &&
            (!latest || latest->first.output->isBeforeInBlock(forward.output)))
          latest = &entry;
      }
      if (!latest)
        continue;
      const FusedAttention::Core &forward = found.cores[latest->second];
      core.ops.append(forward.ops.begin(), forward.ops.end());
      core.logSumExp = latest->first.probs;
      core.output = latest->first.output->getResult(0);
    }
    add(std::move(core));
    ++found.backwards;
  }
  return found;
}

} // namespace sbpc::graph
