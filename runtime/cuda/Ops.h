// The graph ops on a GPU: the same functions, with the same arguments, as
// runtime/cpu/Ops.h and Kernels.h, on device pointers into the arena. Each
// runs on the rank's stream (runtime/cuda/Backend.h) and checks its launch;
// a failure ends the job naming the op. SBPRT_CUDA_SYNC=1 waits after
// every op, so that an asynchronous fault is reported by the op that
// caused it.
//
// Results agree with the CPU kernels to float rounding: reductions run in
// a fixed order (bit-identical run to run), sums accumulate in double
// where the CPU's do, GEMMs are cuBLAS in full f32 (no TF32). The float
// ops are instantiated for f32 and bf16 storage, as on the CPU (bf16:
// f32 arithmetic, one rounding per write; GEMMs accumulate in f32).
#pragma once

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/Backend.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sbprt::cuda {

using cpu::BinaryKind;
using cpu::ReduceKind;
using cpu::Shape;
using cpu::UnaryKind;

void copy(void *dst, const void *src, size_t bytes);
/// From host memory (the program's constants) into the arena.
void upload(void *dst, const void *src, size_t bytes);
/// A splat constant: `n` elements set to `value` (f32 or int64).
template <typename T> void fill(T *dst, int64_t n, T value);
/// exec.convert: f32 <-> bf16.
template <typename From, typename To> void convert(const From *in, To *out, int64_t n);

template <typename T>
void unary(UnaryKind kind, const T *in, T *out, int64_t n);
template <typename T>
void binary(BinaryKind kind, const T *lhs, const Shape &lhsShape, const T *rhs,
            const Shape &rhsShape, T *out, const Shape &outShape);
template <typename T>
void reduce(ReduceKind kind, const T *in, const Shape &shape, const std::vector<int64_t> &dims,
            T *out);
template <typename T>
void matmulOp(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *c,
              const Shape &cShape, bool transposeA, bool transposeB,
              Causal causal = Causal::None);
/// exec.linear: x * op(w) + bias (then the GELU, or plus the residual) in
/// cuBLASLt's epilogue; with the GELU, the sum before it into
/// `preactivation` when not null (GELU_AUX_BIAS).
template <typename T>
void linearOp(const T *x, const Shape &xShape, const T *w, const T *bias, const T *residual, T *y,
              const Shape &yShape, bool transposeW, bool gelu, T *preactivation = nullptr);
/// exec.matmul_gelu_grad: gelu_grad(pre, g * op(w)), and the bias gradient
/// when `biasGrad` is not null (DGELU, DGELU_BGRAD).
template <typename T>
void matmulGeluGradOp(const T *g, const Shape &gShape, const T *w, const T *pre, T *dx,
                      const Shape &dxShape, bool transposeW, T *biasGrad);
/// exec.matmul_bias_grad: x^T dy and dy's column sums (BGRADA).
template <typename T>
void matmulBiasGradOp(const T *x, const Shape &xShape, const T *dy, const Shape &dyShape, T *dw,
                      T *biasGrad);
/// exec.attention: flash attention on tensor cores, bf16 only (heads of an
/// even width up to 128, as --exec-fuse makes them); anything else ends
/// the job. Each query row's log-sum-exp into `lse` when it is not null.
template <typename T>
void attentionOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                 const Shape &vShape, const T *scale, bool causal, T *out, float *lse);
/// exec.attention_grad: flash attention's backward on tensor cores, under
/// the same conditions.
template <typename T>
void attentionGradOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                     const Shape &vShape, const T *out, const float *lse, const T *dout,
                     const T *scale, bool causal, T *dq, T *dk, T *dv);
template <typename T>
void softmax(const T *in, T *out, const Shape &shape, int64_t axis, bool logSoftmax);
template <typename T>
void layerNormOp(const T *x, const T *scale, const T *bias, T *y,
                 const Shape &shape, float eps);
template <typename T>
void transpose(const T *in, const Shape &shape, const std::vector<int64_t> &perm, T *out);
void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out);
void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out);
template <typename T>
bool embeddingOp(const T *table, const Shape &tableShape, const int64_t *indices,
                 int64_t count, T *out, const IndexPlace &place, std::string &error);
template <typename T> void causalMaskOp(const T *x, T *y, const Shape &shape, float fill);
template <typename T>
bool crossEntropyOp(const T *logits, const Shape &logitsShape, const int64_t *targets,
                    T *loss, const IndexPlace &place, std::string &error);
template <typename T>
bool crossEntropyGradOp(const T *logits, const Shape &logitsShape, const int64_t *targets,
                        const T *lossGrad, T *dlogits, const IndexPlace &place,
                        std::string &error);
template <typename T>
void reluGrad(const T *x, const T *dy, T *dx, int64_t n);
template <typename T>
void geluGrad(const T *x, const T *dy, T *dx, int64_t n);
template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, const Shape &shape, int64_t axis);
template <typename T>
void scaledSoftmax(const T *in, const T *scale, bool causal, T *out,
                   const Shape &shape);
template <typename T>
void scaledSoftmaxGrad(const T *y, const T *dy, const T *scale, bool causal,
                       T *dx, const Shape &shape);
template <typename T>
void layerNormGradOp(const T *x, const T *scale, const T *dy, T *dx,
                     T *dscale, T *dbias, const Shape &shape, float eps);
template <typename T>
bool embeddingGradOp(const int64_t *indices, int64_t count, const T *dy,
                     const Shape &tableShape, T *table, const IndexPlace &place,
                     std::string &error);
template <typename T>
void pad(const T *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, T *out);
template <typename T>
void broadcast(const T *in, const Shape &inShape, T *out, const Shape &outShape);
void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity);
void adamwUpdateOp(const float *param, const float *grad, const float *m, const float *v,
                   int64_t n, const float *step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, float *newParam, float *newM, float *newV);

} // namespace sbprt::cuda
