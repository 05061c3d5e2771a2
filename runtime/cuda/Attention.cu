// exec.attention on tensor cores: flash attention's forward, bf16 in and
// out, f32 arithmetic, heads of any even width up to 128 (computed as 16,
// 32, 64 or 128 wide, the columns past the head's width zeros).
//
// A block of four warps takes 64 queries of one batch entry, a warp 16 of
// them, and walks the keys in tiles of 64 (under a causal mask only as far
// as its last query). For each tile, the block stages the keys and the
// values (transposed) in shared memory; each warp computes its 16 x 64
// scores with PTX's mma.sync (m16n8k16, bf16 operands, f32 sums), scales
// and masks them in registers, and keeps per query row a running maximum
// m and sum l of exp(score - m): a new tile's larger maximum rescales the
// row's sum and output so far by exp(m_old - m_new). The probabilities go
// from the scores' accumulator registers straight into the A operand of
// the product by the values (an m16n8 accumulator's layout is half of the
// m16n8k16 A operand's), rounded to bf16 for the tensor cores. At the end
// each output row is divided by its sum and written once. The
// [..., S, T] scores and probabilities never reach memory.
//
// The CUDA emulator (tools/cuda-emu) has no tensor cores: there mma() is
// the same product computed from the warp's registers, gathered by
// shuffles in the instruction's documented layout.
#include "runtime/Alignment.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Ops.h"
#include "runtime/rank/Rank.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace sbprt::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kQueries = 16 * kWarps; // a block's query rows, 16 a warp
constexpr int kKeys = 64;             // keys per tile
constexpr int kPad = 8;               // bf16 after each staged row: rows 16 bytes off in banks

/// Two bf16, the first in the low half, as one 32-bit register.
__device__ inline uint32_t pack(float low, float high) {
  return static_cast<uint32_t>(bf16::round(low)) | static_cast<uint32_t>(bf16::round(high)) << 16;
}
/// Two consecutive bf16 at `p` (4-byte aligned).
__device__ inline uint32_t load2(const bf16 *p) { return *reinterpret_cast<const uint32_t *>(p); }
/// 16 bytes (eight bf16) moved as one.
struct alignas(16) Words4 {
  uint32_t word[4];
};

/// The pairs of halves of two pairs: (low a, low b) and (high a, high b).
__device__ inline uint32_t lows(uint32_t a, uint32_t b) { return (a & 0xffffu) | b << 16; }
__device__ inline uint32_t highs(uint32_t a, uint32_t b) { return a >> 16 | (b & 0xffff0000u); }

/// d += a b for the warp, PTX's mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32.
/// With g = lane / 4 and t = lane % 4, a lane holds: of the row-major 16 x 16
/// A, in a[0..3] the pairs (row g, columns 2t, 2t+1), (g + 8, 2t..),
/// (g, 2t + 8..), (g + 8, 2t + 8..); of the column-major 16 x 8 B, in b[0..1]
/// (rows 2t, 2t+1, column g), (rows 2t + 8.., column g); of the 16 x 8 D, in
/// d[0..3] (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1).
__device__ inline void mma(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#ifdef __CUDA_EMU__
  auto half = [](uint32_t pair, int which) {
    bf16 value;
    value.bits = static_cast<uint16_t>(which ? pair >> 16 : pair & 0xffffu);
    return static_cast<float>(value);
  };
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int from = 0; from < 4; ++from) {
    // Lane 4g + from holds row g's (and g + 8's) columns 2 from, 2 from + 1
    // (and 8 more); lane 4n + from holds column n's rows 2 from.. (and 8 more).
    uint32_t row[4], column0[2], column1[2];
    for (int r = 0; r < 4; ++r)
      row[r] = __shfl_sync(0xffffffffu, a[r], 4 * g + from);
    for (int r = 0; r < 2; ++r) {
      column0[r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t) + from);
      column1[r] = __shfl_sync(0xffffffffu, b[r], 4 * (2 * t + 1) + from);
    }
    for (int k8 = 0; k8 < 2; ++k8)
      for (int e = 0; e < 2; ++e) {
        float top = half(row[2 * k8], e), bottom = half(row[2 * k8 + 1], e);
        float left = half(column0[k8], e), right = half(column1[k8], e);
        d[0] += top * left;
        d[1] += top * right;
        d[2] += bottom * left;
        d[3] += bottom * right;
      }
  }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap(); // no bf16 mma before sm_80: attentionOp refuses such a GPU first
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// The maximum (sum) over the four lanes of a quad, which hold one row.
__device__ inline float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/// Attention of `batch` entries of q [s, d], k and v [t, d] into out [s,
/// d], d even and at most D (a multiple of 16: the columns past d count as
/// zeros): blocks of kWarps warps, grid.x the query tiles (the last, under
/// a causal mask the costliest, first), grid.y striding over the entries.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attentionKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *scale, bool causal,
                    bf16 *out, int64_t batch, int64_t s, int64_t t, int d, bool wide) {
  // A tile's keys as stored, and its values transposed, in pairs of bf16.
  __shared__ uint32_t keys[kKeys][(D + kPad) / 2];
  __shared__ uint32_t valuesT[D][(kKeys + kPad) / 2];
  const float inf = INFINITY;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, quad = lane % 4;
  int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<int64_t>(kQueries);
  // This lane's two query rows (of the warp's 16).
  int64_t rows[2] = {first + warp * 16 + g, first + warp * 16 + g + 8};
  // Scores in base 2: exp2f(x log2 e) is exp(x), one instruction cheaper.
  float factor = (scale ? static_cast<float>(*scale) : 1.0f) * 1.4426950408889634f;
  for (int64_t entry = blockIdx.y; entry < batch; entry += gridDim.y) {
    const bf16 *qe = q + entry * s * d, *ke = k + entry * t * d, *ve = v + entry * t * d;
    uint32_t qa[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      for (int r = 0; r < 4; ++r) {
        int64_t row = rows[r % 2];
        int col = kk * 16 + 2 * quad + (r / 2) * 8;
        qa[kk][r] = row < s && col < d ? load2(qe + row * d + col) : 0u;
      }
    float o[D / 8][4] = {}, m[2] = {-inf, -inf}, l[2] = {0.0f, 0.0f};
    int64_t end = causal ? (first + kQueries < t ? first + kQueries : t) : t;
    for (int64_t k0 = 0; k0 < end; k0 += kKeys) {
      __syncthreads(); // the previous tile's readers are done
      if (wide) {
        // Eight columns a thread: 16-byte loads (rows 16-byte aligned, d a
        // multiple of 8) and stores (a staged row is too).
        const Words4 zero{};
        for (int i = threadIdx.x; i < kKeys * D / 8; i += blockDim.x) {
          int r = i / (D / 8), c = i % (D / 8) * 8;
          *reinterpret_cast<Words4 *>(&keys[r][c / 2]) =
              k0 + r < t && c < d ? *reinterpret_cast<const Words4 *>(ke + (k0 + r) * d + c)
                                  : zero;
        }
        // Two keys' eight columns a thread, consecutive threads consecutive
        // key pairs: each transposed row's words are written side by side.
        for (int i = threadIdx.x; i < kKeys / 2 * D / 8; i += blockDim.x) {
          int r = i % (kKeys / 2) * 2, c = i / (kKeys / 2) * 8;
          Words4 upper = k0 + r < t && c < d
                             ? *reinterpret_cast<const Words4 *>(ve + (k0 + r) * d + c)
                             : zero;
          Words4 lower = k0 + r + 1 < t && c < d
                             ? *reinterpret_cast<const Words4 *>(ve + (k0 + r + 1) * d + c)
                             : zero;
          for (int w = 0; w < 4; ++w) {
            valuesT[c + 2 * w][r / 2] = lows(upper.word[w], lower.word[w]);
            valuesT[c + 2 * w + 1][r / 2] = highs(upper.word[w], lower.word[w]);
          }
        }
      } else {
        for (int i = threadIdx.x; i < kKeys * D / 2; i += blockDim.x) {
          int r = i / (D / 2), c = i % (D / 2);
          keys[r][c] = k0 + r < t && 2 * c < d ? load2(ke + (k0 + r) * d + 2 * c) : 0u;
        }
        // Two keys' values at a time: a pair of columns becomes halves of
        // two transposed rows.
        for (int i = threadIdx.x; i < kKeys / 2 * D / 2; i += blockDim.x) {
          int r = i / (D / 2) * 2, c = i % (D / 2) * 2;
          uint32_t upper = k0 + r < t && c < d ? load2(ve + (k0 + r) * d + c) : 0u;
          uint32_t lower = k0 + r + 1 < t && c < d ? load2(ve + (k0 + r + 1) * d + c) : 0u;
          valuesT[c][r / 2] = lows(upper, lower);
          valuesT[c + 1][r / 2] = highs(upper, lower);
        }
      }
      __syncthreads();
      // The warp's 16 x kKeys scores, in kKeys / 8 accumulators of 16 x 8.
      float p[kKeys / 8][4];
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        p[nt][0] = p[nt][1] = p[nt][2] = p[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t b[2] = {keys[nt * 8 + g][kk * 8 + quad], keys[nt * 8 + g][kk * 8 + 4 + quad]};
          mma(p[nt], qa[kk], b);
        }
      }
      // Scaled and masked; the rows' new maxima.
      float tileMax[2] = {-inf, -inf};
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
        for (int e = 0; e < 4; ++e) {
          int64_t key = k0 + nt * 8 + 2 * quad + e % 2;
          float x = p[nt][e] * factor;
          if (key >= t || (causal && key > rows[e / 2]))
            x = -inf;
          p[nt][e] = x;
          tileMax[e / 2] = fmaxf(tileMax[e / 2], x);
        }
      float base[2], alpha[2];
      for (int h = 0; h < 2; ++h) {
        float next = fmaxf(m[h], quadMax(tileMax[h]));
        base[h] = next == -inf ? 0.0f : next; // a row with no key yet stays 0
        alpha[h] = exp2f(m[h] - base[h]);
        m[h] = next;
        l[h] *= alpha[h];
      }
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
        for (int e = 0; e < 4; ++e) {
          p[nt][e] = exp2f(p[nt][e] - base[e / 2]);
          l[e / 2] += p[nt][e];
        }
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        for (int e = 0; e < 4; ++e)
          o[dt][e] *= alpha[e / 2];
          // o += p v: two score accumulators (16 keys) make one A operand.
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
        uint32_t pa[4] = {pack(p[2 * kk][0], p[2 * kk][1]), pack(p[2 * kk][2], p[2 * kk][3]),
                          pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                          pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          uint32_t b[2] = {valuesT[dt * 8 + g][kk * 8 + quad],
                           valuesT[dt * 8 + g][kk * 8 + 4 + quad]};
          mma(o[dt], pa, b);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      float sum = quadSum(l[h]);
      if (rows[h] >= s)
        continue;
      bf16 *row = out + entry * s * d + rows[h] * d;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        if (dt * 8 + 2 * quad < d)
          *reinterpret_cast<uint32_t *>(row + dt * 8 + 2 * quad) =
              pack(o[dt][2 * h] / sum, o[dt][2 * h + 1] / sum);
    }
  }
}

template <int D>
void launchAttention(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *scale, bool causal,
                     bf16 *out, int64_t batch, int64_t s, int64_t t, int d) {
  int64_t tiles = (s + kQueries - 1) / kQueries;
  dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(batch < 65535 ? batch : 65535));
  // 16-byte staging where every row allows it (SBPRT_CUDA_ATTENTION_WIDE=0:
  // never, 4 bytes a load).
  bool wide = d % 8 == 0 && alignmentOf(k) >= 16 && alignmentOf(v) >= 16 &&
              context().attentionWide;
  attentionKernel<D>
      <<<grid, kWarps * 32, 0, stream()>>>(q, k, v, scale, causal, out, batch, s, t, d, wide);
  launched("attention");
}

} // namespace

template <typename T>
void attentionOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                 const Shape &vShape, const T *scale, bool causal, T *out) {
  size_t r = qShape.size();
  int64_t s = qShape[r - 2], d = qShape[r - 1], t = kShape[r - 2], dv = vShape[r - 1];
  int64_t batch = s > 0 && d > 0 ? elementsOf(qShape) / (s * d) : 0;
  if (batch == 0)
    return;
  if constexpr (!std::is_same_v<T, bf16>) {
    rank::failActive("exec.attention runs in bf16 on the GPU (--precision bf16), not f32");
  } else {
    static const int major = [] {
      cudaDeviceProp properties{};
      return cudaGetDeviceProperties(&properties, context().device) == cudaSuccess
                 ? properties.major
                 : 0;
    }();
    if (major < 8)
      rank::failActive("exec.attention needs bf16 tensor cores (compute capability 8.0 or "
                       "newer); compile with --fused-attention=false for this GPU");
    if (dv != d || t == 0 || d % 2 || d > 128 ||
        (alignmentOf(q) | alignmentOf(k) | alignmentOf(v) | alignmentOf(out)) % 4)
      rank::failActive("exec.attention on the GPU needs heads of an even width up to 128, "
                       "values as wide, some keys and 4-byte aligned tensors, got queries of " +
                       std::to_string(d) + ", values of " + std::to_string(dv) + " and " +
                       std::to_string(t) + " keys");
    int width = static_cast<int>(d);
    if (width <= 16)
      return launchAttention<16>(q, k, v, scale, causal, out, batch, s, t, width);
    if (width <= 32)
      return launchAttention<32>(q, k, v, scale, causal, out, batch, s, t, width);
    if (width <= 64)
      return launchAttention<64>(q, k, v, scale, causal, out, batch, s, t, width);
    return launchAttention<128>(q, k, v, scale, causal, out, batch, s, t, width);
  }
}

template void attentionOp(const float *, const Shape &, const float *, const Shape &, const float *,
                          const Shape &, const float *, bool, float *);
template void attentionOp(const bf16 *, const Shape &, const bf16 *, const Shape &, const bf16 *,
                          const Shape &, const bf16 *, bool, bf16 *);

} // namespace sbprt::cuda
