// The elementwise functions, once, for every place that computes them: the
// CPU kernels, the CUDA kernels, and the fused loops and kernels sbpc
// generates (exec.fused). Host and device code alike when nvcc compiles.
#pragma once

#include "runtime/cpu/Kernels.h"

#include <cmath>

#ifdef __CUDACC__
#define SBPRT_HOST_DEVICE __host__ __device__
#else
#define SBPRT_HOST_DEVICE
#endif

namespace sbprt::elementwise {

// GPT-2's tanh approximation: gelu(x) = 0.5 x (1 + tanh(kGeluScale (x + kGeluCubic x^3))),
// in f32 as cuBLASLt's GELU epilogue and PyTorch compute it: on a GPU a
// double tanh per element made GELU and its gradient compute-bound (FP64
// runs at a fraction of f32's rate), several times their memory time.
constexpr float kGeluScale = 0.797884561f; // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

SBPRT_HOST_DEVICE inline float unary(cpu::UnaryKind kind, float x) {
  switch (kind) {
  case cpu::UnaryKind::Neg:
    return -x;
  case cpu::UnaryKind::Exp:
    return expf(x);
  case cpu::UnaryKind::Log:
    return logf(x);
  case cpu::UnaryKind::Tanh:
    return tanhf(x);
  case cpu::UnaryKind::Sqrt:
    return sqrtf(x);
  case cpu::UnaryKind::Rsqrt:
    return 1.0f / sqrtf(x);
  case cpu::UnaryKind::Relu:
    return x > 0.0f ? x : 0.0f;
  case cpu::UnaryKind::Gelu:
    // Past |x| ~ 1e13 the cube overflows to +-inf, and tanh takes it to +-1:
    // x or -0, as the limit.
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * x * x * x)));
  }
  return x;
}

SBPRT_HOST_DEVICE inline float binary(cpu::BinaryKind kind, float a, float b) {
  switch (kind) {
  case cpu::BinaryKind::Add:
    return a + b;
  case cpu::BinaryKind::Sub:
    return a - b;
  case cpu::BinaryKind::Mul:
    return a * b;
  case cpu::BinaryKind::Div:
    return a / b;
  }
  return a;
}

/// dx = dy where x > 0, else 0.
SBPRT_HOST_DEVICE inline float reluGrad(float x, float dy) { return x > 0.0f ? dy : 0.0f; }

/// dx = dy * gelu'(x), tanh form, in f32.
SBPRT_HOST_DEVICE inline float geluGrad(float x, float dy) {
  float t = tanhf(kGeluScale * (x + kGeluCubic * x * x * x));
  // Where tanh has saturated (|x| > 9 or so) its derivative is 0, not
  // 0 * inf once x^2 overflows.
  float sech2 = 1.0f - t * t;
  float dt = sech2 == 0.0f ? 0.0f : sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * dt);
}

/// One element of SGD with momentum and weight decay (PyTorch semantics, no
/// dampening).
SBPRT_HOST_DEVICE inline void sgd(float param, float grad, float velocity, double lr,
                                  double momentum, double weightDecay, float &newParam,
                                  float &newVelocity) {
  double v = momentum * velocity + (grad + weightDecay * param);
  newVelocity = static_cast<float>(v);
  newParam = static_cast<float>(param - lr * v);
}

/// One element of AdamW (PyTorch semantics); `correction1` and
/// `correction2` are 1 - beta1^step and 1 - beta2^step.
SBPRT_HOST_DEVICE inline void adamw(float param, float grad, float m, float v, double lr,
                                    double beta1, double beta2, double eps, double weightDecay,
                                    double correction1, double correction2, float &newParam,
                                    float &newM, float &newV) {
  double g = grad;
  double m1 = beta1 * m + (1.0 - beta1) * g;
  double v1 = beta2 * v + (1.0 - beta2) * g * g;
  double p = param * (1.0 - lr * weightDecay);
  newM = static_cast<float>(m1);
  newV = static_cast<float>(v1);
  newParam = static_cast<float>(p - lr * (m1 / correction1) / (sqrt(v1 / correction2) + eps));
}

} // namespace sbprt::elementwise
