// Elementwise and layout kernels: one thread per output element over a
// grid-stride loop (four where a map's operands are aligned for it);
// broadcasts, transposes, slices and pads walk strided views (Context.h).
#include "runtime/Alignment.h"
#include "runtime/Elementwise.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Ops.h"

#include <algorithm>
#include <cmath>

namespace sbprt::cuda {
namespace {

template <typename T> __global__ void fillKernel(T *dst, int64_t n, T value) {
  SBPRT_FOR_EACH(i, n) dst[i] = value;
}

/// Four elements moved as one (16 bytes of f32, 8 of bf16).
template <typename T> struct alignas(4 * sizeof(T)) Four {
  T v[4];
};

/// out[i] = f(in[i]...) for every i < n, computed in f32 (bf16 rounded once,
/// on the write).
template <typename F, typename Out, typename... In>
__global__ void mapKernel(F f, Out *out, int64_t n, const In *...in) {
  SBPRT_FOR_EACH(i, n) out[i] = f(static_cast<float>(in[i])...);
}

template <typename F, typename Out, typename... In>
__device__ void mapFour(F f, Four<Out> &out, const Four<In> &...in) {
  for (int c = 0; c < 4; ++c)
    out.v[c] = f(static_cast<float>(in.v[c])...);
}

/// mapKernel four elements a thread: a wide load per operand and one wide
/// store, where mapKernel moves 2 bytes at a time in bf16.
template <typename F, typename Out, typename... In>
__global__ void mapFoursKernel(F f, Four<Out> *out, int64_t fours, const Four<In> *...in) {
  SBPRT_FOR_EACH(i, fours) {
    Four<Out> result;
    mapFour(f, result, in[i]...);
    out[i] = result;
  }
}

/// How many of n elements go as whole fours: n / 4 where every array is
/// aligned for them (the arena aligns tensors to 64 bytes), else none; the
/// rest go one by one.
template <typename... T> int64_t wholeFours(int64_t n, const T *...arrays) {
  return ((alignmentOf(arrays) >= sizeof(Four<T>)) && ...) ? n / 4 : 0;
}

/// out[i] = f(in[i]...) for i < n: whole fours (wholeFours), the rest one
/// by one.
template <typename F, typename Out, typename... In>
void map(const char *what, F f, Out *out, int64_t n, const In *...in) {
  if (n == 0)
    return;
  int64_t fours = wholeFours(n, static_cast<const Out *>(out), in...);
  if (fours > 0)
    mapFoursKernel<<<blocksFor(fours), kThreads, 0, stream()>>>(
        f, reinterpret_cast<Four<Out> *>(out), fours, reinterpret_cast<const Four<In> *>(in)...);
  if (n > 4 * fours)
    mapKernel<<<blocksFor(n - 4 * fours), kThreads, 0, stream()>>>(f, out + 4 * fours,
                                                                    n - 4 * fours,
                                                                    (in + 4 * fours)...);
  launched(what);
}

// What map computes: the shared elementwise functions (runtime/Elementwise.h).
struct UnaryFn {
  UnaryKind kind;
  __device__ float operator()(float x) const { return elementwise::unary(kind, x); }
};
struct BinaryFn {
  BinaryKind kind;
  __device__ float operator()(float a, float b) const { return elementwise::binary(kind, a, b); }
};
struct ReluGradFn {
  __device__ float operator()(float x, float dy) const { return elementwise::reluGrad(x, dy); }
};
struct GeluGradFn {
  __device__ float operator()(float x, float dy) const { return elementwise::geluGrad(x, dy); }
};
struct IdentityFn {
  __device__ float operator()(float x) const { return x; }
};

template <typename T>
__global__ void binaryKernel(BinaryKind kind, const T *lhs, const T *rhs, T *out,
                             int64_t n, Strided view) {
  SBPRT_FOR_EACH(i, n) {
    int64_t l, r;
    view.offsets(i, l, r);
    out[i] = elementwise::binary(kind, lhs[l], rhs[r]);
  }
}

/// out[view.first(i)] = in[view.second(i)] for every index i of the view:
/// gathers (transpose, broadcast, slice) and scatters (pad) alike.
template <typename T>
__global__ void stridedCopyKernel(const T *in, T *out, int64_t n, Strided view) {
  SBPRT_FOR_EACH(i, n) {
    int64_t to, from;
    view.offsets(i, to, from);
    out[to] = in[from];
  }
}

template <typename T>
__global__ void causalMaskKernel(const T *in, T *out, int64_t n, int64_t s, float fill) {
  SBPRT_FOR_EACH(at, n) {
    int64_t j = at % s, i = (at / s) % s;
    out[at] = j > i ? T(fill) : in[at];
  }
}

__global__ void sgdKernel(const float *param, const float *grad, const float *velocity, int64_t n,
                          double lr, double momentum, double weightDecay, float *newParam,
                          float *newVelocity) {
  SBPRT_FOR_EACH(i, n) {
    elementwise::sgd(param[i], grad[i], velocity[i], lr, momentum, weightDecay, newParam[i],
                     newVelocity[i]);
  }
}

/// AdamW over n / N groups of N elements (N = 4: 16-byte loads and stores
/// of each of the seven arrays, several in flight; 1: one element a thread).
template <int N>
__global__ void adamwKernel(const float *param, const float *grad, const float *m, const float *v,
                            int64_t groups, const float *step, double lr, double beta1,
                            double beta2, double eps, double weightDecay, float *newParam,
                            float *newM, float *newV) {
  // The step's constants (two double pows among them) once per block: per
  // thread they cost more than the update (a thread per element, 248
  // million pows in a GPT-2 small step).
  __shared__ elementwise::AdamwConstants constants;
  if (threadIdx.x == 0)
    constants = elementwise::adamwConstants(*step, lr, beta1, beta2, eps, weightDecay);
  __syncthreads();
  static_assert(N == 1 || N == 4);
  SBPRT_FOR_EACH(i, groups) {
    if constexpr (N == 4) {
      using G = Four<float>;
      auto in = [i](const float *p) { return reinterpret_cast<const G *>(p)[i]; };
      G p = in(param), g = in(grad), m1 = in(m), v1 = in(v), p2, m2, v2;
      for (int c = 0; c < 4; ++c)
        elementwise::adamw(p.v[c], g.v[c], m1.v[c], v1.v[c], constants, p2.v[c], m2.v[c],
                           v2.v[c]);
      reinterpret_cast<G *>(newParam)[i] = p2;
      reinterpret_cast<G *>(newM)[i] = m2;
      reinterpret_cast<G *>(newV)[i] = v2;
    } else {
      elementwise::adamw(param[i], grad[i], m[i], v[i], constants, newParam[i], newM[i], newV[i]);
    }
  }
}

/// 16 bytes moved as one.
struct alignas(16) Bytes16 {
  uint32_t word[4];
};

/// The widest unit, up to 16 bytes, that `view` (of `elementBytes`-byte
/// elements) copies whole: the innermost dimension contiguous on both sides
/// and a whole number of units, every other stride and both starts whole
/// units, both pointers aligned to one.
size_t widestUnit(const Strided &view, const void *in, const void *out, size_t elementBytes) {
  int last = view.rank - 1;
  if (last < 0 || view.stride[0][last] != 1 || view.stride[1][last] != 1)
    return elementBytes;
  for (size_t unit : {16, 8, 4}) {
    if (unit <= elementBytes)
      break;
    auto per = static_cast<int64_t>(unit / elementBytes);
    bool whole = view.shape[last] % per == 0 && view.start[0] % per == 0 &&
                 view.start[1] % per == 0 && reinterpret_cast<uintptr_t>(in) % unit == 0 &&
                 reinterpret_cast<uintptr_t>(out) % unit == 0;
    for (int d = 0; d < last; ++d)
      whole = whole && view.stride[0][d] % per == 0 && view.stride[1][d] % per == 0;
    if (whole)
      return unit;
  }
  return elementBytes;
}

template <typename Unit>
void launchStridedCopy(const void *in, void *out, int64_t n, const Strided &view) {
  stridedCopyKernel<<<blocksFor(n), kThreads, 0, stream()>>>(static_cast<const Unit *>(in),
                                                             static_cast<Unit *>(out), n, view);
}

/// Runs stridedCopyKernel on `elementBytes`-byte elements, several at once
/// where the view allows (a transpose that keeps the last axis moves 16
/// bytes per thread).
void stridedCopy(const void *in, void *out, size_t elementBytes, int64_t n, const Strided &walk,
                 const char *what) {
  if (n == 0)
    return;
  Strided view = collapsed(walk);
  size_t unit = widestUnit(view, in, out, elementBytes);
  if (unit > elementBytes) {
    auto per = static_cast<int64_t>(unit / elementBytes);
    int last = view.rank - 1;
    view.shape[last] /= per;
    for (int d = 0; d < last; ++d) {
      view.stride[0][d] /= per;
      view.stride[1][d] /= per;
    }
    view.start[0] /= per;
    view.start[1] /= per;
    n /= per;
  }
  switch (unit) {
  case 16:
    launchStridedCopy<Bytes16>(in, out, n, view);
    break;
  case 8:
    launchStridedCopy<int64_t>(in, out, n, view);
    break;
  case 4:
    launchStridedCopy<uint32_t>(in, out, n, view);
    break;
  default:
    launchStridedCopy<uint16_t>(in, out, n, view);
  }
  launched(what);
}

} // namespace

void copy(void *dst, const void *src, size_t bytes) {
  if (dst == src || !bytes)
    return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "copy");
  launched("copy");
}

template <typename T> cudaError_t fillAsync(T *dst, int64_t n, T value) {
  if (n == 0)
    return cudaSuccess;
  fillKernel<<<blocksFor(n), kThreads, 0, stream()>>>(dst, n, value);
  return cudaGetLastError();
}

template <typename T> void fill(T *dst, int64_t n, T value) {
  check(fillAsync(dst, n, value), "fill");
  launched("fill");
}

void upload(void *dst, const void *src, size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()), "upload");
  check(cudaStreamSynchronize(stream()), "upload");
}

template <typename T>
void unary(UnaryKind kind, const T *in, T *out, int64_t n) {
  map("unary", UnaryFn{kind}, out, n, in);
}

template <typename T>
void binary(BinaryKind kind, const T *lhs, const Shape &lhsShape, const T *rhs,
            const Shape &rhsShape, T *out, const Shape &outShape) {
  int64_t n = elementsOf(outShape);
  if (n == 0)
    return;
  Strided view = stridedOf(outShape);
  std::vector<int64_t> l = broadcastStrides(lhsShape, outShape),
                       r = broadcastStrides(rhsShape, outShape);
  for (size_t d = 0; d < outShape.size(); ++d) {
    view.stride[0][d] = l[d];
    view.stride[1][d] = r[d];
  }
  view = collapsed(view);
  // Same shapes (a residual add, a gradient summed): one contiguous walk.
  if (view.rank == 1 && view.stride[0][0] == 1 && view.stride[1][0] == 1 && view.start[0] == 0 &&
      view.start[1] == 0)
    return map("binary", BinaryFn{kind}, out, n, lhs, rhs);
  binaryKernel<<<blocksFor(n), kThreads, 0, stream()>>>(kind, lhs, rhs, out, n, view);
  launched("binary");
}

template <typename T>
void broadcast(const T *in, const Shape &inShape, T *out, const Shape &outShape) {
  Strided view = stridedOf(outShape);
  std::vector<int64_t> to = stridesOf(outShape), from = broadcastStrides(inShape, outShape);
  for (size_t d = 0; d < outShape.size(); ++d) {
    view.stride[0][d] = to[d];
    view.stride[1][d] = from[d];
  }
  stridedCopy(in, out, sizeof(T), elementsOf(outShape), view, "broadcast");
}

template <typename T>
void transpose(const T *in, const Shape &shape, const std::vector<int64_t> &perm, T *out) {
  Shape outShape;
  for (int64_t p : perm)
    outShape.push_back(shape[p]);
  Strided view = stridedOf(outShape);
  std::vector<int64_t> to = stridesOf(outShape), from = stridesOf(shape);
  for (size_t d = 0; d < perm.size(); ++d) {
    view.stride[0][d] = to[d];
    view.stride[1][d] = from[perm[d]];
  }
  stridedCopy(in, out, sizeof(T), elementsOf(outShape), view, "transpose");
}

void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out) {
  Shape outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    outShape.push_back(limits[d] - starts[d]);
  Strided view = stridedOf(outShape);
  std::vector<int64_t> to = stridesOf(outShape), from = stridesOf(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    view.stride[0][d] = to[d];
    view.stride[1][d] = from[d];
    view.start[1] += starts[d] * from[d];
  }
  stridedCopy(in, out, elementBytes, elementsOf(outShape), view, "slice");
}

template <typename T>
void pad(const T *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, T *out) {
  Shape outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    outShape.push_back(low[d] + shape[d] + high[d]);
  int64_t n = elementsOf(outShape);
  check(cudaMemsetAsync(out, 0, n * sizeof(T), stream()), "pad");
  Strided view = stridedOf(shape);
  std::vector<int64_t> to = stridesOf(outShape), from = stridesOf(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    view.stride[0][d] = to[d];
    view.stride[1][d] = from[d];
    view.start[0] += low[d] * to[d];
  }
  stridedCopy(in, out, sizeof(T), elementsOf(shape), view, "pad");
}

void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out) {
  // Every input is `outer` runs of shape[axis] * inner elements, side by side.
  int64_t outer = 1, inner = 1, total = 0;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shapes[0][d];
  for (size_t d = axis + 1; d < shapes[0].size(); ++d)
    inner *= shapes[0][d];
  for (const Shape &shape : shapes)
    total += shape[axis];
  size_t rowBytes = static_cast<size_t>(total * inner) * elementBytes, offset = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t run = static_cast<size_t>(shapes[i][axis] * inner) * elementBytes;
    check(copyRows(static_cast<char *>(out) + offset, rowBytes, inputs[i], run, run, outer),
          "concat");
    offset += run;
  }
}

template <typename T>
void causalMaskOp(const T *x, T *y, const Shape &shape, float fill) {
  int64_t n = elementsOf(shape);
  if (n == 0)
    return;
  causalMaskKernel<<<blocksFor(n), kThreads, 0, stream()>>>(x, y, n, shape.back(), fill);
  launched("causal mask");
}

template <typename T>
void reluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  map("relu gradient", ReluGradFn{}, dx, n, x, dy);
}

template <typename T>
void geluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  map("gelu gradient", GeluGradFn{}, dx, n, x, dy);
}

template <typename From, typename To> void convert(const From *in, To *out, int64_t n) {
  map("convert", IdentityFn{}, out, n, in);
}

void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity) {
  if (n == 0)
    return;
  sgdKernel<<<blocksFor(n), kThreads, 0, stream()>>>(param, grad, velocity, n, lr, momentum,
                                                     weightDecay, newParam, newVelocity);
  launched("sgd update");
}

void adamwUpdateOp(const float *param, const float *grad, const float *m, const float *v,
                   int64_t n, const float *step, double lr, double beta1, double beta2,
                   double eps, double weightDecay, float *newParam, float *newM, float *newV) {
  if (n == 0)
    return;
  // Whole fours (wholeFours), the rest one by one. Enough blocks to fill
  // the GPU several times over, each walking many elements, so that the
  // corrections are computed a few thousand times.
  int64_t fours = wholeFours(n, param, grad, m, v, static_cast<const float *>(newParam),
                             static_cast<const float *>(newM), static_cast<const float *>(newV));
  int64_t done = 4 * fours;
  if (fours > 0)
    adamwKernel<4><<<std::min(blocksFor(fours), 4096u), kThreads, 0, stream()>>>(
        param, grad, m, v, fours, step, lr, beta1, beta2, eps, weightDecay, newParam, newM, newV);
  if (n > done)
    adamwKernel<1><<<std::min(blocksFor(n - done), 4096u), kThreads, 0, stream()>>>(
        param + done, grad + done, m + done, v + done, n - done, step, lr, beta1, beta2, eps,
        weightDecay, newParam + done, newM + done, newV + done);
  launched("adamw update");
}

// Both storage types (Ops.h).
#define SBPRT_CUDA_ELEMENTWISE(T)                                                               \
  template void unary(UnaryKind, const T *, T *, int64_t);                                     \
  template void binary(BinaryKind, const T *, const Shape &, const T *, const Shape &, T *,    \
                       const Shape &);                                                         \
  template void broadcast(const T *, const Shape &, T *, const Shape &);                       \
  template void transpose(const T *, const Shape &, const std::vector<int64_t> &, T *);        \
  template void pad(const T *, const Shape &, const std::vector<int64_t> &,                    \
                    const std::vector<int64_t> &, T *);                                        \
  template void causalMaskOp(const T *, T *, const Shape &, float);                            \
  template void reluGrad(const T *, const T *, T *, int64_t);                                  \
  template void geluGrad(const T *, const T *, T *, int64_t);

SBPRT_CUDA_ELEMENTWISE(float)
SBPRT_CUDA_ELEMENTWISE(bf16)
template void convert(const float *, bf16 *, int64_t);
template void convert(const bf16 *, float *, int64_t);
template cudaError_t fillAsync(float *, int64_t, float);
template cudaError_t fillAsync(bf16 *, int64_t, bf16);
template void fill(float *, int64_t, float);
template void fill(int64_t *, int64_t, int64_t);

} // namespace sbprt::cuda
