// Reference CPU kernels on row-major buffers: the reference evaluator and
// the CPU rank executables call the same code. The float kernels are
// instantiated for T = float and T = bf16 (compute in f32 or wider, round
// once on the write); the optimizer updates are f32 only.
#pragma once

#include "runtime/BFloat16.h"
#include "runtime/CausalGemm.h"
#include "runtime/Layout.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sbprt::cpu {

using Shape = std::vector<int64_t>;

enum class UnaryKind { Neg, Exp, Log, Tanh, Sqrt, Rsqrt, Relu, Gelu };
enum class BinaryKind { Add, Sub, Mul, Div };
enum class ReduceKind { Sum, Mean, Max };

template <typename T>
void unary(UnaryKind kind, const T *in, T *out, int64_t n);

/// out = lhs (op) rhs with NumPy broadcasting; shapes align at the last dimension.
template <typename T>
void binary(BinaryKind kind, const T *lhs, const Shape &lhsShape, const T *rhs,
            const Shape &rhsShape, T *out, const Shape &outShape);

/// For each of `batch` entries: C[m,n] = op(A)[m,k] * op(B)[k,n], row-major,
/// where op transposes when asked; B is one matrix for all entries when `sharedB`.
/// With `causal`, in blocks of `blockRows` of C's rows, each computing what
/// the causal kind needs (runtime/CausalGemm.h); 0 rows: the whole product.
template <typename T>
void matmul(const T *a, const T *b, T *c, int64_t batch, int64_t m, int64_t n,
            int64_t k, bool transposeA, bool transposeB, bool sharedB,
            Causal causal = Causal::None, int64_t blockRows = 0);

/// exec.linear: y[rows, n] = x[rows, k] * w + bias, then the GELU when
/// `gelu`, or plus `residual` [rows, n] when there is one; w is [k, n]
/// ([n, k] when `transposeW`). In f32 the bits of matmul, binary Add and
/// unary Gelu (or a second Add) one after the other; bf16 rounds once.
/// With the GELU, `preactivation` (when not null) gets the sum before it.
template <typename T>
void linear(const T *x, const T *w, const T *bias, const T *residual, T *y, int64_t rows, int64_t n,
            int64_t k, bool transposeW, bool gelu, T *preactivation = nullptr);

/// exec.matmul_gelu_grad: dx[rows, n] = gelu_grad(pre, g[rows, k] * w)
/// (w [k, n], or [n, k] when `transposeW`), and when `biasGrad` is not
/// null the sums of dx's columns into it: in f32 the bits of matmul,
/// gelu_grad and reduce_sum one after the other; bf16 rounds dx once and
/// sums it before that rounding.
template <typename T>
void matmulGeluGrad(const T *g, const T *w, const T *pre, T *dx, T *biasGrad, int64_t rows,
                    int64_t n, int64_t k, bool transposeW);

/// exec.matmul_bias_grad: dw[k, n] = x[rows, k]^T dy[rows, n], and the sums
/// of dy's columns into `biasGrad`: the bits of matmul and reduce_sum.
template <typename T>
void matmulBiasGrad(const T *x, const T *dy, T *dw, T *biasGrad, int64_t rows, int64_t k,
                    int64_t n);

/// The sizes of attention's operands q [..., s, d], k [..., t, d] and v
/// [..., t, dv]: `batch` the product of the leading dimensions.
struct AttentionSizes {
  int64_t batch, s, t, d, dv;
};
inline AttentionSizes attentionSizes(const Shape &q, const Shape &k, const Shape &v) {
  size_t r = q.size();
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i)
    batch *= q[i];
  return {batch, q[r - 2], k[r - 2], q[r - 1], v[r - 1]};
}

/// exec.attention: for each of `batch` entries, out[s, dv] = softmax of
/// the scaled (when `scale` is not null), causally masked (when `causal`)
/// scores q[s, d] k[t, d]^T, times v[t, dv]: the products and the softmax
/// in f32 (the bits of matmul, scaledSoftmax and matmul on f32 values),
/// the result rounded once. When `lse` is not null, each query row's
/// log-sum-exp of its scaled, unmasked scores into it ([batch, s]).
template <typename T>
void attention(const T *q, const T *k, const T *v, const T *scale, bool causal, T *out,
               int64_t batch, int64_t s, int64_t t, int64_t d, int64_t dv, float *lse = nullptr);

/// exec.attention_grad: for each of `batch` entries, given attention's
/// operands, its output `out` [s, dv], log-sum-exp `lse` [s] and the
/// output's gradient `dout`: with P = exp(q k^T scale - lse) (0 where
/// masked), dv = P^T dout, dS = P (dout v^T - rowsum(dout * out)) scale,
/// dq = dS k and dk = dS^T q; in f32, each gradient rounded once.
template <typename T>
void attentionGrad(const T *q, const T *k, const T *v, const T *out, const float *lse,
                   const T *dout, const T *scale, bool causal, T *dq, T *dk, T *dv,
                   int64_t batch, int64_t s, int64_t t, int64_t d, int64_t dvWidth);

/// Reduces the listed (ascending) dimensions; `out` has the kept dimensions in order.
template <typename T>
void reduce(ReduceKind kind, const T *in, const Shape &shape, const std::vector<int64_t> &dims,
            T *out);

/// Softmax (or log-softmax) along `axis`.
template <typename T>
void softmax(const T *in, T *out, const Shape &shape, int64_t axis, bool logSoftmax);

/// Layer norm of `rows` rows of `width` elements.
template <typename T>
void layerNorm(const T *in, const T *scale, const T *bias, T *out, int64_t rows,
               int64_t width, float eps);

template <typename T>
void transpose(const T *in, const Shape &shape, const std::vector<int64_t> &perm, T *out);

/// Keeps [starts[d], limits[d]) of every dimension; any element type of
/// `elementBytes` bytes.
void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out);

/// Concatenates along `axis`; `inputs[i]` has shape `shapes[i]`; any element
/// type of `elementBytes` bytes.
void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out);

/// out[i, :] = table[ids[i], :]; false with `error` set when an id is out
/// of range (named by where `place` says it lies, as are the others').
template <typename T>
bool embedding(const T *table, int64_t rows, int64_t width, const int64_t *ids, int64_t count,
               T *out, const IndexPlace &place, std::string &error);

/// Sets element (i, j) of every trailing [s, s] block to `fill` where j > i:
/// -inf for the mask itself, 0 for its gradient.
template <typename T>
void causalMask(const T *in, T *out, int64_t blocks, int64_t s, float fill);

/// Sum over `rows` of -log_softmax(logits[row])[targets[row]]; false with
/// `error` set when a target is out of range.
template <typename T>
bool crossEntropy(const T *logits, const int64_t *targets, int64_t rows, int64_t classes,
                  T *loss, const IndexPlace &place, std::string &error);

/// dx = dy where x > 0, else 0.
template <typename T>
void reluGrad(const T *x, const T *dy, T *dx, int64_t n);
/// dx = dy * gelu'(x), tanh form.
template <typename T>
void geluGrad(const T *x, const T *dy, T *dx, int64_t n);
/// With y = softmax(x) along `axis`: dx = y * (dy - sum(dy * y, axis)).
template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, const Shape &shape, int64_t axis);

/// exec.softmax: softmax over the last axis of causal_mask(in * *scale),
/// the mask when `causal`, the scale when not null; rounds as the three
/// ops do one after the other.
template <typename T>
void scaledSoftmax(const T *in, const T *scale, bool causal, T *out,
                   const Shape &shape);
/// exec.softmax_grad: softmaxGrad over the last axis, then 0 above the
/// diagonal when `causal`, then times *scale when not null.
template <typename T>
void scaledSoftmaxGrad(const T *y, const T *dy, const T *scale, bool causal,
                       T *dx, const Shape &shape);
/// Gradients of layer norm over `rows` rows of `width`; dscale and dbias sum over rows.
template <typename T>
void layerNormGrad(const T *x, const T *scale, const T *dy, T *dx, T *dscale,
                   T *dbias, int64_t rows, int64_t width, float eps);
/// table[rows, width] = sum of dy rows scattered by ids; false with `error`
/// set when an id is out of range.
template <typename T>
bool embeddingGrad(const int64_t *ids, int64_t count, const T *dy, int64_t width, T *table,
                   int64_t rows, const IndexPlace &place, std::string &error);
/// dlogits = (softmax(logits) - onehot(targets)) * lossGrad.
template <typename T>
bool crossEntropyGrad(const T *logits, const int64_t *targets, float lossGrad, int64_t rows,
                      int64_t classes, T *dlogits, const IndexPlace &place, std::string &error);
/// Zero padding: `low[d]` before and `high[d]` after every dimension.
template <typename T>
void pad(const T *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, T *out);
/// NumPy broadcast of `in` to `outShape`.
template <typename T>
void broadcast(const T *in, const Shape &inShape, T *out, const Shape &outShape);

/// SGD with momentum and weight decay (PyTorch semantics, no dampening).
void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity);
/// AdamW (PyTorch semantics); `step` is 1-based.
void adamwUpdate(const float *param, const float *grad, const float *m, const float *v, int64_t n,
                 double step, double lr, double beta1, double beta2, double eps,
                 double weightDecay, float *newParam, float *newM, float *newV);

} // namespace sbprt::cpu
