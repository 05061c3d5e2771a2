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
// It also writes, where the backward needs it, each query row's
// log-sum-exp (natural, f32): (m + log2 l) ln 2.
//
// exec.attention_grad, flash attention's backward, recomputes the
// probabilities P = exp(score * scale - lse) tile by tile from the scores
// and the log-sum-exp, in three kernels: the rows' dots rowsum(dO * O)
// into the workspace (f32); per block of 64 queries, walking the keys,
// dQ += dS K; per block of 64 keys, walking the queries, dV += P^T dO and
// dK += dS^T Q, with dS = P (dO V^T - dot) scale. The scores and dP are
// computed twice (once a kernel), which keeps every sum in registers and
// the results deterministic (no atomics). A warp holds 16 rows of the
// walked-over side's operands as A fragments, the block stages the other
// side's tiles in shared memory, as stored (for products over the head's
// width) and transposed (for products over the rows).
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
#include <initializer_list>
#include <string>
#include <type_traits>

namespace sbprt::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kQueries = 16 * kWarps; // a block's query rows, 16 a warp
constexpr int kBlockKeys = kQueries;  // the backward's key rows a block, 16 a warp
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

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// A thread's place in its warp's m16n8k16 fragments, the warp taking 16
/// of its block's rows from `first`: g = lane / 4, quad = lane % 4, and
/// the thread's two rows, g and g + 8 of the warp's.
struct Lane {
  int warp, g, quad;
  int64_t rows[2];
  __device__ explicit Lane(int64_t first)
      : warp(threadIdx.x / 32), g(threadIdx.x % 32 / 4), quad(threadIdx.x % 4),
        rows{first + warp * 16 + g, first + warp * 16 + g + 8} {}
};

/// The scale's value, 1 without one.
__device__ inline float scaleOf(const bf16 *scale) {
  return scale ? static_cast<float>(*scale) : 1.0f;
}

/// A lane's A fragments of 16 rows of the row-major [n, d] `src`, its two
/// rows `rows` (g and g + 8 of the 16; those from n on zeros), over the
/// head's width in steps of 16 (columns from d on zeros).
template <int D>
__device__ inline void loadFragments(uint32_t a[D / 16][4], const bf16 *src, const int64_t rows[2],
                                     int64_t n, int d, int quad) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    for (int r = 0; r < 4; ++r) {
      int64_t row = rows[r % 2];
      int col = kk * 16 + 2 * quad + (r / 2) * 8;
      a[kk][r] = row < n && col < d ? load2(src + row * d + col) : 0u;
    }
}

/// Rows [first, first + Rows) of the row-major [n, d] `src` into `dst`,
/// columns in pairs (rows from n and columns from d on zeros); 16 bytes a
/// load where `wide` (d a multiple of 8, `src` 16-byte aligned), else 4.
template <int Rows, int D>
__device__ inline void stageRows(uint32_t (*dst)[(D + kPad) / 2], const bf16 *src, int64_t first,
                                 int64_t n, int d, bool wide) {
  if (wide) {
    const Words4 zero{};
    for (int i = threadIdx.x; i < Rows * D / 8; i += blockDim.x) {
      int r = i / (D / 8), c = i % (D / 8) * 8;
      *reinterpret_cast<Words4 *>(&dst[r][c / 2]) =
          first + r < n && c < d ? *reinterpret_cast<const Words4 *>(src + (first + r) * d + c)
                                 : zero;
    }
  } else {
    for (int i = threadIdx.x; i < Rows * D / 2; i += blockDim.x) {
      int r = i / (D / 2), c = i % (D / 2);
      dst[r][c] = first + r < n && 2 * c < d ? load2(src + (first + r) * d + 2 * c) : 0u;
    }
  }
}

/// The same rows transposed: dst[c][r / 2] holds column c of rows r and
/// r + 1. Two rows' eight (or two) columns a thread, consecutive threads
/// consecutive row pairs: each transposed row's words are written side by
/// side.
template <int Rows, int D>
__device__ inline void stageColumns(uint32_t (*dst)[(Rows + kPad) / 2], const bf16 *src,
                                    int64_t first, int64_t n, int d, bool wide) {
  if (wide) {
    const Words4 zero{};
    for (int i = threadIdx.x; i < Rows / 2 * D / 8; i += blockDim.x) {
      int r = i % (Rows / 2) * 2, c = i / (Rows / 2) * 8;
      Words4 upper = first + r < n && c < d
                         ? *reinterpret_cast<const Words4 *>(src + (first + r) * d + c)
                         : zero;
      Words4 lower = first + r + 1 < n && c < d
                         ? *reinterpret_cast<const Words4 *>(src + (first + r + 1) * d + c)
                         : zero;
      for (int w = 0; w < 4; ++w) {
        dst[c + 2 * w][r / 2] = lows(upper.word[w], lower.word[w]);
        dst[c + 2 * w + 1][r / 2] = highs(upper.word[w], lower.word[w]);
      }
    }
  } else {
    for (int i = threadIdx.x; i < Rows / 2 * D / 2; i += blockDim.x) {
      int r = i % (Rows / 2) * 2, c = i / (Rows / 2) * 2;
      uint32_t upper = first + r < n && c < d ? load2(src + (first + r) * d + c) : 0u;
      uint32_t lower = first + r + 1 < n && c < d ? load2(src + (first + r + 1) * d + c) : 0u;
      dst[c][r / 2] = lows(upper, lower);
      dst[c + 1][r / 2] = highs(upper, lower);
    }
  }
}

/// d += the A fragment `a` times the B fragment of the staged pairs
/// rows[n][k / 2]: n from n0 to n0 + 7, k from 16 kk to 16 kk + 15.
template <int Width>
__device__ inline void mmaStaged(float d[4], const uint32_t a[4], uint32_t (*rows)[Width],
                                 int n0, int kk, int g, int quad) {
  uint32_t b[2] = {rows[n0 + g][kk * 8 + quad], rows[n0 + g][kk * 8 + 4 + quad]};
  mma(d, a, b);
}

/// The warp's products of its 16 rows (A fragments over the head's width)
/// by the Tile staged rows: Tile / 8 accumulators of 16 x 8.
template <int Tile, int D>
__device__ inline void productsByRows(float p[Tile / 8][4], const uint32_t a[D / 16][4],
                                      uint32_t (*staged)[(D + kPad) / 2], int g, int quad) {
#pragma unroll
  for (int nt = 0; nt < Tile / 8; ++nt) {
    p[nt][0] = p[nt][1] = p[nt][2] = p[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      mmaStaged(p[nt], a[kk], staged, nt * 8, kk, g, quad);
  }
}

/// Two 16 x 8 accumulators (columns 16 kk..16 kk + 15) as one A fragment,
/// rounded to bf16 (an m16n8 accumulator's layout is half of the
/// m16n8k16 A operand's).
__device__ inline void fragmentOf(uint32_t a[4], const float left[4], const float right[4]) {
  a[0] = pack(left[0], left[1]);
  a[1] = pack(left[2], left[3]);
  a[2] = pack(right[0], right[1]);
  a[3] = pack(right[2], right[3]);
}

/// A warp's 16 rows (this lane's `rows`) of the [.., d] accumulators `acc`
/// into the row-major `dst` [n, d], rounded to bf16.
template <int D>
__device__ inline void storeRows(bf16 *dst, const float acc[D / 8][4], const int64_t rows[2],
                                 int64_t n, int d, int quad, float divide0 = 1.0f,
                                 float divide1 = 1.0f) {
  for (int h = 0; h < 2; ++h) {
    if (rows[h] >= n)
      continue;
    float divide = h ? divide1 : divide0;
    bf16 *row = dst + rows[h] * d;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      if (dt * 8 + 2 * quad < d)
        *reinterpret_cast<uint32_t *>(row + dt * 8 + 2 * quad) =
            pack(acc[dt][2 * h] / divide, acc[dt][2 * h + 1] / divide);
  }
}

/// Attention of `batch` entries of q [s, d], k and v [t, d] into out [s,
/// d], d even and at most D (a multiple of 16: the columns past d count as
/// zeros), and each query row's log-sum-exp into lse [s] unless it is
/// null: blocks of kWarps warps, grid.x the query tiles (the last, under a
/// causal mask the costliest, first), grid.y striding over the entries.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attentionKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *scale, bool causal,
                    bf16 *out, float *lse, int64_t batch, int64_t s, int64_t t, int d, bool wide) {
  // A tile's keys as stored, and its values transposed, in pairs of bf16.
  __shared__ __align__(16) uint32_t keys[kKeys][(D + kPad) / 2];
  __shared__ __align__(16) uint32_t valuesT[D][(kKeys + kPad) / 2];
  const float inf = INFINITY;
  const int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<int64_t>(kQueries);
  // This lane's two query rows (of the warp's 16).
  const Lane lane(first);
  const int64_t rows[2] = {lane.rows[0], lane.rows[1]};
  int g = lane.g, quad = lane.quad;
  // Scores in base 2: exp2f(x log2 e) is exp(x), one instruction cheaper.
  float factor = scaleOf(scale) * kLog2e;
  for (int64_t entry = blockIdx.y; entry < batch; entry += gridDim.y) {
    const bf16 *qe = q + entry * s * d, *ke = k + entry * t * d, *ve = v + entry * t * d;
    uint32_t qa[D / 16][4];
    loadFragments<D>(qa, qe, rows, s, d, quad);
    float o[D / 8][4] = {}, m[2] = {-inf, -inf}, l[2] = {0.0f, 0.0f};
    int64_t end = causal ? (first + kQueries < t ? first + kQueries : t) : t;
    for (int64_t k0 = 0; k0 < end; k0 += kKeys) {
      __syncthreads(); // the previous tile's readers are done
      stageRows<kKeys, D>(keys, ke, k0, t, d, wide);
      stageColumns<kKeys, D>(valuesT, ve, k0, t, d, wide);
      __syncthreads();
      // The warp's 16 x kKeys scores, in kKeys / 8 accumulators of 16 x 8.
      float p[kKeys / 8][4];
      productsByRows<kKeys, D>(p, qa, keys, g, quad);
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
        uint32_t pa[4];
        fragmentOf(pa, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          mmaStaged(o[dt], pa, valuesT, dt * 8, kk, g, quad);
      }
    }
    float sum[2] = {quadSum(l[0]), quadSum(l[1])};
    storeRows<D>(out + entry * s * d, o, rows, s, d, quad, sum[0], sum[1]);
    for (int h = 0; h < 2; ++h)
      if (lse && quad == 0 && rows[h] < s)
        lse[entry * s + rows[h]] = (m[h] + log2f(sum[h])) * kLn2;
  }
}

/// The rows of a backward kernel's staged tiles: 64, or 32 for heads
/// over 64 wide (four tiles of them in shared memory).
template <int D> constexpr int kStep = D <= 64 ? 64 : 32;

/// rowsum(dout * out) of each of `rows` rows of width d into `dots`, a
/// warp a row.
__global__ void rowDotsKernel(const bf16 *dout, const bf16 *out, float *dots, int64_t rows,
                              int d) {
  int lane = threadIdx.x % 32;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < rows; row += stride) {
    float sum = 0.0f;
    for (int c = lane; c < d; c += 32)
      sum += static_cast<float>(dout[row * d + c]) * static_cast<float>(out[row * d + c]);
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0)
      dots[row] = sum;
  }
}

/// dq [s, d] of `batch` entries: blocks of kWarps warps over 64 queries
/// (grid.x the query tiles, the last first), each walking the keys (under
/// a causal mask as far as its last query) in tiles of kStep<D>: per tile
/// the scores S = Q K^T and dP = dO V^T of the warp's 16 queries, P =
/// exp2(S scale log2 e - lse log2 e), dS = P (dP - dot) scale, dQ += dS K.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attentionQueryGradKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dout,
                             const float *lse, const float *dots, const bf16 *scale, bool causal,
                             bf16 *dq, int64_t batch, int64_t s, int64_t t, int d, bool wide) {
  constexpr int kTile = kStep<D>;
  __shared__ __align__(16) uint32_t keys[kTile][(D + kPad) / 2];
  __shared__ __align__(16) uint32_t values[kTile][(D + kPad) / 2];
  __shared__ __align__(16) uint32_t keysT[D][(kTile + kPad) / 2];
  const int64_t first = (gridDim.x - 1 - blockIdx.x) * static_cast<int64_t>(kQueries);
  const Lane lane(first);
  const int64_t rows[2] = {lane.rows[0], lane.rows[1]};
  int g = lane.g, quad = lane.quad;
  float scaleValue = scaleOf(scale), factor = scaleValue * kLog2e;
  for (int64_t entry = blockIdx.y; entry < batch; entry += gridDim.y) {
    const bf16 *qe = q + entry * s * d, *ke = k + entry * t * d, *ve = v + entry * t * d,
               *ge = dout + entry * s * d;
    uint32_t qa[D / 16][4], ga[D / 16][4];
    loadFragments<D>(qa, qe, rows, s, d, quad);
    loadFragments<D>(ga, ge, rows, s, d, quad);
    float base[2], dot[2];
    for (int h = 0; h < 2; ++h) {
      base[h] = rows[h] < s ? lse[entry * s + rows[h]] * kLog2e : 0.0f;
      dot[h] = rows[h] < s ? dots[entry * s + rows[h]] : 0.0f;
    }
    float acc[D / 8][4] = {};
    int64_t end = causal ? (first + kQueries < t ? first + kQueries : t) : t;
    for (int64_t k0 = 0; k0 < end; k0 += kTile) {
      __syncthreads(); // the previous tile's readers are done
      stageRows<kTile, D>(keys, ke, k0, t, d, wide);
      stageRows<kTile, D>(values, ve, k0, t, d, wide);
      stageColumns<kTile, D>(keysT, ke, k0, t, d, wide);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        // dS of 16 keys, two accumulators of 8, one A operand.
        float ds[2][4];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          int nt = 2 * kk + half;
          float score[4] = {}, dp[4] = {};
#pragma unroll
          for (int c = 0; c < D / 16; ++c) {
            mmaStaged(score, qa[c], keys, nt * 8, c, g, quad);
            mmaStaged(dp, ga[c], values, nt * 8, c, g, quad);
          }
          for (int e = 0; e < 4; ++e) {
            int64_t key = k0 + nt * 8 + 2 * quad + e % 2;
            float p = key >= t || (causal && key > rows[e / 2])
                          ? 0.0f
                          : exp2f(score[e] * factor - base[e / 2]);
            ds[half][e] = p * (dp[e] - dot[e / 2]) * scaleValue;
          }
        }
        uint32_t dsa[4];
        fragmentOf(dsa, ds[0], ds[1]);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          mmaStaged(acc[dt], dsa, keysT, dt * 8, kk, g, quad);
      }
    }
    storeRows<D>(dq + entry * s * d, acc, rows, s, d, quad);
  }
}

/// dk and dv [t, d] of `batch` entries: blocks of kWarps warps over 64
/// keys (grid.x the key tiles, under a causal mask the first, costliest,
/// first), each walking the queries (under the mask from the tile of its
/// first key on) in tiles of kStep<D>: per tile the transposed scores S^T
/// = K Q^T of the warp's 16 keys, P^T, dV += P^T dO, dP^T = V dO^T, dS^T
/// = P^T (dP^T - dot) scale, dK += dS^T Q.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attentionKeyGradKernel(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dout,
                           const float *lse, const float *dots, const bf16 *scale, bool causal,
                           bf16 *dk, bf16 *dv, int64_t batch, int64_t s, int64_t t, int d,
                           bool wide) {
  constexpr int kTile = kStep<D>;
  __shared__ __align__(16) uint32_t queries[kTile][(D + kPad) / 2];
  __shared__ __align__(16) uint32_t grads[kTile][(D + kPad) / 2];
  __shared__ __align__(16) uint32_t queriesT[D][(kTile + kPad) / 2];
  __shared__ __align__(16) uint32_t gradsT[D][(kTile + kPad) / 2];
  __shared__ float bases[kTile], rowDots[kTile];
  const int64_t first = blockIdx.x * static_cast<int64_t>(kBlockKeys);
  const Lane lane(first);
  const int64_t keyRows[2] = {lane.rows[0], lane.rows[1]};
  int g = lane.g, quad = lane.quad;
  float scaleValue = scaleOf(scale), factor = scaleValue * kLog2e;
  for (int64_t entry = blockIdx.y; entry < batch; entry += gridDim.y) {
    const bf16 *qe = q + entry * s * d, *ke = k + entry * t * d, *ve = v + entry * t * d,
               *ge = dout + entry * s * d;
    uint32_t ka[D / 16][4], va[D / 16][4];
    loadFragments<D>(ka, ke, keyRows, t, d, quad);
    loadFragments<D>(va, ve, keyRows, t, d, quad);
    float dkAcc[D / 8][4] = {}, dvAcc[D / 8][4] = {};
    for (int64_t q0 = causal ? first / kTile * kTile : 0; q0 < s; q0 += kTile) {
      __syncthreads(); // the previous tile's readers are done
      stageRows<kTile, D>(queries, qe, q0, s, d, wide);
      stageRows<kTile, D>(grads, ge, q0, s, d, wide);
      stageColumns<kTile, D>(queriesT, qe, q0, s, d, wide);
      stageColumns<kTile, D>(gradsT, ge, q0, s, d, wide);
      for (int i = threadIdx.x; i < kTile; i += blockDim.x) {
        bases[i] = q0 + i < s ? lse[entry * s + q0 + i] * kLog2e : 0.0f;
        rowDots[i] = q0 + i < s ? dots[entry * s + q0 + i] : 0.0f;
      }
      __syncthreads();
      // P^T of the warp's 16 keys and the tile's queries.
      float p[kTile / 8][4];
      productsByRows<kTile, D>(p, ka, queries, g, quad);
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt)
        for (int e = 0; e < 4; ++e) {
          int column = nt * 8 + 2 * quad + e % 2;
          int64_t query = q0 + column;
          p[nt][e] = query >= s || (causal && keyRows[e / 2] > query)
                         ? 0.0f
                         : exp2f(p[nt][e] * factor - bases[column]);
        }
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t pa[4];
        fragmentOf(pa, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          mmaStaged(dvAcc[dt], pa, gradsT, dt * 8, kk, g, quad);
      }
      // dS^T in place of P^T.
#pragma unroll
      for (int nt = 0; nt < kTile / 8; ++nt) {
        float dp[4] = {};
#pragma unroll
        for (int c = 0; c < D / 16; ++c)
          mmaStaged(dp, va[c], grads, nt * 8, c, g, quad);
        for (int e = 0; e < 4; ++e)
          p[nt][e] *= (dp[e] - rowDots[nt * 8 + 2 * quad + e % 2]) * scaleValue;
      }
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        uint32_t dsa[4];
        fragmentOf(dsa, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          mmaStaged(dkAcc[dt], dsa, queriesT, dt * 8, kk, g, quad);
      }
    }
    storeRows<D>(dk + entry * t * d, dkAcc, keyRows, t, d, quad);
    storeRows<D>(dv + entry * t * d, dvAcc, keyRows, t, d, quad);
  }
}

/// 16-byte staging where every row of `tensors` allows it
/// (SBPRT_CUDA_ATTENTION_WIDE=0: never, 4 bytes a load).
bool wideRows(int d, std::initializer_list<const void *> tensors) {
  bool wide = d % 8 == 0 && context().attentionWide;
  for (const void *tensor : tensors)
    wide = wide && alignmentOf(tensor) >= 16;
  return wide;
}

/// Grid y: the batch entries, up to 65535 (blocks stride over the rest).
unsigned entriesOf(int64_t batch) { return static_cast<unsigned>(batch < 65535 ? batch : 65535); }

template <int D>
void launchAttention(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *scale, bool causal,
                     bf16 *out, float *lse, int64_t batch, int64_t s, int64_t t, int d) {
  dim3 grid(static_cast<unsigned>((s + kQueries - 1) / kQueries), entriesOf(batch));
  attentionKernel<D><<<grid, kWarps * 32, 0, stream()>>>(q, k, v, scale, causal, out, lse, batch,
                                                         s, t, d, wideRows(d, {k, v}));
  launched("attention");
}

template <int D>
void launchAttentionGrad(const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *out,
                         const float *lse, const bf16 *dout, const bf16 *scale, bool causal,
                         bf16 *dq, bf16 *dk, bf16 *dv, int64_t batch, int64_t s, int64_t t,
                         int d) {
  if (s > 0) {
    auto *dots = static_cast<float *>(workspace(batch * s * sizeof(float)));
    rowDotsKernel<<<blocksFor(batch * s * 32), kThreads, 0, stream()>>>(dout, out, dots,
                                                                         batch * s, d);
    launched("attention_grad's row dots");
    dim3 queryGrid(static_cast<unsigned>((s + kQueries - 1) / kQueries), entriesOf(batch));
    attentionQueryGradKernel<D><<<queryGrid, kWarps * 32, 0, stream()>>>(
        q, k, v, dout, lse, dots, scale, causal, dq, batch, s, t, d, wideRows(d, {k, v}));
    launched("attention_grad's queries");
    dim3 keyGrid(static_cast<unsigned>((t + kBlockKeys - 1) / kBlockKeys), entriesOf(batch));
    attentionKeyGradKernel<D><<<keyGrid, kWarps * 32, 0, stream()>>>(
        q, k, v, dout, lse, dots, scale, causal, dk, dv, batch, s, t, d, wideRows(d, {q, dout}));
    launched("attention_grad's keys and values");
  } else {
    // No queries: the keys' and values' gradients are zeros.
    check(fillAsync(dk, batch * t * d, bf16(0.0f)), "attention_grad");
    check(fillAsync(dv, batch * t * d, bf16(0.0f)), "attention_grad");
  }
}

/// Ends the job unless the GPU and the shapes are ones the kernels take:
/// bf16 tensor cores, heads of an even width up to 128, values as wide,
/// some keys, 4-byte aligned tensors.
void checkAttention(const char *op, const cpu::AttentionSizes &n,
                    std::initializer_list<const void *> tensors) {
  static const int major = [] {
    cudaDeviceProp properties{};
    return cudaGetDeviceProperties(&properties, context().device) == cudaSuccess ? properties.major
                                                                                  : 0;
  }();
  if (major < 8)
    rank::failActive(std::string(op) +
                     " needs bf16 tensor cores (compute capability 8.0 or newer); compile with "
                     "--fused-attention=false for this GPU");
  uint32_t alignment = 0;
  for (const void *tensor : tensors)
    alignment |= alignmentOf(tensor);
  if (n.dv != n.d || n.t == 0 || n.d % 2 || n.d > 128 || alignment % 4)
    rank::failActive(std::string(op) +
                     " on the GPU needs heads of an even width up to 128, values as wide, some "
                     "keys and 4-byte aligned tensors, got queries of " +
                     std::to_string(n.d) + ", values of " + std::to_string(n.dv) + " and " +
                     std::to_string(n.t) + " keys");
}

/// Calls `launch` with the kernels' width for heads d wide: 16, 32, 64 or
/// 128.
template <typename Launch> void byWidth(int64_t d, Launch launch) {
  if (d <= 16)
    launch(std::integral_constant<int, 16>());
  else if (d <= 32)
    launch(std::integral_constant<int, 32>());
  else if (d <= 64)
    launch(std::integral_constant<int, 64>());
  else
    launch(std::integral_constant<int, 128>());
}

} // namespace

template <typename T>
void attentionOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                 const Shape &vShape, const T *scale, bool causal, T *out, float *lse) {
  cpu::AttentionSizes n = cpu::attentionSizes(qShape, kShape, vShape);
  if (n.batch == 0 || n.s == 0)
    return;
  if constexpr (!std::is_same_v<T, bf16>) {
    rank::failActive("exec.attention runs in bf16 on the GPU (--precision bf16), not f32");
  } else {
    checkAttention("exec.attention", n, {q, k, v, out});
    byWidth(n.d, [&](auto width) {
      launchAttention<decltype(width)::value>(q, k, v, scale, causal, out, lse, n.batch, n.s, n.t,
                                              static_cast<int>(n.d));
    });
  }
}

template <typename T>
void attentionGradOp(const T *q, const Shape &qShape, const T *k, const Shape &kShape, const T *v,
                     const Shape &vShape, const T *out, const float *lse, const T *dout,
                     const T *scale, bool causal, T *dq, T *dk, T *dv) {
  cpu::AttentionSizes n = cpu::attentionSizes(qShape, kShape, vShape);
  if (n.batch == 0 || n.d == 0)
    return; // every gradient empty
  if constexpr (!std::is_same_v<T, bf16>) {
    rank::failActive("exec.attention_grad runs in bf16 on the GPU (--precision bf16), not f32");
  } else {
    checkAttention("exec.attention_grad", n, {q, k, v, out, dout, dq, dk, dv});
    byWidth(n.d, [&](auto width) {
      launchAttentionGrad<decltype(width)::value>(q, k, v, out, lse, dout, scale, causal, dq, dk,
                                                  dv, n.batch, n.s, n.t, static_cast<int>(n.d));
    });
  }
}

template void attentionOp(const float *, const Shape &, const float *, const Shape &, const float *,
                          const Shape &, const float *, bool, float *, float *);
template void attentionOp(const bf16 *, const Shape &, const bf16 *, const Shape &, const bf16 *,
                          const Shape &, const bf16 *, bool, bf16 *, float *);
template void attentionGradOp(const float *, const Shape &, const float *, const Shape &,
                              const float *, const Shape &, const float *, const float *,
                              const float *, const float *, bool, float *, float *, float *);
template void attentionGradOp(const bf16 *, const Shape &, const bf16 *, const Shape &,
                              const bf16 *, const Shape &, const bf16 *, const float *,
                              const bf16 *, const bf16 *, bool, bf16 *, bf16 *, bf16 *);

} // namespace sbprt::cuda
