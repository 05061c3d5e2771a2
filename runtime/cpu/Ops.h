// The graph ops on CPU, one function per op, taking the shapes the op's
// types give: the reference evaluator calls them with shapes read from the
// IR, generated rank programs with the same shapes spelled as constants.
// Kernels.h has the kernels underneath.
#pragma once

#include "runtime/cpu/Kernels.h"

#include <string>

namespace sbprt::cpu {

/// Bytes within the arena (reshapes, the input of in-place collectives);
/// the buffers may overlap.
void copy(void *dst, const void *src, size_t bytes);
/// Bytes from the program's own (host) data into the arena: constants.
void upload(void *dst, const void *src, size_t bytes);

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

/// graph.matmul: c = op(a) x op(b), batched over c's leading dimensions; a
/// rank-2 `b` is shared by every batch entry.
void matmulOp(const float *a, const Shape &aShape, const float *b, const Shape &bShape, float *c,
              const Shape &cShape, bool transposeA, bool transposeB);

/// graph.layer_norm over the last dimension of `shape`.
void layerNormOp(const float *x, const float *scale, const float *bias, float *y,
                 const Shape &shape, float eps);
void layerNormGradOp(const float *x, const float *scale, const float *dy, float *dx,
                     float *dscale, float *dbias, const Shape &shape, float eps);

/// graph.causal_mask (fill -inf) and its gradient (fill 0) on the trailing
/// [s, s] blocks of `shape`.
void causalMaskOp(const float *x, float *y, const Shape &shape, float fill);

/// graph.embedding: rows of `table` picked by `indices` (of `count` ids).
bool embeddingOp(const float *table, const Shape &tableShape, const int64_t *indices,
                 int64_t count, float *out, std::string &error);
bool embeddingGradOp(const int64_t *indices, int64_t count, const float *dy,
                     const Shape &tableShape, float *table, std::string &error);

/// graph.cross_entropy: the sum over positions of `logits` (classes last).
bool crossEntropyOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                    float *loss, std::string &error);
bool crossEntropyGradOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                        const float *lossGrad, float *dlogits, std::string &error);

} // namespace sbprt::cpu
