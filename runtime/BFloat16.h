// bfloat16 storage: the upper half of an IEEE f32 (8 exponent bits, 7
// mantissa bits). A value is converted to f32 where it is read and rounded
// back (to nearest, ties to even) where it is written, so every kernel
// computes in f32 or wider whatever it stores. One type for host and
// device code, bit-compatible with CUDA's __nv_bfloat16 (cuBLAS and NCCL
// take it as CUDA_R_16BF / ncclBfloat16).
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SBPRT_BF16_HOST_DEVICE __host__ __device__
#else
#define SBPRT_BF16_HOST_DEVICE
#endif

namespace sbprt {

struct bf16 {
  uint16_t bits;

  bf16() = default;
  SBPRT_BF16_HOST_DEVICE bf16(float value) : bits(round(value)) {}
  SBPRT_BF16_HOST_DEVICE operator float() const {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
  }

  /// The bf16 nearest `value` (ties to even); NaN stays a (quiet) NaN, and
  /// values beyond the largest bf16 round to infinity as IEEE says.
  SBPRT_BF16_HOST_DEVICE static uint16_t round(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    if ((word & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((word >> 16) | 0x40u);
    word += 0x7fffu + ((word >> 16) & 1u);
    return static_cast<uint16_t>(word >> 16);
  }
};

static_assert(sizeof(bf16) == 2, "bf16 is two bytes");

} // namespace sbprt
