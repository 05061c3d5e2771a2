// The graph ops on CPU: shapes to kernel arguments.
#include "runtime/cpu/Ops.h"

#include "runtime/Tensor.h"

#include <cstring>

namespace sbprt::cpu {

void copy(void *dst, const void *src, size_t bytes) { std::memmove(dst, src, bytes); }

void upload(void *dst, const void *src, size_t bytes) { std::memcpy(dst, src, bytes); }

void adamwUpdateOp(const float *param, const float *grad, const float *m, const float *v,
                   int64_t n, const float *step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, float *newParam, float *newM, float *newV) {
  adamwUpdate(param, grad, m, v, n, *step, lr, beta1, beta2, eps, weightDecay, newParam, newM,
              newV);
}

void matmulOp(const float *a, const Shape &aShape, const float *b, const Shape &bShape, float *c,
              const Shape &cShape, bool transposeA, bool transposeB) {
  MatmulDims g = matmulDims(aShape, bShape, cShape, transposeA);
  matmul(a, b, c, g.batch, g.m, g.n, g.k, transposeA, transposeB, g.sharedB);
}

void layerNormOp(const float *x, const float *scale, const float *bias, float *y,
                 const Shape &shape, float eps) {
  int64_t width = shape.back();
  layerNorm(x, scale, bias, y, numElements(shape) / width, width, eps);
}

void layerNormGradOp(const float *x, const float *scale, const float *dy, float *dx,
                     float *dscale, float *dbias, const Shape &shape, float eps) {
  int64_t width = shape.back();
  layerNormGrad(x, scale, dy, dx, dscale, dbias, numElements(shape) / width, width, eps);
}

void causalMaskOp(const float *x, float *y, const Shape &shape, float fill) {
  int64_t n = shape.back();
  causalMask(x, y, numElements(shape) / (n * n), n, fill);
}

bool embeddingOp(const float *table, const Shape &tableShape, const int64_t *indices,
                 int64_t count, float *out, std::string &error) {
  return embedding(table, tableShape[0], tableShape[1], indices, count, out, error);
}

bool embeddingGradOp(const int64_t *indices, int64_t count, const float *dy,
                     const Shape &tableShape, float *table, std::string &error) {
  return embeddingGrad(indices, count, dy, tableShape[1], table, tableShape[0], error);
}

bool crossEntropyOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                    float *loss, std::string &error) {
  int64_t classes = logitsShape.back();
  return crossEntropy(logits, targets, numElements(logitsShape) / classes, classes, loss, error);
}

bool crossEntropyGradOp(const float *logits, const Shape &logitsShape, const int64_t *targets,
                        const float *lossGrad, float *dlogits, std::string &error) {
  int64_t classes = logitsShape.back();
  return crossEntropyGrad(logits, targets, *lossGrad, numElements(logitsShape) / classes, classes,
                          dlogits, error);
}

} // namespace sbprt::cpu
