// The graph ops on a GPU: the same functions, with the same arguments, as
// runtime/cpu/Ops.h and Kernels.h, on device pointers into the arena. Each
// runs on the rank's stream (runtime/cuda/Backend.h) and checks its launch;
// a failure ends the job naming the op. SBPRT_CUDA_SYNC=1 waits after
// every op, so that an asynchronous fault is reported by the op that
// caused it.
//
// Results agree with the CPU kernels to float rounding: reductions run in
// a fixed order (bit-identical run to run), sums accumulate in double
// where the CPU's do, GEMMs are cuBLAS in full f32 (no TF32).
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

void unary(UnaryKind kind, const float *in, float *out, int64_t n);
void binary(BinaryKind kind, const float *lhs, const Shape &lhsShape, const float *rhs,
            const Shape &rhsShape, float *out, const Shape &outShape);
void reduce(ReduceKind kind, const float *in, const Shape &shape, const std::vector<int64_t> &dims,
            float *out);
void matmulOp(const float *a, const Shape &aShape, const float *b, const Shape &bShape, float *c,
              const Shape &cShape, bool transposeA, bool transposeB);
void softmax(const float *in, float *out, const Shape &shape, int64_t axis, bool logSoftmax);
void layerNormOp(const float *x, const float *scale, const float *bias, float *y,
                 const Shape &shape, float eps);
void transpose(const float *in, const Shape &shape, const std::vector<int64_t> &perm, float *out);
void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out);
void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out);
bool embeddingOp(const float *table, const Shape &tableShape, const int64_t *indices,
                 int64_t count, float *out, std::string &error);
void causalMaskOp(const float *x, float *y, const Shape &shape, float fill);
bool crossEntropyOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                    float *loss, std::string &error);
bool crossEntropyGradOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                        const float *lossGrad, float *dlogits, std::string &error);
void reluGrad(const float *x, const float *dy, float *dx, int64_t n);
void geluGrad(const float *x, const float *dy, float *dx, int64_t n);
void softmaxGrad(const float *y, const float *dy, float *dx, const Shape &shape, int64_t axis);
void scaledSoftmax(const float *in, const float *scale, bool causal, float *out,
                   const Shape &shape);
void scaledSoftmaxGrad(const float *y, const float *dy, const float *scale, bool causal,
                       float *dx, const Shape &shape);
void layerNormGradOp(const float *x, const float *scale, const float *dy, float *dx,
                     float *dscale, float *dbias, const Shape &shape, float eps);
bool embeddingGradOp(const int64_t *indices, int64_t count, const float *dy,
                     const Shape &tableShape, float *table, std::string &error);
void pad(const float *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, float *out);
void broadcast(const float *in, const Shape &inShape, float *out, const Shape &outShape);
void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity);
void adamwUpdateOp(const float *param, const float *grad, const float *m, const float *v,
                   int64_t n, const float *step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, float *newParam, float *newM, float *newV);

} // namespace sbprt::cuda
