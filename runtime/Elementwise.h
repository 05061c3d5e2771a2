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

// GPT-2's tanh approximation: gelu(x) = 0.5 x (1 + tanh(kGeluScale (x + kGeluCubic x^3))).
constexpr double kGeluScale = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

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
  case cpu::UnaryKind::Gelu: {
    double v = x;
    return static_cast<float>(0.5 * v * (1.0 + tanh(kGeluScale * (v + kGeluCubic * v * v * v))));
  }
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

/// dx = dy * gelu'(x), tanh form.
SBPRT_HOST_DEVICE inline float geluGrad(float x, float dy) {
  double v = x;
  double t = tanh(kGeluScale * (v + kGeluCubic * v * v * v));
  double dt = (1.0 - t * t) * kGeluScale * (1.0 + 3.0 * kGeluCubic * v * v);
  return static_cast<float>(dy * (0.5 * (1.0 + t) + 0.5 * v * dt));
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
