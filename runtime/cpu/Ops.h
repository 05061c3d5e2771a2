// The graph ops on CPU, one function per op, taking the shapes the op's
// types give: the reference evaluator calls them with shapes read from the
// IR, generated rank programs with the same shapes spelled as constants.
// Kernels.h has the kernels underneath.
#pragma once

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <string>

namespace sbprt::cpu {

/// Bytes within the arena (reshapes, the input of in-place collectives);
/// the buffers may overlap.
void copy(void *dst, const void *src, size_t bytes);
/// Bytes from the program's own (host) data into the arena: constants.
void upload(void *dst, const void *src, size_t bytes);

/// A splat constant: `n` elements set to `value` (f32 or int64).
template <typename T> void fill(T *dst, int64_t n, T value) { std::fill_n(dst, n, value); }

/// graph.adamw_update with the 1-based step read from the arena.
void adamwUpdateOp(const float *param, const float *grad, const float *m, const float *v,
                   int64_t n, const float *step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, float *newParam, float *newM, float *newV);

/// The GEMMs graph.matmul is: `batch` products of m x k by k x n; a
/// rank-2 b is shared by every batch entry.
struct MatmulDims {
  int64_t batch, m, n, k;
  bool sharedB;
};
/// Inline: the CUDA GEMM shares it without linking the CPU kernels (and BLAS).
inline MatmulDims matmulDims(const Shape &aShape, const Shape &bShape, const Shape &cShape,
                             bool transposeA) {
  size_t r = cShape.size();
  int64_t batch = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    batch *= cShape[d];
  return {batch, cShape[r - 2], cShape[r - 1], aShape[r - (transposeA ? 2 : 1)],
          bShape.size() == 2};
}

/// exec.convert: f32 <-> bf16, element by element (to bf16: nearest, ties
/// to even).
template <typename From, typename To> void convert(const From *in, To *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(in[i]);
}

/// graph.matmul: c = op(a) x op(b), batched over c's leading dimensions; a
/// rank-2 `b` is shared by every batch entry. exec.causal_matmul names what
/// `causal` lets it skip: it goes in blocks of 64 rows or more, up to 16.
template <typename T>
void matmulOp(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *c,
              const Shape &cShape, bool transposeA, bool transposeB,
              Causal causal = Causal::None) {
  MatmulDims g = matmulDims(aShape, bShape, cShape, transposeA);
  int64_t blockRows = causal == Causal::None ? 0 : causalBlockRows(g.m, 64, 16);
  matmul(a, b, c, g.batch, g.m, g.n, g.k, transposeA, transposeB, g.sharedB, causal, blockRows);
}

/// exec.linear: y = x * op(w) + bias (then the GELU, or plus the residual
/// when there is one), over x's rows.
/// With the GELU, the sum before it into `preactivation` when not null.
template <typename T>
void linearOp(const T *x, const Shape &xShape, const T *w, const T *bias, const T *residual, T *y,
              const Shape &yShape, bool transposeW, bool gelu, T *preactivation = nullptr) {
  int64_t n = yShape.back(), k = xShape.back();
  linear(x, w, bias, residual, y, n ? sbprt::numElements(yShape) / n : 0, n, k, transposeW, gelu,
         preactivation);
}

/// exec.matmul_gelu_grad: dx = gelu_grad(pre, g * op(w)) over g's rows, and
/// the bias gradient (dx's column sums) when `biasGrad` is not null.
template <typename T>
void matmulGeluGradOp(const T *g, const Shape &gShape, const T *w, const T *pre, T *dx,
                      const Shape &dxShape, bool transposeW, T *biasGrad) {
  int64_t n = dxShape.back(), k = gShape.back();
  matmulGeluGrad(g, w, pre, dx, biasGrad, n ? sbprt::numElements(dxShape) / n : 0, n, k,
                 transposeW);
}

/// exec.matmul_bias_grad: dw = x^T dy for x [rows, k] and dy [rows, n], and
/// the bias gradient (dy's column sums).
template <typename T>
void matmulBiasGradOp(const T *x, const Shape &xShape, const T *dy, const Shape &dyShape, T *dw,
                      T *biasGrad) {
  matmulBiasGrad(x, dy, dw, biasGrad, xShape[0], xShape[1], dyShape[1]);
}

/// exec.attention over the trailing matrices of q [..., S, D], k [..., T, D]
/// and v [..., T, Dv]; the log-sum-exp [..., S] too when `lse` is not null.
template <typename T>
void attentionOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                 const Shape &vShape, const T *scale, bool causal, T *out, float *lse) {
  AttentionSizes n = attentionSizes(qShape, kShape, vShape);
  attention(q, k, v, scale, causal, out, n.batch, n.s, n.t, n.d, n.dv, lse);
}

/// exec.attention_grad over the same trailing matrices: the gradients of
/// q, k and v given attention's output, log-sum-exp and output gradient.
template <typename T>
void attentionGradOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                     const Shape &vShape, const T *out, const float *lse, const T *dout,
                     const T *scale, bool causal, T *dq, T *dk, T *dv) {
  AttentionSizes n = attentionSizes(qShape, kShape, vShape);
  attentionGrad(q, k, v, out, lse, dout, scale, causal, dq, dk, dv, n.batch, n.s, n.t, n.d, n.dv);
}

/// graph.layer_norm over the last dimension of `shape`.
template <typename T>
void layerNormOp(const T *x, const T *scale, const T *bias, T *y, const Shape &shape, float eps) {
  int64_t width = shape.back();
  layerNorm(x, scale, bias, y, sbprt::numElements(shape) / width, width, eps);
}
template <typename T>
void layerNormGradOp(const T *x, const T *scale, const T *dy, T *dx, T *dscale, T *dbias,
                     const Shape &shape, float eps) {
  int64_t width = shape.back();
  layerNormGrad(x, scale, dy, dx, dscale, dbias, sbprt::numElements(shape) / width, width, eps);
}

/// graph.causal_mask (fill -inf) and its gradient (fill 0) on the trailing
/// [s, s] blocks of `shape`.
template <typename T> void causalMaskOp(const T *x, T *y, const Shape &shape, float fill) {
  int64_t n = shape.back();
  causalMask(x, y, sbprt::numElements(shape) / (n * n), n, fill);
}

/// graph.embedding: rows of `table` picked by `indices` (of `count` ids).
template <typename T>
bool embeddingOp(const T *table, const Shape &tableShape, const int64_t *indices, int64_t count,
                 T *out, const IndexPlace &place, std::string &error) {
  return embedding(table, tableShape[0], tableShape[1], indices, count, out, place, error);
}
template <typename T>
bool embeddingGradOp(const int64_t *indices, int64_t count, const T *dy, const Shape &tableShape,
                     T *table, const IndexPlace &place, std::string &error) {
  return embeddingGrad(indices, count, dy, tableShape[1], table, tableShape[0], place, error);
}

/// graph.cross_entropy: the sum over positions of `logits` (classes last).
template <typename T>
bool crossEntropyOp(const T *logits, const Shape &logitsShape, const int64_t *targets, T *loss,
                    const IndexPlace &place, std::string &error) {
  int64_t classes = logitsShape.back();
  return crossEntropy(logits, targets, sbprt::numElements(logitsShape) / classes, classes, loss,
                      place, error);
}
template <typename T>
bool crossEntropyGradOp(const T *logits, const Shape &logitsShape, const int64_t *targets,
                        const T *lossGrad, T *dlogits, const IndexPlace &place,
                        std::string &error) {
  int64_t classes = logitsShape.back();
  return crossEntropyGrad(logits, targets, static_cast<float>(*lossGrad),
                          sbprt::numElements(logitsShape) / classes, classes, dlogits, place,
                          error);
}

} // namespace sbprt::cpu
