// Kernels over rows and lines: reductions, softmax, layer norm,
// cross-entropy, embeddings. One block per row (line), threads striding
// along it, block reductions in a fixed order. Softmax, layer norm, their
// gradients and cross-entropy read each row once where it fits in
// registers (one-pass kernels, vectorized loads); the forward ones sum in
// f32, the gradients (and the looping kernels) in double where the CPU
// kernels do.
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Ops.h"

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace sbprt::cuda {
namespace {

constexpr int kRowThreads = 128;

struct Sum {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// Output r reduces the elements of `in` at kept.offsets(r) +
/// reduced.offsets(j) for every j of `reduced`.
template <typename T>
__global__ void reduceKernel(ReduceKind kind, const T *in, T *out, Strided kept,
                             Strided reduced, int64_t reducedCount) {
  __shared__ double sums[kRowThreads / 32];
  __shared__ float maxes[kRowThreads / 32];
  int64_t base, unused;
  kept.offsets(blockIdx.x, base, unused);
  double sum = 0.0;
  float best = -INFINITY;
  for (int64_t j = threadIdx.x; j < reducedCount; j += blockDim.x) {
    int64_t at;
    reduced.offsets(j, at, unused);
    float x = in[base + at];
    sum += x;
    best = fmaxf(best, x);
  }
  if (kind == ReduceKind::Max) {
    best = blockReduce(best, maxes, Max());
    if (threadIdx.x == 0)
      out[blockIdx.x] = best;
    return;
  }
  sum = blockReduce(sum, sums, Sum());
  if (threadIdx.x == 0)
    out[blockIdx.x] = static_cast<float>(kind == ReduceKind::Mean ? sum / reducedCount : sum);
}

/// One thread per output, its elements summed in order (the CPU's order):
/// for many outputs of few elements each, as a weight's gradient summed
/// over the batch ([8, 3072, 768] over its first axis is 2.4 million
/// outputs of 8), where a block per output would leave nearly every thread
/// idle. Consecutive outputs read consecutive addresses.
template <typename T>
__global__ void reduceOutputsKernel(ReduceKind kind, const T *in, T *out, Strided kept,
                                    Strided reduced, int64_t outputs, int64_t reducedCount) {
  SBPRT_FOR_EACH(o, outputs) {
    int64_t base, at, unused;
    kept.offsets(o, base, unused);
    double sum = 0.0;
    float best = -INFINITY;
    for (int64_t j = 0; j < reducedCount; ++j) {
      reduced.offsets(j, at, unused);
      float x = in[base + at];
      sum += x;
      best = fmaxf(best, x);
    }
    out[o] = kind == ReduceKind::Max
                 ? best
                 : static_cast<float>(kind == ReduceKind::Mean ? sum / reducedCount : sum);
  }
}

//===----------------------------------------------------------------------===//
// One-pass row kernels. A row of up to kRowThreads * V * Items elements
// lives in registers: it is read once, V consecutive elements per load
// (16-byte loads of f32, 8-byte of bf16, where the row's width and
// addresses allow), and written once. The forward kernels sum in f32, the
// gradients in double, in the block's fixed order. Wider rows take the
// looping kernels below.
//===----------------------------------------------------------------------===//

template <typename T, int V> struct alignas(V * sizeof(T)) Pack {
  T v[V];
};

template <int V, typename T> __device__ void loadPack(const T *p, float (&out)[V]) {
  Pack<T, V> pack = *reinterpret_cast<const Pack<T, V> *>(p);
#pragma unroll
  for (int c = 0; c < V; ++c)
    out[c] = static_cast<float>(pack.v[c]);
}

/// loadPack of the elements before `count` (a causal row's kept keys):
/// those after it may be memory never written (exec.causal_matmul leaves
/// them so), which compute-sanitizer's initcheck would report if read.
/// They come back as 0.
template <int V, typename T>
__device__ void loadPackBefore(const T *p, int64_t count, float (&out)[V]) {
  if (count >= V) {
    loadPack<V>(p, out);
    return;
  }
#pragma unroll
  for (int c = 0; c < V; ++c)
    out[c] = c < count ? static_cast<float>(p[c]) : 0.0f;
}

template <int V, typename T> __device__ void storePack(T *p, const float (&in)[V]) {
  Pack<T, V> pack;
#pragma unroll
  for (int c = 0; c < V; ++c)
    pack.v[c] = static_cast<T>(in[c]);
  *reinterpret_cast<Pack<T, V> *>(p) = pack;
}

/// The threads that hold a row in a one-pass kernel: a warp (Lanes = 32,
/// several rows a block, reduced by shuffles alone: rows of up to 1,024
/// elements, softmax over a sequence and layer norm over a hidden size),
/// or the whole block (Lanes = kRowThreads, one row, reduced through
/// shared memory and barriers).
template <int Lanes> struct RowGroup {
  static_assert(Lanes == 32 || Lanes == kRowThreads);
  __device__ static int64_t row() {
    return Lanes == 32 ? blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32
                       : blockIdx.x;
  }
  __device__ static int lane() { return threadIdx.x % Lanes; }
  /// The sum (max) of `value` over the row's threads, in a fixed order;
  /// every one of them gets it.
  template <typename T, typename Combine>
  __device__ static T reduce(T value, T *shared, Combine combine) {
    if constexpr (Lanes == 32) {
      for (int offset = 16; offset > 0; offset /= 2)
        value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset));
      return value;
    } else {
      return blockReduce(value, shared, combine);
    }
  }
};

/// The first element of item `i` of this thread's part of a row.
template <int V, int Lanes> __device__ int64_t itemStart(int i) {
  return (RowGroup<Lanes>::lane() + static_cast<int64_t>(i) * Lanes) * V;
}

/// Calls f(i, j) for each item i of this thread's part of a row (of V
/// elements from element j) that starts before `limit`: a one-pass
/// kernel's loop over the row it holds, unrolled so that the items stay in
/// registers.
template <int V, int Items, int Lanes, typename F>
__device__ __forceinline__ void forEachItem(int64_t limit, F f) {
#pragma unroll
  for (int i = 0; i < Items; ++i)
    if (int64_t j = itemStart<V, Lanes>(i); j < limit)
      f(i, j);
}

template <typename T, int V, int Items, int Lanes>
__global__ void layerNormOnePassKernel(const T *in, const T *scale, const T *bias, T *out,
                                       int64_t rows, int64_t width, float eps) {
  using Group = RowGroup<Lanes>;
  __shared__ float shared[kRowThreads / 32];
  int64_t row = Group::row();
  if (row >= rows) // a warp past the last row (the block's warps hold several)
    return;
  const T *x = in + row * width;
  T *y = out + row * width;
  float v[Items][V];
  float sum = 0.0f;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
    loadPack<V>(x + j, v[i]);
#pragma unroll
    for (int c = 0; c < V; ++c)
      sum += v[i][c];
  });
  float mean = Group::reduce(sum, shared, Sum()) / static_cast<float>(width);
  float var = 0.0f;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t) {
#pragma unroll
    for (int c = 0; c < V; ++c)
      var += (v[i][c] - mean) * (v[i][c] - mean);
  });
  float rstd = 1.0f / sqrtf(Group::reduce(var, shared, Sum()) / static_cast<float>(width) + eps);
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
    float g[V], b[V];
    loadPack<V>(scale + j, g);
    loadPack<V>(bias + j, b);
#pragma unroll
    for (int c = 0; c < V; ++c)
      v[i][c] = (v[i][c] - mean) * rstd * g[c] + b[c];
    storePack<V>(y + j, v[i]);
  });
}

/// exec.softmax (and graph.softmax over the last axis, with no scale and
/// no mask) on row blockIdx.x, as scaledSoftmaxKernel computes it.
template <typename T, int V, int Items, int Lanes>
__global__ void scaledSoftmaxOnePassKernel(const T *in, const T *scale, bool causal, T *out,
                                           int64_t rows, int64_t width) {
  using Group = RowGroup<Lanes>;
  __shared__ float shared[kRowThreads / 32];
  int64_t row = Group::row();
  if (row >= rows)
    return;
  const T *x = in + row * width;
  T *y = out + row * width;
  int64_t kept = causal ? row % width + 1 : width;
  float s = scale ? static_cast<float>(*scale) : 1.0f;
  float v[Items][V];
  float best = -INFINITY;
  forEachItem<V, Items, Lanes>(kept, [&](int i, int64_t j) {
    loadPackBefore<V>(x + j, kept - j, v[i]);
#pragma unroll
    for (int c = 0; c < V; ++c) {
      v[i][c] = j + c < kept ? (scale ? v[i][c] * s : v[i][c]) : -INFINITY;
      best = fmaxf(best, v[i][c]);
    }
  });
  best = Group::reduce(best, shared, Max());
  float sum = 0.0f;
  forEachItem<V, Items, Lanes>(kept, [&](int i, int64_t j) {
#pragma unroll
    for (int c = 0; c < V; ++c) {
      v[i][c] = j + c < kept ? expf(v[i][c] - best) : 0.0f;
      sum += v[i][c];
    }
  });
  float inverse = 1.0f / Group::reduce(sum, shared, Sum());
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
#pragma unroll
    for (int c = 0; c < V; ++c)
      v[i][c] = j < kept ? v[i][c] * inverse : 0.0f;
    storePack<V>(y + j, v[i]);
  });
}

/// Calls f(j, x[j]) (in f32) for the elements j of row x[0, width) that
/// this thread of the block takes, and with `y`, stores what f returns in
/// y[j]: 16-byte packs (8 bf16, 4 f32) from x's first 16-byte boundary,
/// the elements before it and after the last whole pack one by one (all of
/// them where y's boundaries are not x's). For rows too wide for
/// registers, of any alignment: the rows of an odd vocabulary (50,257)
/// start at every one, and took 2-byte loads, which left the GPU's memory
/// mostly idle.
template <typename T, typename F>
__device__ void walkRow(const T *x, T *y, int64_t width, F f) {
  constexpr int P = 16 / sizeof(T);
  constexpr bool stores = !std::is_void_v<decltype(f(int64_t(0), 0.0f))>;
  auto one = [&](int64_t j) {
    if constexpr (stores)
      y[j] = static_cast<T>(f(j, static_cast<float>(x[j])));
    else
      f(j, static_cast<float>(x[j]));
  };
  auto at = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
  int64_t head = static_cast<int64_t>((P - at(x) / sizeof(T) % P) % P);
  if (head > width || (stores && (at(x) - at(y)) % 16 != 0))
    head = width;
  int64_t packs = (width - head) / P, tail = head + packs * P;
  for (int64_t j = threadIdx.x; j < head; j += blockDim.x)
    one(j);
  const auto *in = reinterpret_cast<const Pack<T, P> *>(x + head);
#pragma unroll 4
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    Pack<T, P> v = in[p];
    if constexpr (stores) {
      Pack<T, P> out;
#pragma unroll
      for (int c = 0; c < P; ++c)
        out.v[c] = static_cast<T>(f(head + p * P + c, static_cast<float>(v.v[c])));
      reinterpret_cast<Pack<T, P> *>(y + head)[p] = out;
    } else {
#pragma unroll
      for (int c = 0; c < P; ++c)
        f(head + p * P + c, static_cast<float>(v.v[c]));
    }
  }
  for (int64_t j = tail + threadIdx.x; j < width; j += blockDim.x)
    one(j);
}

/// A running max and sum of exp(x - max) (online softmax): cross-entropy
/// reads its row once for both.
struct MaxSum {
  float max, sum;
};

__device__ MaxSum merge(MaxSum a, MaxSum b) {
  if (a.sum == 0.0f)
    return b;
  if (b.sum == 0.0f)
    return a;
  float m = fmaxf(a.max, b.max);
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

/// The row's MaxSum on every thread: each thread's elements, then the
/// block's, merged in a fixed order.
template <typename T> __device__ MaxSum rowMaxSum(const T *x, int64_t width) {
  __shared__ MaxSum shared[kRowThreads / 32];
  MaxSum acc{-INFINITY, 0.0f};
  walkRow(x, static_cast<T *>(nullptr), width, [&](int64_t, float v) {
    if (v == -INFINITY)
      return;
    if (v > acc.max) {
      acc.sum = acc.sum * expf(acc.max - v) + 1.0f;
      acc.max = v;
    } else {
      acc.sum += expf(v - acc.max);
    }
  });
  for (int offset = 16; offset > 0; offset /= 2)
    acc = merge(acc, {__shfl_xor_sync(0xffffffffu, acc.max, offset),
                      __shfl_xor_sync(0xffffffffu, acc.sum, offset)});
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0)
    shared[warp] = acc;
  __syncthreads();
  acc = shared[0];
  for (int w = 1; w < warps; ++w)
    acc = merge(acc, shared[w]);
  return acc;
}

/// rowLoss[r] = -log_softmax(logits[r])[targets[r]].
template <typename T>
__global__ void crossEntropyOnePassKernel(const T *logits, const int64_t *targets,
                                          double *rowLoss, int64_t classes) {
  const T *x = logits + blockIdx.x * classes;
  MaxSum row = rowMaxSum(x, classes);
  if (threadIdx.x == 0) {
    float logProb = static_cast<float>(x[targets[blockIdx.x]]) - row.max - logf(row.sum);
    rowLoss[blockIdx.x] = -static_cast<double>(logProb);
  }
}

template <typename T>
__global__ void crossEntropyGradOnePassKernel(const T *logits, const int64_t *targets,
                                              const T *lossGrad, T *dlogits, int64_t classes) {
  const T *x = logits + blockIdx.x * classes;
  MaxSum row = rowMaxSum(x, classes);
  int64_t target = targets[blockIdx.x];
  float inverse = 1.0f / row.sum, scale = static_cast<float>(*lossGrad);
  walkRow(x, dlogits + blockIdx.x * classes, classes, [&](int64_t j, float v) {
    float p = expf(v - row.max) * inverse;
    return (j == target ? p - 1.0f : p) * scale;
  });
}

/// Whether rows of `width` elements at these addresses load V at a time.
template <typename T, int V = 4>
bool packable(int64_t width, std::initializer_list<const void *> pointers) {
  if (width % V)
    return false;
  for (const void *p : pointers)
    if (p && reinterpret_cast<uintptr_t>(p) % (V * sizeof(T)))
      return false;
  return true;
}

/// Calls launch(V, Items, Lanes, blocks) (the first three
/// std::integral_constants) with V = 4 when `packed`, else 1; a warp per
/// row (Lanes = 32, kRowThreads / 32 rows a block) where a packed row of
/// `rows` fits in one, else the block (Lanes = kRowThreads, a block a row);
/// and the fewest Items of 1, 2, 4, 8 that hold a row of `width`. False,
/// launching nothing, when the row is wider than that (or
/// SBPRT_CUDA_ONE_PASS=0). SBPRT_CUDA_ROW_WARPS=0: a block a row always.
template <typename Launch>
bool launchOnePass(int64_t width, int64_t rows, bool packed, Launch launch) {
  constexpr int64_t kWarpRows = kRowThreads / 32;
  bool warp = packed && context().rowWarps && width <= 32 * 4 * 8;
  int64_t perLoad = (packed ? 4 : 1) * (warp ? 32 : kRowThreads);
  int64_t items = (width + perLoad - 1) / perLoad;
  if (items > 8 || !context().onePassRows)
    return false;
  auto withLanes = [&](auto v, auto lanes, unsigned blocks) {
    if (items <= 1)
      launch(v, std::integral_constant<int, 1>(), lanes, blocks);
    else if (items <= 2)
      launch(v, std::integral_constant<int, 2>(), lanes, blocks);
    else if (items <= 4)
      launch(v, std::integral_constant<int, 4>(), lanes, blocks);
    else
      launch(v, std::integral_constant<int, 8>(), lanes, blocks);
  };
  if (warp)
    withLanes(std::integral_constant<int, 4>(), std::integral_constant<int, 32>(),
              static_cast<unsigned>((rows + kWarpRows - 1) / kWarpRows));
  else if (packed)
    withLanes(std::integral_constant<int, 4>(), std::integral_constant<int, kRowThreads>(),
              static_cast<unsigned>(rows));
  else
    withLanes(std::integral_constant<int, 1>(), std::integral_constant<int, kRowThreads>(),
              static_cast<unsigned>(rows));
  return true;
}

/// Line `blockIdx.x` of a tensor reduced along an axis of `width` with
/// `inner` elements after it: offset and stride of its elements.
__device__ void lineOf(int64_t line, int64_t width, int64_t inner, int64_t &offset,
                       int64_t &stride) {
  offset = (line / inner) * width * inner + line % inner;
  stride = inner;
}

/// The max of a line of `width` elements `stride` apart, and the sum of
/// exp(x - max) over it, on every thread of the block.
template <typename T>
__device__ void lineMaxAndSum(const T *x, int64_t width, int64_t stride, float &best,
                              double &sum) {
  __shared__ float maxes[kRowThreads / 32];
  __shared__ double sums[kRowThreads / 32];
  best = -INFINITY;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    best = fmaxf(best, x[j * stride]);
  best = blockReduce(best, maxes, Max());
  sum = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    sum += exp(static_cast<double>(x[j * stride]) - best);
  sum = blockReduce(sum, sums, Sum());
}

template <typename T>
__global__ void softmaxKernel(const T *in, T *out, int64_t width, int64_t inner,
                              bool logSoftmax) {
  int64_t offset, stride;
  lineOf(blockIdx.x, width, inner, offset, stride);
  const T *x = in + offset;
  float best;
  double sum;
  lineMaxAndSum(x, width, stride, best, sum);
  double logSum = log(sum);
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    double shifted = static_cast<double>(x[j * stride]) - best;
    out[offset + j * stride] = static_cast<float>(logSoftmax ? shifted - logSum : exp(shifted) / sum);
  }
}

template <typename T>
__global__ void softmaxGradKernel(const T *y, const T *dy, T *dx, int64_t width,
                                  int64_t inner) {
  __shared__ double sums[kRowThreads / 32];
  int64_t offset, stride;
  lineOf(blockIdx.x, width, inner, offset, stride);
  double dot = 0.0;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    dot += static_cast<double>(dy[offset + j * stride]) * y[offset + j * stride];
  dot = blockReduce(dot, sums, Sum());
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    int64_t at = offset + j * stride;
    dx[at] = static_cast<float>(y[at] * (dy[at] - dot));
  }
}

/// exec.softmax: row blockIdx.x of `width`, scaled, masked after its
/// diagonal (row r is query r % width of its block) and softmaxed, reading
/// only the keys it keeps (the sums gain exact zeros from the rest, so the
/// bits are softmaxKernel's on the masked scores).
template <typename T>
__global__ void scaledSoftmaxKernel(const T *in, const T *scale, bool causal, T *out,
                                    int64_t width) {
  __shared__ float maxes[kRowThreads / 32];
  __shared__ double sums[kRowThreads / 32];
  int64_t row = blockIdx.x;
  const T *x = in + row * width;
  T *y = out + row * width;
  int64_t kept = causal ? row % width + 1 : width;
  float s = scale ? static_cast<float>(*scale) : 1.0f;
  auto value = [&](int64_t j) { return scale ? x[j] * s : static_cast<float>(x[j]); };
  float best = -INFINITY;
  for (int64_t j = threadIdx.x; j < kept; j += blockDim.x)
    best = fmaxf(best, value(j));
  best = blockReduce(best, maxes, Max());
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < kept; j += blockDim.x)
    sum += exp(static_cast<double>(value(j)) - best);
  sum = blockReduce(sum, sums, Sum());
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    y[j] = j < kept ? static_cast<float>(exp(static_cast<double>(value(j)) - best) / sum) : 0.0f;
}

/// exec.softmax_grad: softmaxGradKernel's value on row blockIdx.x, then 0
/// after the diagonal, then times the scale.
template <typename T>
__global__ void scaledSoftmaxGradKernel(const T *y, const T *dy, const T *scale,
                                        bool causal, T *dx, int64_t width) {
  __shared__ double sums[kRowThreads / 32];
  int64_t row = blockIdx.x, offset = row * width;
  int64_t kept = causal ? row % width + 1 : width;
  // Masked probabilities are 0: the dot leaves their gradient unread
  // (exec.causal_matmul leaves it unwritten).
  double dot = 0.0;
  for (int64_t j = threadIdx.x; j < kept; j += blockDim.x)
    dot += static_cast<double>(dy[offset + j]) * y[offset + j];
  dot = blockReduce(dot, sums, Sum());
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float g = j < kept ? static_cast<float>(y[offset + j] * (dy[offset + j] - dot)) : 0.0f;
    if (scale)
      g *= static_cast<float>(*scale);
    dx[offset + j] = g;
  }
}

/// scaledSoftmaxGradKernel for a row the block holds in registers
/// (launchOnePass): y and dy are read once, not twice.
template <typename T, int V, int Items, int Lanes>
__global__ void scaledSoftmaxGradOnePassKernel(const T *y, const T *dy, const T *scale,
                                               bool causal, T *dx, int64_t rows, int64_t width) {
  using Group = RowGroup<Lanes>;
  __shared__ double sums[kRowThreads / 32];
  int64_t row = Group::row(), offset = row * width;
  if (row >= rows)
    return;
  int64_t kept = causal ? row % width + 1 : width;
  float p[Items][V], g[Items][V];
  double dot = 0.0;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
    // Past the diagonal p is 0 and dy unwritten: neither is read.
    loadPackBefore<V>(y + offset + j, kept - j, p[i]);
    loadPackBefore<V>(dy + offset + j, kept - j, g[i]);
#pragma unroll
    for (int c = 0; c < V; ++c)
      if (j + c < kept) // as scaledSoftmaxGradKernel: past it, g is not read
        dot += static_cast<double>(g[i][c]) * p[i][c];
  });
  dot = Group::reduce(dot, sums, Sum());
  float s = scale ? static_cast<float>(*scale) : 1.0f;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
#pragma unroll
    for (int c = 0; c < V; ++c) {
      // Masked to 0, then scaled, as the CPU does (a negative scale's -0).
      float v = j + c < kept ? static_cast<float>(p[i][c] * (g[i][c] - dot)) : 0.0f;
      p[i][c] = scale ? v * s : v;
    }
    storePack<V>(dx + offset + j, p[i]);
  });
}

/// Mean and 1 / sqrt(variance + eps) of row `x` of `width`, on every thread.
template <typename T>
__device__ void rowMoments(const T *x, int64_t width, float eps, double *shared, double &mean,
                           double &rstd) {
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    sum += x[i];
  mean = blockReduce(sum, shared, Sum()) / width;
  double var = 0.0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    var += (x[i] - mean) * (x[i] - mean);
  var = blockReduce(var, shared, Sum()) / width;
  rstd = 1.0 / sqrt(var + eps);
}

template <typename T>
__global__ void layerNormKernel(const T *in, const T *scale, const T *bias, T *out,
                                int64_t width, float eps) {
  __shared__ double shared[kRowThreads / 32];
  const T *x = in + blockIdx.x * width;
  double mean, rstd;
  rowMoments(x, width, eps, shared, mean, rstd);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
    out[blockIdx.x * width + i] = static_cast<float>((x[i] - mean) * rstd * scale[i] + bias[i]);
}

/// dx of each row, and the row's mean and rstd into `moments` for the
/// column sums.
template <typename T>
__global__ void layerNormGradRowsKernel(const T *x, const T *scale, const T *dy,
                                        T *dx, double *moments, int64_t width, float eps) {
  __shared__ double shared[kRowThreads / 32];
  const T *xr = x + blockIdx.x * width, *dyr = dy + blockIdx.x * width;
  double mean, rstd;
  rowMoments(xr, width, eps, shared, mean, rstd);
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale.
  double meanG = 0.0, meanGX = 0.0;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    double g = static_cast<double>(dyr[i]) * scale[i];
    meanG += g;
    meanGX += g * ((xr[i] - mean) * rstd);
  }
  meanG = blockReduce(meanG, shared, Sum()) / width;
  meanGX = blockReduce(meanGX, shared, Sum()) / width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    double g = static_cast<double>(dyr[i]) * scale[i];
    double xhat = (xr[i] - mean) * rstd;
    dx[blockIdx.x * width + i] = static_cast<float>(rstd * (g - meanG - xhat * meanGX));
  }
  if (threadIdx.x == 0) {
    moments[2 * blockIdx.x] = mean;
    moments[2 * blockIdx.x + 1] = rstd;
  }
}

/// layerNormGradRowsKernel for a row the block holds in registers
/// (launchOnePass): x, dy and the scale are read once, where the looping
/// kernel reads x four times and dy and the scale twice. The same sums in
/// double, in another order.
template <typename T, int V, int Items, int Lanes>
__global__ void layerNormGradRowsOnePassKernel(const T *x, const T *scale, const T *dy, T *dx,
                                               double *moments, int64_t rows, int64_t width,
                                               float eps) {
  using Group = RowGroup<Lanes>;
  __shared__ double shared[kRowThreads / 32];
  int64_t row = Group::row(), offset = row * width;
  if (row >= rows)
    return;
  float xs[Items][V];
  double g[Items][V]; // dy * scale, exact in double
  double sum = 0.0;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
    float d[V], s[V];
    loadPack<V>(x + offset + j, xs[i]);
    loadPack<V>(dy + offset + j, d);
    loadPack<V>(scale + j, s);
#pragma unroll
    for (int c = 0; c < V; ++c) {
      sum += xs[i][c];
      g[i][c] = static_cast<double>(d[c]) * s[c];
    }
  });
  double mean = Group::reduce(sum, shared, Sum()) / width, var = 0.0;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t) {
#pragma unroll
    for (int c = 0; c < V; ++c)
      var += (xs[i][c] - mean) * (xs[i][c] - mean);
  });
  double rstd = 1.0 / sqrt(Group::reduce(var, shared, Sum()) / width + eps);
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
  double meanG = 0.0, meanGX = 0.0;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t) {
#pragma unroll
    for (int c = 0; c < V; ++c) {
      meanG += g[i][c];
      meanGX += g[i][c] * ((xs[i][c] - mean) * rstd);
    }
  });
  meanG = Group::reduce(meanG, shared, Sum()) / width;
  meanGX = Group::reduce(meanGX, shared, Sum()) / width;
  forEachItem<V, Items, Lanes>(width, [&](int i, int64_t j) {
    float out[V];
#pragma unroll
    for (int c = 0; c < V; ++c)
      out[c] = static_cast<float>(rstd * (g[i][c] - meanG - (xs[i][c] - mean) * rstd * meanGX));
    storePack<V>(dx + offset + j, out);
  });
  if (Group::lane() == 0) {
    moments[2 * row] = mean;
    moments[2 * row + 1] = rstd;
  }
}

/// dscale and dbias are column sums over every row. Stage 1: block (t, c)
/// sums P columns a thread, 32P from column 32Pt, over row chunk c,
/// kColumnLanes rows at a time, into partial[c]; stage 2 sums the chunks
/// (columnTotalsKernel). A fixed decomposition: the same bits run to run,
/// with the whole GPU busy (one thread per column would leave most of it
/// idle for thousands of rows). P = 16 bytes of elements where the rows
/// allow (columnPack), so that each load moves 16 bytes, not 2 of bf16.
constexpr int kColumnLanes = 8;

template <typename T, int P>
__global__ void layerNormGradPartialsKernel(const T *x, const T *dy,
                                            const double *moments, double *partial,
                                            int64_t rows, int64_t width, int64_t rowsPerChunk) {
  __shared__ double scaleSums[kColumnLanes][32 * P], biasSums[kColumnLanes][32 * P];
  int64_t i = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * P;
  int64_t begin = blockIdx.y * rowsPerChunk;
  int64_t end = begin + rowsPerChunk < rows ? begin + rowsPerChunk : rows;
  double scaleSum[P] = {}, biasSum[P] = {};
  if (i < width) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnLanes) {
      float xs[P], d[P];
      loadPack<P>(x + r * width + i, xs);
      loadPack<P>(dy + r * width + i, d);
      double mean = moments[2 * r], rstd = moments[2 * r + 1];
#pragma unroll
      for (int c = 0; c < P; ++c) {
        scaleSum[c] += d[c] * ((xs[c] - mean) * rstd);
        biasSum[c] += d[c];
      }
    }
  }
#pragma unroll
  for (int c = 0; c < P; ++c) {
    scaleSums[threadIdx.y][threadIdx.x * P + c] = scaleSum[c];
    biasSums[threadIdx.y][threadIdx.x * P + c] = biasSum[c];
  }
  __syncthreads();
  if (threadIdx.y == 0 && i < width) {
#pragma unroll
    for (int c = 0; c < P; ++c) {
      for (int lane = 1; lane < kColumnLanes; ++lane) {
        scaleSum[c] += scaleSums[lane][threadIdx.x * P + c];
        biasSum[c] += biasSums[lane][threadIdx.x * P + c];
      }
      partial[(2 * blockIdx.y) * width + i + c] = scaleSum[c];
      partial[(2 * blockIdx.y + 1) * width + i + c] = biasSum[c];
    }
  }
}

/// A reduction over the leading axes, [rows, width] with the rows reduced
/// (a bias's gradient: dy summed over batch and sequence), the same way:
/// block (t, c) reduces P columns a thread, a warp reading 32P consecutive
/// columns of a row, over row chunk c into partial[c]; then the chunks. A
/// block per output would read a column, one element per 32 bytes
/// fetched.
template <typename T, int P>
__global__ void columnPartialsKernel(ReduceKind kind, const T *in, double *partial,
                                     int64_t rows, int64_t width, int64_t rowsPerChunk) {
  __shared__ double lanes[kColumnLanes][32 * P];
  bool isMax = kind == ReduceKind::Max;
  int64_t i = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * P;
  int64_t begin = blockIdx.y * rowsPerChunk;
  int64_t end = begin + rowsPerChunk < rows ? begin + rowsPerChunk : rows;
  double value[P];
#pragma unroll
  for (int c = 0; c < P; ++c)
    value[c] = isMax ? -INFINITY : 0.0;
  if (i < width) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnLanes) {
      float x[P];
      loadPack<P>(in + r * width + i, x);
#pragma unroll
      for (int c = 0; c < P; ++c)
        value[c] = isMax ? fmax(value[c], static_cast<double>(x[c])) : value[c] + x[c];
    }
  }
#pragma unroll
  for (int c = 0; c < P; ++c)
    lanes[threadIdx.y][threadIdx.x * P + c] = value[c];
  __syncthreads();
  if (threadIdx.y == 0 && i < width) {
#pragma unroll
    for (int c = 0; c < P; ++c) {
      for (int lane = 1; lane < kColumnLanes; ++lane) {
        double other = lanes[lane][threadIdx.x * P + c];
        value[c] = isMax ? fmax(value[c], other) : value[c] + other;
      }
      partial[blockIdx.y * width + i + c] = value[c];
    }
  }
}

/// out[i] = partial[c * stride + i] combined over the chunks c, a warp a
/// column: lane l takes chunks l, l + 32, ..., then the lanes combine by
/// shuffles in a fixed order. (A thread a column summed hundreds of chunks
/// one after another, with a few hundred threads busy.)
template <typename T>
__global__ void columnTotalsKernel(ReduceKind kind, const double *partial, int64_t chunks,
                                   int64_t stride, int64_t rows, int64_t width, T *out) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (i >= width) // the whole warp
    return;
  bool isMax = kind == ReduceKind::Max;
  double value = isMax ? -INFINITY : 0.0;
  for (int64_t c = lane; c < chunks; c += 32)
    value = isMax ? fmax(value, partial[c * stride + i]) : value + partial[c * stride + i];
  for (int offset = 16; offset > 0; offset /= 2) {
    double other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = isMax ? fmax(value, other) : value + other;
  }
  if (lane == 0)
    out[i] = static_cast<float>(kind == ReduceKind::Mean ? value / rows : value);
}

/// Launches columnTotalsKernel over `width` columns.
template <typename T>
void columnTotals(ReduceKind kind, const double *partial, int64_t chunks, int64_t stride,
                  int64_t rows, int64_t width, T *out) {
  constexpr int64_t kColumnsPerBlock = kThreads / 32;
  columnTotalsKernel<<<static_cast<unsigned>((width + kColumnsPerBlock - 1) / kColumnsPerBlock),
                       kThreads, 0, stream()>>>(kind, partial, chunks, stride, rows, width, out);
}

/// The columns a thread of the column kernels takes: 16 bytes' worth where
/// the rows' width and the pointers allow, else 1.
template <typename T> int columnPack(int64_t width, std::initializer_list<const void *> pointers) {
  constexpr int kPack = 16 / sizeof(T);
  return packable<T, kPack>(width, pointers) ? kPack : 1;
}

/// Calls launch(P) (a std::integral_constant) with columnPack's P.
template <typename T, typename Launch>
void withColumnPack(int pack, Launch launch) {
  constexpr int kPack = 16 / sizeof(T);
  if (pack == kPack)
    launch(std::integral_constant<int, kPack>());
  else
    launch(std::integral_constant<int, 1>());
}

/// Chunks of rows for a column reduction whose blocks take `tiles` column
/// tiles: at least 64 rows each where that keeps about 1,024 blocks busy,
/// fewer (down to a row for each of a block's lanes) where wide packs
/// leave few tiles; at most 256.
int64_t columnChunks(int64_t rows, int64_t tiles) {
  int64_t few = std::min<int64_t>(256, (rows + 63) / 64);
  int64_t busy = std::min<int64_t>({256, (rows + kColumnLanes - 1) / kColumnLanes,
                                    (1024 + tiles - 1) / tiles});
  return std::max(few, busy);
}

/// The most partial sums a column reduction keeps in the workspace (32 MiB):
/// wide rows take fewer chunks (their columns already fill the GPU), and
/// wider still the block-per-output kernel, which needs none.
constexpr int64_t kMaxColumnPartials = 1 << 22;

/// The rows' losses summed in row order.
template <typename T>
__global__ void sumRowsKernel(const double *rowLoss, int64_t rows, T *loss) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    total += rowLoss[r];
  *loss = static_cast<float>(total);
}

template <typename T>
__global__ void embeddingKernel(const T *table, const int64_t *ids, T *out, int64_t count,
                                int64_t width) {
  SBPRT_FOR_EACH(at, count * width) out[at] = table[ids[at / width] * width + at % width];
}

/// Block k sums, for table row rows[k], the rows of dy at positions
/// positions[starts[k]] .. positions[starts[k + 1] - 1], in position order
/// as the CPU does (deterministic, no atomics).
template <typename T>
__global__ void embeddingGradKernel(const int64_t *rows, const int64_t *starts,
                                    const int64_t *positions, const T *dy, int64_t width,
                                    T *table) {
  int64_t row = rows[blockIdx.x], begin = starts[blockIdx.x], end = starts[blockIdx.x + 1];
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float sum = 0.0f;
    for (int64_t p = begin; p < end; ++p)
      sum += dy[positions[p] * width + j];
    table[row * width + j] = sum;
  }
}

/// Lines along `axis` of `shape`: how many, their width, the elements after the axis.
void linesOf(const Shape &shape, int64_t axis, int64_t &lines, int64_t &width, int64_t &inner) {
  width = shape[axis];
  inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  lines = width ? elementsOf(shape) / width : 0;
}

} // namespace

template <typename T>
void reduce(ReduceKind kind, const T *in, const Shape &shape, const std::vector<int64_t> &dims,
            T *out) {
  std::vector<int64_t> strides = stridesOf(shape), keptShape, reducedShape, keptStrides,
                       reducedStrides;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    (reduced ? reducedShape : keptShape).push_back(shape[d]);
    (reduced ? reducedStrides : keptStrides).push_back(strides[d]);
  }
  Strided kept = stridedOf(keptShape), along = stridedOf(reducedShape);
  for (size_t d = 0; d < keptShape.size(); ++d)
    kept.stride[0][d] = keptStrides[d];
  for (size_t d = 0; d < reducedShape.size(); ++d)
    along.stride[0][d] = reducedStrides[d];
  kept = collapsed(kept);
  along = collapsed(along);
  int64_t outputs = elementsOf(keptShape), reducedCount = elementsOf(reducedShape);
  if (outputs == 0)
    return;
  // The reduced axes lead: [reducedCount, outputs] row-major.
  bool leading = true;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d)
    leading = leading && std::find(dims.begin(), dims.end(), d) != dims.end();
  // Enough outputs to fill the GPU a thread each, few elements each: a
  // thread per output; else over leading axes, columns in chunks of rows;
  // else a block per output.
  if (outputs >= 32768 && reducedCount <= 1024) {
    reduceOutputsKernel<<<blocksFor(outputs), kThreads, 0, stream()>>>(kind, in, out, kept, along,
                                                                     outputs, reducedCount);
  } else if (leading && reducedCount > 0 && outputs <= kMaxColumnPartials) {
    int pack = columnPack<T>(outputs, {in});
    int64_t tiles = (outputs + 32 * pack - 1) / (32 * pack);
    int64_t chunks = std::min(columnChunks(reducedCount, tiles), kMaxColumnPartials / outputs);
    int64_t rowsPerChunk = (reducedCount + chunks - 1) / chunks;
    auto *partial = static_cast<double *>(workspace(chunks * outputs * sizeof(double)));
    withColumnPack<T>(pack, [&](auto p) {
      columnPartialsKernel<T, decltype(p)::value>
          <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
             dim3(32, kColumnLanes), 0, stream()>>>(kind, in, partial, reducedCount, outputs,
                                                    rowsPerChunk);
    });
    launched("reduce");
    columnTotals(kind, partial, chunks, outputs, reducedCount, outputs, out);
  } else
    reduceKernel<<<outputs, kRowThreads, 0, stream()>>>(kind, in, out, kept, along, reducedCount);
  launched("reduce");
}

template <typename T>
void softmax(const T *in, T *out, const Shape &shape, int64_t axis, bool logSoftmax) {
  int64_t lines, width, inner;
  linesOf(shape, axis, lines, width, inner);
  if (lines == 0)
    return;
  if (inner == 1 && !logSoftmax) { // over the last axis (or before only 1s): one pass
    scaledSoftmax(in, static_cast<const T *>(nullptr), false, out, Shape{lines, width});
    return;
  }
  softmaxKernel<<<lines, kRowThreads, 0, stream()>>>(in, out, width, inner, logSoftmax);
  launched("softmax");
}

template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, const Shape &shape, int64_t axis) {
  int64_t lines, width, inner;
  linesOf(shape, axis, lines, width, inner);
  if (lines == 0)
    return;
  if (inner == 1) { // over the last axis (or before only 1s): one pass
    scaledSoftmaxGrad(y, dy, static_cast<const T *>(nullptr), false, dx, Shape{lines, width});
    return;
  }
  softmaxGradKernel<<<lines, kRowThreads, 0, stream()>>>(y, dy, dx, width, inner);
  launched("softmax gradient");
}

template <typename T>
void scaledSoftmax(const T *in, const T *scale, bool causal, T *out,
                   const Shape &shape) {
  int64_t width = shape.back(), rows = width ? elementsOf(shape) / width : 0;
  if (rows == 0)
    return;
  bool onePass = launchOnePass(
      width, rows, packable<T>(width, {in, out}), [&](auto v, auto items, auto lanes, unsigned blocks) {
        scaledSoftmaxOnePassKernel<T, decltype(v)::value, decltype(items)::value,
                                   decltype(lanes)::value>
            <<<blocks, kRowThreads, 0, stream()>>>(in, scale, causal, out, rows, width);
      });
  if (!onePass)
    scaledSoftmaxKernel<<<rows, kRowThreads, 0, stream()>>>(in, scale, causal, out, width);
  launched("softmax");
}

template <typename T>
void scaledSoftmaxGrad(const T *y, const T *dy, const T *scale, bool causal,
                       T *dx, const Shape &shape) {
  int64_t width = shape.back(), rows = width ? elementsOf(shape) / width : 0;
  if (rows == 0)
    return;
  bool onePass =
      launchOnePass(width, rows, packable<T>(width, {y, dy, dx}),
                    [&](auto v, auto items, auto lanes, unsigned blocks) {
                      scaledSoftmaxGradOnePassKernel<T, decltype(v)::value,
                                                     decltype(items)::value,
                                                     decltype(lanes)::value>
                          <<<blocks, kRowThreads, 0, stream()>>>(y, dy, scale, causal, dx, rows,
                                                                 width);
                    });
  if (!onePass)
    scaledSoftmaxGradKernel<<<rows, kRowThreads, 0, stream()>>>(y, dy, scale, causal, dx, width);
  launched("softmax gradient");
}

template <typename T>
void layerNormOp(const T *x, const T *scale, const T *bias, T *y,
                 const Shape &shape, float eps) {
  int64_t width = shape.back(), rows = width ? elementsOf(shape) / width : 0;
  if (rows == 0)
    return;
  bool onePass =
      launchOnePass(width, rows, packable<T>(width, {x, scale, bias, y}),
                    [&](auto v, auto items, auto lanes, unsigned blocks) {
                      layerNormOnePassKernel<T, decltype(v)::value, decltype(items)::value,
                                             decltype(lanes)::value>
                          <<<blocks, kRowThreads, 0, stream()>>>(x, scale, bias, y, rows, width,
                                                                 eps);
                    });
  if (!onePass)
    layerNormKernel<<<rows, kRowThreads, 0, stream()>>>(x, scale, bias, y, width, eps);
  launched("layer norm");
}

template <typename T>
void layerNormGradOp(const T *x, const T *scale, const T *dy, T *dx,
                     T *dscale, T *dbias, const Shape &shape, float eps) {
  int64_t width = shape.back(), rows = width ? elementsOf(shape) / width : 0;
  if (width == 0)
    return;
  if (rows == 0) { // no rows: the weight gradients are sums of nothing
    check(cudaMemsetAsync(dscale, 0, width * sizeof(T), stream()), "layer norm gradient");
    check(cudaMemsetAsync(dbias, 0, width * sizeof(T), stream()), "layer norm gradient");
    return;
  }
  // [moments | partials].
  int pack = columnPack<T>(width, {x, dy});
  int64_t tiles = (width + 32 * pack - 1) / (32 * pack);
  int64_t chunks = columnChunks(rows, tiles);
  int64_t rowsPerChunk = (rows + chunks - 1) / chunks;
  auto *moments =
      static_cast<double *>(workspace((2 * rows + 2 * chunks * width) * sizeof(double)));
  double *partial = moments + 2 * rows;
  bool onePass =
      launchOnePass(width, rows, packable<T>(width, {x, scale, dy, dx}),
                    [&](auto v, auto items, auto lanes, unsigned blocks) {
                      layerNormGradRowsOnePassKernel<T, decltype(v)::value,
                                                     decltype(items)::value,
                                                     decltype(lanes)::value>
                          <<<blocks, kRowThreads, 0, stream()>>>(x, scale, dy, dx, moments, rows,
                                                                 width, eps);
                    });
  if (!onePass)
    layerNormGradRowsKernel<<<rows, kRowThreads, 0, stream()>>>(x, scale, dy, dx, moments,
                                                                width, eps);
  launched("layer norm gradient");
  withColumnPack<T>(pack, [&](auto p) {
    layerNormGradPartialsKernel<T, decltype(p)::value>
        <<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
           dim3(32, kColumnLanes), 0, stream()>>>(x, dy, moments, partial, rows, width,
                                                  rowsPerChunk);
  });
  launched("layer norm gradient");
  // partial is [chunk][scale, bias][width].
  columnTotals(ReduceKind::Sum, partial, chunks, 2 * width, rows, width, dscale);
  columnTotals(ReduceKind::Sum, partial + width, chunks, 2 * width, rows, width, dbias);
  launched("layer norm gradient");
}

template <typename T>
bool crossEntropyOp(const T *logits, const Shape &logitsShape, const int64_t *targets,
                    T *loss, const IndexPlace &place, std::string &error) {
  int64_t classes = logitsShape.back(), rows = classes ? elementsOf(logitsShape) / classes : 0;
  if (!checkIds(targets, rows, classes, "target", "classes", place, error))
    return false;
  auto *rowLoss = static_cast<double *>(workspace((rows ? rows : 1) * sizeof(double)));
  if (rows)
    crossEntropyOnePassKernel<<<rows, kRowThreads, 0, stream()>>>(logits, targets, rowLoss,
                                                                  classes);
  sumRowsKernel<<<1, 1, 0, stream()>>>(rowLoss, rows, loss);
  launched("cross-entropy");
  return true;
}

template <typename T>
bool crossEntropyGradOp(const T *logits, const Shape &logitsShape, const int64_t *targets,
                        const T *lossGrad, T *dlogits, const IndexPlace &place,
                        std::string &error) {
  int64_t classes = logitsShape.back(), rows = classes ? elementsOf(logitsShape) / classes : 0;
  if (!checkIds(targets, rows, classes, "target", "classes", place, error))
    return false;
  if (rows == 0)
    return true;
  crossEntropyGradOnePassKernel<<<rows, kRowThreads, 0, stream()>>>(logits, targets, lossGrad,
                                                                     dlogits, classes);
  launched("cross-entropy gradient");
  return true;
}

template <typename T>
bool embeddingOp(const T *table, const Shape &tableShape, const int64_t *indices,
                 int64_t count, T *out, const IndexPlace &place, std::string &error) {
  if (!checkIds(indices, count, tableShape[0], "index", "table rows", place, error))
    return false;
  int64_t width = tableShape[1];
  if (count * width == 0)
    return true;
  embeddingKernel<<<blocksFor(count * width), kThreads, 0, stream()>>>(table, indices, out, count,
                                                                       width);
  launched("embedding");
  return true;
}

template <typename T>
bool embeddingGradOp(const int64_t *indices, int64_t count, const T *dy,
                     const Shape &tableShape, T *table, const IndexPlace &place,
                     std::string &error) {
  std::vector<int64_t> ids;
  if (!checkIds(indices, count, tableShape[0], "index", "table rows", place, error, &ids))
    return false;
  int64_t width = tableShape[1];
  check(cudaMemsetAsync(table, 0, tableShape[0] * width * sizeof(T), stream()),
        "embedding gradient");
  if (count * width == 0)
    return true;
  // The positions of each id, in order: [rows | starts | positions].
  std::vector<int64_t> order(count);
  for (int64_t i = 0; i < count; ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  std::vector<int64_t> rows, starts;
  for (int64_t k = 0; k < count; ++k)
    if (k == 0 || ids[order[k]] != ids[order[k - 1]]) {
      rows.push_back(ids[order[k]]);
      starts.push_back(k);
    }
  starts.push_back(count);
  int64_t distinct = static_cast<int64_t>(rows.size());
  std::vector<int64_t> packed(rows);
  packed.insert(packed.end(), starts.begin(), starts.end());
  packed.insert(packed.end(), order.begin(), order.end());
  auto *device = static_cast<int64_t *>(workspace(packed.size() * sizeof(int64_t)));
  check(cudaMemcpyAsync(device, packed.data(), packed.size() * sizeof(int64_t),
                        cudaMemcpyHostToDevice, stream()),
        "embedding gradient");
  embeddingGradKernel<<<distinct, kRowThreads, 0, stream()>>>(
      device, device + distinct, device + 2 * distinct + 1, dy, width, table);
  launched("embedding gradient");
  // `packed` is a host buffer the copy reads: keep it until the copy is done.
  check(cudaStreamSynchronize(stream()), "embedding gradient");
  return true;
}

// Both storage types (Ops.h).
#define SBPRT_CUDA_ROWS(T)                                                                      \
  template void reduce(ReduceKind, const T *, const Shape &, const std::vector<int64_t> &,     \
                       T *);                                                                   \
  template void softmax(const T *, T *, const Shape &, int64_t, bool);                         \
  template void softmaxGrad(const T *, const T *, T *, const Shape &, int64_t);                \
  template void scaledSoftmax(const T *, const T *, bool, T *, const Shape &);                 \
  template void scaledSoftmaxGrad(const T *, const T *, const T *, bool, T *, const Shape &);  \
  template void layerNormOp(const T *, const T *, const T *, T *, const Shape &, float);       \
  template void layerNormGradOp(const T *, const T *, const T *, T *, T *, T *, const Shape &, \
                                float);                                                        \
  template bool crossEntropyOp(const T *, const Shape &, const int64_t *, T *,                \
                               const IndexPlace &, std::string &);                             \
  template bool crossEntropyGradOp(const T *, const Shape &, const int64_t *, const T *, T *,  \
                                   const IndexPlace &, std::string &);                         \
  template bool embeddingOp(const T *, const Shape &, const int64_t *, int64_t, T *,           \
                            const IndexPlace &, std::string &);                                \
  template bool embeddingGradOp(const int64_t *, int64_t, const T *, const Shape &, T *,       \
                                const IndexPlace &, std::string &);

SBPRT_CUDA_ROWS(float)
SBPRT_CUDA_ROWS(bf16)

} // namespace sbprt::cuda
