// The gradient rule of every graph op (GradientOpInterface): given the
// gradient of a scalar loss with respect to an op's results, the gradient
// with respect to its operands, built from graph ops. NumPy semantics:
// broadcast operands get the sum of the gradient over the broadcast
// dimensions.
#include "dialects/Graph/IR/GraphOps.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
using namespace sbpc::graph;

#include "dialects/Graph/IR/GraphInterfaces.cpp.inc"

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A scalar f32 constant (broadcasts against any tensor).
Value scalar(OpBuilder &b, Location loc, float value) {
  auto type = RankedTensorType::get({}, b.getF32Type());
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, value));
}

/// `grad` (of a broadcast result) summed down to `type`, the operand's.
Value unbroadcast(OpBuilder &b, Location loc, Value grad, RankedTensorType type) {
  ArrayRef<int64_t> from = typeOf(grad).getShape(), to = type.getShape();
  if (from == to)
    return grad;
  size_t lead = from.size() - to.size();
  SmallVector<int64_t> dims;
  for (size_t d = 0; d < from.size(); ++d)
    if (d < lead || (to[d - lead] == 1 && from[d] != 1))
      dims.push_back(static_cast<int64_t>(d));
  Value summed = grad;
  if (!dims.empty())
    summed = b.create<ReduceSumOp>(loc, grad, b.getDenseI64ArrayAttr(dims), /*keepdims=*/true);
  if (typeOf(summed).getShape() == to)
    return summed;
  return b.create<ReshapeOp>(loc, type, summed);
}

/// No gradient flows through this op's results: an error at the op.
LogicalResult notDifferentiable(Operation *op) {
  return op->emitOpError() << "has no gradient rule (it is itself a gradient or an update)";
}

/// The gradient of a reduction over `dims` given for its result: reshaped
/// to keep the reduced dimensions, broadcast back to the input's shape.
Value spread(OpBuilder &b, Location loc, Value grad, RankedTensorType input,
             ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t d : dims)
    kept[d] = 1;
  Value g = grad;
  if (typeOf(g).getShape() != ArrayRef<int64_t>(kept))
    g = b.create<ReshapeOp>(loc, RankedTensorType::get(kept, b.getF32Type()), g);
  return b.create<BroadcastOp>(loc, input, g);
}

/// Sums a batched matmul gradient over its leading (batch) dimensions down
/// to a shared rank-2 operand.
Value sumBatch(OpBuilder &b, Location loc, Value grad, RankedTensorType shared) {
  int64_t rank = typeOf(grad).getRank();
  if (rank == shared.getRank())
    return grad;
  SmallVector<int64_t> dims(rank - 2);
  std::iota(dims.begin(), dims.end(), 0);
  return b.create<ReduceSumOp>(loc, grad, b.getDenseI64ArrayAttr(dims), /*keepdims=*/false);
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {
  return success();
}

LogicalResult NegOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<NegOp>(getLoc(), dy[0]));
  return success();
}

LogicalResult ExpOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<MulOp>(getLoc(), dy[0], getResult()));
  return success();
}

LogicalResult LogOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<DivOp>(getLoc(), dy[0], getInput()));
  return success();
}

LogicalResult TanhOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                     SmallVectorImpl<Value> &dx) {
  // (1 - y^2) dy
  Location loc = getLoc();
  Value square = b.create<MulOp>(loc, getResult(), getResult());
  Value slope = b.create<SubOp>(loc, scalar(b, loc, 1.0f), square);
  dx.push_back(b.create<MulOp>(loc, dy[0], slope));
  return success();
}

LogicalResult SqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                     SmallVectorImpl<Value> &dx) {
  // dy / (2 y)
  Location loc = getLoc();
  Value twice = b.create<MulOp>(loc, getResult(), scalar(b, loc, 2.0f));
  dx.push_back(b.create<DivOp>(loc, dy[0], twice));
  return success();
}

LogicalResult RsqrtOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  // y = x^(-1/2): dx = -y / (2 x) dy
  Location loc = getLoc();
  Value ratio = b.create<DivOp>(loc, getResult(), getInput());
  Value slope = b.create<MulOp>(loc, ratio, scalar(b, loc, -0.5f));
  dx.push_back(b.create<MulOp>(loc, dy[0], slope));
  return success();
}

LogicalResult ReluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                     SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<ReluGradOp>(getLoc(), getInput(), dy[0]));
  return success();
}

LogicalResult GeluOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                     SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<GeluGradOp>(getLoc(), getInput(), dy[0]));
  return success();
}

LogicalResult AddOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(unbroadcast(b, getLoc(), dy[0], getLhs().getType()));
  dx.push_back(unbroadcast(b, getLoc(), dy[0], getRhs().getType()));
  return success();
}

LogicalResult SubOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  dx.push_back(unbroadcast(b, getLoc(), dy[0], getLhs().getType()));
  dx.push_back(unbroadcast(b, getLoc(), b.create<NegOp>(getLoc(), dy[0]), getRhs().getType()));
  return success();
}

LogicalResult MulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  Location loc = getLoc();
  dx.push_back(unbroadcast(b, loc, b.create<MulOp>(loc, dy[0], getRhs()), getLhs().getType()));
  dx.push_back(unbroadcast(b, loc, b.create<MulOp>(loc, dy[0], getLhs()), getRhs().getType()));
  return success();
}

LogicalResult DivOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  // y = l / r: dl = dy / r, dr = -dy y / r
  Location loc = getLoc();
  Value dl = b.create<DivOp>(loc, dy[0], getRhs());
  Value dr = b.create<NegOp>(loc, b.create<MulOp>(loc, dl, getResult()));
  dx.push_back(unbroadcast(b, loc, dl, getLhs().getType()));
  dx.push_back(unbroadcast(b, loc, dr, getRhs().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions, reductions, normalizations
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                       SmallVectorImpl<Value> &dx) {
  // C = op(A) op(B). With A' = op(A), B' = op(B): dA' = dC B'^T and
  // dB' = A'^T dC, each written as one matmul with transpose flags so that
  // it comes out in the operand's own orientation.
  Location loc = getLoc();
  Value a = getLhs(), c = dy[0];
  Value bm = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  RankedTensorType bType = getRhs().getType();
  bool shared = bType.getRank() == 2 && typeOf(a).getRank() > 2;
  auto matmul = [&](Value l, Value r, bool tl, bool tr) -> Value {
    return b.create<MatmulOp>(loc, l, r, tl, tr);
  };
  // dA: [.., M, K] (no ta) = dC B'^T; [.., K, M] (ta) = B' dC^T.
  Value da;
  if (!ta) {
    da = matmul(c, bm, false, !tb);
  } else {
    // B' on the left must be batched like dC when B is shared.
    Value left = bm;
    if (shared) {
      SmallVector<int64_t> shape(typeOf(a).getShape().drop_back(2));
      shape.append(bType.getShape().begin(), bType.getShape().end());
      left = b.create<BroadcastOp>(loc, RankedTensorType::get(shape, b.getF32Type()), bm);
    }
    da = matmul(left, c, tb, true);
  }
  // dB: [.., K, N] (no tb) = A'^T dC; [.., N, K] (tb) = dC^T A'.
  Value db;
  if (shared && !ta) {
    // Summed over the batch, a shared B's gradient is one GEMM over every
    // row of the batch: A as [rows, K] and dC as [rows, N] (reshapes take
    // no memory), not a batch of products summed after (for a language
    // model's head, [batch, vocab, hidden] floats in between).
    auto rowsOf = [&](Value v) {
      ArrayRef<int64_t> shape = typeOf(v).getShape();
      int64_t rows = 1;
      for (int64_t d : shape.drop_back())
        rows *= d;
      return b.create<ReshapeOp>(
          loc, RankedTensorType::get({rows, shape.back()}, b.getF32Type()), v);
    };
    Value a2 = rowsOf(a), c2 = rowsOf(c);
    db = !tb ? matmul(a2, c2, true, false) : matmul(c2, a2, true, false);
  } else {
    db = !tb ? matmul(a, c, !ta, false) : matmul(c, a, true, ta);
    if (shared)
      db = sumBatch(b, loc, db, bType);
  }
  dx.push_back(da);
  dx.push_back(db);
  return success();
}

LogicalResult ReduceSumOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  dx.push_back(spread(b, getLoc(), dy[0], getInput().getType(), getDims()));
  return success();
}

LogicalResult ReduceMeanOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                           SmallVectorImpl<Value> &dx) {
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= getInput().getType().getShape()[d];
  Location loc = getLoc();
  Value scaled = b.create<MulOp>(loc, dy[0], scalar(b, loc, 1.0f / static_cast<float>(count)));
  dx.push_back(spread(b, loc, scaled, getInput().getType(), getDims()));
  return success();
}

LogicalResult ReduceMaxOp::buildGradients(OpBuilder &, ArrayRef<Value>,
                                          SmallVectorImpl<Value> &) {
  return emitOpError() << "has no gradient rule yet (it needs a comparison op to pick the "
                          "maximum; use softmax or log_softmax, which have one)";
}

LogicalResult SoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<SoftmaxGradOp>(getLoc(), getResult(), dy[0], getAxis()));
  return success();
}

LogicalResult LogSoftmaxOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                           SmallVectorImpl<Value> &dx) {
  // dx = dy - softmax(x) * sum(dy, axis)
  Location loc = getLoc();
  Value probabilities = b.create<ExpOp>(loc, getResult());
  Value total = b.create<ReduceSumOp>(loc, dy[0],
                                      b.getDenseI64ArrayAttr({static_cast<int64_t>(getAxis())}),
                                      /*keepdims=*/true);
  dx.push_back(b.create<SubOp>(loc, dy[0], b.create<MulOp>(loc, probabilities, total)));
  return success();
}

LogicalResult LayerNormOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  auto grads = b.create<LayerNormGradOp>(getLoc(), getInput(), getScale(), dy[0], getEps());
  dx.append({grads.getInputGrad(), grads.getScaleGrad(), grads.getBiasGrad()});
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  SmallVector<int64_t> inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = static_cast<int64_t>(i);
  dx.push_back(b.create<TransposeOp>(getLoc(), dy[0], inverse));
  return success();
}

LogicalResult ReshapeOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                        SmallVectorImpl<Value> &dx) {
  if (!getInput().getType().getElementType().isF32()) {
    dx.push_back(nullptr);
    return success();
  }
  dx.push_back(b.create<ReshapeOp>(getLoc(), getInput().getType(), dy[0]));
  return success();
}

LogicalResult SliceOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                      SmallVectorImpl<Value> &dx) {
  ArrayRef<int64_t> shape = getInput().getType().getShape();
  SmallVector<int64_t> high;
  for (auto [size, limit] : llvm::zip(shape, getLimits()))
    high.push_back(size - limit);
  dx.push_back(b.create<PadOp>(getLoc(), dy[0], getStarts(), high));
  return success();
}

LogicalResult ConcatOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                       SmallVectorImpl<Value> &dx) {
  int64_t axis = static_cast<int64_t>(getAxis()), offset = 0;
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  for (Value input : getInputs()) {
    SmallVector<int64_t> starts(shape.size(), 0), limits(shape);
    int64_t size = typeOf(input).getShape()[axis];
    starts[axis] = offset;
    limits[axis] = offset + size;
    offset += size;
    dx.push_back(b.create<SliceOp>(getLoc(), dy[0], starts, limits));
  }
  return success();
}

LogicalResult EmbeddingOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  int64_t rows = getTable().getType().getShape()[0];
  dx.push_back(b.create<EmbeddingGradOp>(getLoc(), getIndices(), dy[0], rows));
  dx.push_back(nullptr);
  return success();
}

LogicalResult CausalMaskOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                           SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<CausalMaskGradOp>(getLoc(), dy[0]));
  return success();
}

LogicalResult CrossEntropyOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                             SmallVectorImpl<Value> &dx) {
  dx.push_back(b.create<CrossEntropyGradOp>(getLoc(), getLogits(), getTargets(), dy[0]));
  dx.push_back(nullptr);
  return success();
}

LogicalResult PadOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy, SmallVectorImpl<Value> &dx) {
  ArrayRef<int64_t> shape = getResult().getType().getShape();
  SmallVector<int64_t> limits;
  for (auto [size, high] : llvm::zip(shape, getHigh()))
    limits.push_back(size - high);
  dx.push_back(b.create<SliceOp>(getLoc(), dy[0], getLow(), limits));
  return success();
}

LogicalResult BroadcastOp::buildGradients(OpBuilder &b, ArrayRef<Value> dy,
                                          SmallVectorImpl<Value> &dx) {
  dx.push_back(unbroadcast(b, getLoc(), dy[0], getInput().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients and updates themselves: no second derivatives.
//===----------------------------------------------------------------------===//

#define SBPC_NOT_DIFFERENTIABLE(Op)                                                                \
  LogicalResult Op::buildGradients(OpBuilder &, ArrayRef<Value>, SmallVectorImpl<Value> &) {      \
    return notDifferentiable(*this);                                                               \
  }
SBPC_NOT_DIFFERENTIABLE(ReluGradOp)
SBPC_NOT_DIFFERENTIABLE(GeluGradOp)
SBPC_NOT_DIFFERENTIABLE(SoftmaxGradOp)
SBPC_NOT_DIFFERENTIABLE(LayerNormGradOp)
SBPC_NOT_DIFFERENTIABLE(EmbeddingGradOp)
SBPC_NOT_DIFFERENTIABLE(CausalMaskGradOp)
SBPC_NOT_DIFFERENTIABLE(CrossEntropyGradOp)
SBPC_NOT_DIFFERENTIABLE(SgdUpdateOp)
SBPC_NOT_DIFFERENTIABLE(AdamwUpdateOp)
#undef SBPC_NOT_DIFFERENTIABLE
