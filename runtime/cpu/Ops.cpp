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

} // namespace sbprt::cpu
