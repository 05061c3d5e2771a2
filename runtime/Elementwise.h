// The elementwise functions, once, for every place that computes them: the
// CPU kernels, the CUDA kernels, and the fused loops and kernels sbpc
// generates (exec.fused). Host and device code alike when nvcc compiles.
#pragma once

#include "runtime/cpu/Kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>

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

#ifndef __CUDA_ARCH__
#ifdef __FAST_MATH__
#error "runtime/Elementwise.h needs IEEE arithmetic: build without -ffast-math (or -Ofast)"
#endif
/// e^x in f32 on the host, within 2 ulp of the exact value (glibc's expf:
/// within 1), in straight-line arithmetic that the compiler vectorizes:
/// expf is a call per element, which made GELU, softmax and cross-entropy
/// cost several times their memory time on the CPU. Subnormal results are
/// computed (not flushed); below -104 the result is 0, from 88.7228 (where
/// e^x passes the largest float) infinity, and a NaN stays a NaN. Its
/// rounding step needs IEEE arithmetic: -ffast-math would fold it away.
inline float expHost(float x) {
  // Outside [-104, 89] the result is 0 or infinity anyway; clamping keeps
  // the exponent arithmetic below in range (comparisons leave NaN alone).
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  // x = n ln2 + r with n an integer and |r| <= ln2 / 2. Adding 1.5 * 2^23
  // rounds x / ln2 to an integer, whose bits are then n's (no conversion
  // from float, which a NaN would make undefined). ln 2 in two parts
  // (Cody and Waite): the first has few enough bits that n times it is
  // exact.
  constexpr float kLog2e = 1.44269504f, kRound = 12582912.0f;
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
  float rounded = x * kLog2e + kRound;
  float n = rounded - kRound;
  float r = (x - n * kLn2High) - n * kLn2Low;
  // e^r: Taylor to r^7 (the next term is under 1e-8 of it).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Times 2^n as 2^(n/2) 2^(n - n/2), both normal numbers for n in
  // [-150, 128]: a result below 2^-126 rounds as a subnormal should.
  uint32_t bits;
  std::memcpy(&bits, &rounded, sizeof bits);
  int32_t whole = static_cast<int32_t>(bits - 0x4B400000u), half = whole / 2;
  uint32_t low = static_cast<uint32_t>(half + 127) << 23,
           high = static_cast<uint32_t>(whole - half + 127) << 23;
  float lowScale, highScale;
  std::memcpy(&lowScale, &low, sizeof lowScale);
  std::memcpy(&highScale, &high, sizeof highScale);
  return p * lowScale * highScale;
}
#endif

/// e^x in f32: expHost on the host, the device's expf on a GPU.
SBPRT_HOST_DEVICE inline float expF32(float x) {
#ifdef __CUDA_ARCH__
  return expf(x);
#else
  return expHost(x);
#endif
}

/// The GELU's sigmoid: 0.5 (1 + tanh(y)) = 1 / (1 + e^(-2y)) for
/// y = kGeluScale (x + kGeluCubic x^3), and e^(-2y).
struct GeluSigmoid {
  float s, e;
};
SBPRT_HOST_DEVICE inline GeluSigmoid geluSigmoid(float x) {
  float e = expF32(-2.0f * (kGeluScale * (x + kGeluCubic * x * x * x)));
  return {1.0f / (1.0f + e), e};
}

SBPRT_HOST_DEVICE inline float unary(cpu::UnaryKind kind, float x) {
  switch (kind) {
  case cpu::UnaryKind::Neg:
    return -x;
  case cpu::UnaryKind::Exp:
    return expF32(x);
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
#ifdef __CUDA_ARCH__
    // Past |x| ~ 1e13 the cube overflows to +-inf, and tanh takes it to +-1:
    // x or -0, as the limit.
    return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * x * x * x)));
#else
    // x / (1 + e^(-2y)), the same function: no tanh to call. Where the
    // cube overflows (finite x), e^(-2y) is 0 or infinity: x or -0, as the
    // limit.
    return x / (1.0f + geluSigmoid(x).e);
#endif
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
#ifdef __CUDA_ARCH__
  float t = tanhf(kGeluScale * (x + kGeluCubic * x * x * x));
  // Where tanh has saturated (|x| > 9 or so) its derivative is 0, not
  // 0 * inf once x^2 overflows.
  float sech2 = 1.0f - t * t;
  float dt = sech2 == 0.0f ? 0.0f : sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * dt);
#else
  // With s = 1 / (1 + e), e = e^(-2y): gelu = x s, and its derivative
  // s + 2 x s (1 - s) y'. 1 - s is s e, exact where s rounds to 1; where
  // e is infinite, s is 0 and s e its limit 1.
  auto [s, e] = geluSigmoid(x);
  float se = e < INFINITY ? s * e : 1.0f;
  float q = s * se; // s (1 - s): 0 where the sigmoid has saturated
  // Not 0 * inf once x^2 overflows.
  float ds = q == 0.0f ? 0.0f : 2.0f * q * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  return dy * (s + x * ds);
#endif
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

/// AdamW's step constants, in f32 (PyTorch semantics: its f32 update
/// computes in f32), from the hyperparameters and the step count.
struct AdamwConstants {
  float decay; // 1 - lr * weightDecay, the parameter's factor
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2;
  float stepSize;        // lr / (1 - beta1^step)
  float rootCorrection2; // sqrt(1 - beta2^step)
  float eps;
};
SBPRT_HOST_DEVICE inline AdamwConstants
adamwConstants(double step, double lr, double beta1, double beta2, double eps, double weightDecay) {
  AdamwConstants c;
  c.decay = static_cast<float>(1.0 - lr * weightDecay);
  c.beta1 = static_cast<float>(beta1);
  c.beta2 = static_cast<float>(beta2);
  c.oneMinusBeta1 = static_cast<float>(1.0 - beta1);
  c.oneMinusBeta2 = static_cast<float>(1.0 - beta2);
  c.stepSize = static_cast<float>(lr / (1.0 - pow(beta1, step)));
  c.rootCorrection2 = static_cast<float>(sqrt(1.0 - pow(beta2, step)));
  c.eps = static_cast<float>(eps);
  return c;
}

/// One element of AdamW (PyTorch semantics, in f32):
/// the parameter decayed, then moved by stepSize m' / (sqrt(v') /
/// sqrt(correction2) + eps).
SBPRT_HOST_DEVICE inline void adamw(float param, float grad, float m, float v,
                                    const AdamwConstants &c, float &newParam, float &newM,
                                    float &newV) {
  float m1 = c.beta1 * m + c.oneMinusBeta1 * grad;
  float v1 = c.beta2 * v + c.oneMinusBeta2 * grad * grad;
  float denominator = sqrtf(v1) / c.rootCorrection2 + c.eps;
  newM = m1;
  newV = v1;
  newParam = param * c.decay - c.stepSize * (m1 / denominator);
}

} // namespace sbprt::elementwise
