// Reference CPU kernels on row-major float buffers: the reference evaluator
// uses them today and the CPU rank executables will call the same code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sbprt::cpu {

using Shape = std::vector<int64_t>;

enum class UnaryKind { Neg, Exp, Log, Tanh, Sqrt, Rsqrt, Relu, Gelu };
enum class BinaryKind { Add, Sub, Mul, Div };
enum class ReduceKind { Sum, Mean, Max };

void unary(UnaryKind kind, const float *in, float *out, int64_t n);

/// out = lhs (op) rhs with NumPy broadcasting; shapes align at the last dimension.
void binary(BinaryKind kind, const float *lhs, const Shape &lhsShape, const float *rhs,
            const Shape &rhsShape, float *out, const Shape &outShape);

/// For each of `batch` entries: C[m,n] = op(A)[m,k] * op(B)[k,n], row-major,
/// where op transposes when asked; B is one matrix for all entries when `sharedB`.
void matmul(const float *a, const float *b, float *c, int64_t batch, int64_t m, int64_t n,
            int64_t k, bool transposeA, bool transposeB, bool sharedB);

/// Reduces the listed (ascending) dimensions; `out` has the kept dimensions in order.
void reduce(ReduceKind kind, const float *in, const Shape &shape, const std::vector<int64_t> &dims,
            float *out);

/// Softmax (or log-softmax) along `axis`.
void softmax(const float *in, float *out, const Shape &shape, int64_t axis, bool logSoftmax);

/// Layer norm of `rows` rows of `width` elements.
void layerNorm(const float *in, const float *scale, const float *bias, float *out, int64_t rows,
               int64_t width, float eps);

void transpose(const float *in, const Shape &shape, const std::vector<int64_t> &perm, float *out);

/// Keeps [starts[d], limits[d]) of every dimension; any element type of
/// `elementBytes` bytes.
void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out);

/// Concatenates along `axis`; `inputs[i]` has shape `shapes[i]`; any element
/// type of `elementBytes` bytes.
void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out);

/// out[i, :] = table[ids[i], :]; false with `error` set when an id is out of range.
bool embedding(const float *table, int64_t rows, int64_t width, const int64_t *ids, int64_t count,
               float *out, std::string &error);

/// Sets element (i, j) of every trailing [s, s] block to `fill` where j > i:
/// -inf for the mask itself, 0 for its gradient.
void causalMask(const float *in, float *out, int64_t blocks, int64_t s, float fill);

/// Sum over `rows` of -log_softmax(logits[row])[targets[row]]; false with
/// `error` set when a target is out of range.
bool crossEntropy(const float *logits, const int64_t *targets, int64_t rows, int64_t classes,
                  float *loss, std::string &error);

/// dx = dy where x > 0, else 0.
void reluGrad(const float *x, const float *dy, float *dx, int64_t n);
/// dx = dy * gelu'(x), tanh form.
void geluGrad(const float *x, const float *dy, float *dx, int64_t n);
/// With y = softmax(x) along `axis`: dx = y * (dy - sum(dy * y, axis)).
void softmaxGrad(const float *y, const float *dy, float *dx, const Shape &shape, int64_t axis);

/// exec.softmax: softmax over the last axis of causal_mask(in * *scale),
/// the mask when `causal`, the scale when not null; rounds as the three
/// ops do one after the other.
void scaledSoftmax(const float *in, const float *scale, bool causal, float *out,
                   const Shape &shape);
/// exec.softmax_grad: softmaxGrad over the last axis, then 0 above the
/// diagonal when `causal`, then times *scale when not null.
void scaledSoftmaxGrad(const float *y, const float *dy, const float *scale, bool causal,
                       float *dx, const Shape &shape);
/// Gradients of layer norm over `rows` rows of `width`; dscale and dbias sum over rows.
void layerNormGrad(const float *x, const float *scale, const float *dy, float *dx, float *dscale,
                   float *dbias, int64_t rows, int64_t width, float eps);
/// table[rows, width] = sum of dy rows scattered by ids; false with `error`
/// set when an id is out of range.
bool embeddingGrad(const int64_t *ids, int64_t count, const float *dy, int64_t width, float *table,
                   int64_t rows, std::string &error);
/// dlogits = (softmax(logits) - onehot(targets)) * lossGrad.
bool crossEntropyGrad(const float *logits, const int64_t *targets, float lossGrad, int64_t rows,
                      int64_t classes, float *dlogits, std::string &error);
/// Zero padding: `low[d]` before and `high[d]` after every dimension.
void pad(const float *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, float *out);
/// NumPy broadcast of `in` to `outShape`.
void broadcast(const float *in, const Shape &inShape, float *out, const Shape &outShape);

/// SGD with momentum and weight decay (PyTorch semantics, no dampening).
void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity);
/// AdamW (PyTorch semantics); `step` is 1-based.
void adamwUpdate(const float *param, const float *grad, const float *m, const float *v, int64_t n,
                 double step, double lr, double beta1, double beta2, double eps,
                 double weightDecay, float *newParam, float *newM, float *newV);

} // namespace sbprt::cpu
