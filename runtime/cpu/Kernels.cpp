// Reference CPU kernels. Clear loops in a fixed order (bit-identical run to
// run); sums accumulate in double; GEMM goes to BLAS. The loops over whole
// rows and arrays are written for the compiler to vectorize: e^x (GELU,
// softmax, cross-entropy) is straight-line f32 arithmetic
// (elementwise::expF32), a row's maximum and sum run as four lanes in a fixed
// order, and a kind of op is chosen once per loop, not per element. Each
// is instantiated for float and bf16 storage (the end of this file): a
// bf16 element is read as f32 and rounded once where the result is
// written, so the arithmetic in between is the f32 kernel's.
#include "runtime/cpu/Kernels.h"
#include "runtime/Elementwise.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/Walk.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace sbprt::cpu {

/// f(kind) with `kind` as a compile-time constant, one of `Kinds`: a loop
/// per kind, which the compiler vectorizes, not a switch per element.
template <auto... Kinds, typename Kind, typename F> static void withKind(Kind kind, F f) {
  ((kind == Kinds && (f(std::integral_constant<Kind, Kinds>()), true)) || ...);
}

template <typename T>
void unary(UnaryKind kind, const T *in, T *out, int64_t n) {
  withKind<UnaryKind::Neg, UnaryKind::Exp, UnaryKind::Log, UnaryKind::Tanh, UnaryKind::Sqrt,
           UnaryKind::Rsqrt, UnaryKind::Relu, UnaryKind::Gelu>(kind, [&](auto k) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = elementwise::unary(k, in[i]);
  });
}

/// Strides of `shape` seen through the broadcast to `outShape`: 0 where a
/// dimension is stretched or missing.
static Shape broadcastStrides(const Shape &shape, const Shape &outShape) {
  Shape own = stridesOf(shape), result(outShape.size(), 0);
  size_t offset = outShape.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    result[offset + d] = shape[d] == 1 ? 0 : own[d];
  return result;
}

template <typename T>
void binary(BinaryKind kind, const T *lhs, const Shape &lhsShape, const T *rhs,
            const Shape &rhsShape, T *out, const Shape &outShape) {
  // Operands of the result's shape (a gradient's sum, a residual add): one
  // plain loop.
  if (lhsShape == outShape && rhsShape == outShape) {
    int64_t n = numElements(outShape);
    withKind<BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div>(kind, [&](auto k) {
      for (int64_t i = 0; i < n; ++i)
        out[i] = elementwise::binary(k, lhs[i], rhs[i]);
    });
    return;
  }
  std::array<Shape, 2> strides = {broadcastStrides(lhsShape, outShape),
                                   broadcastStrides(rhsShape, outShape)};
  walk<2>(outShape, strides, {0, 0}, [&](int64_t i, const std::array<int64_t, 2> &at) {
    out[i] = elementwise::binary(kind, lhs[at[0]], rhs[at[1]]);
  });
}

/// One GEMM in f32: c[m, n] = op(a) op(b) with rows lda, ldb and ldc
/// apart; zeros when there is nothing to contract.
static void gemmF32(const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                    int64_t ldc, int64_t m, int64_t n, int64_t k, bool transposeA,
                    bool transposeB) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t r = 0; r < m; ++r)
      std::fill_n(c + r * ldc, n, 0.0f);
    return;
  }
  cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
              transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

/// One dense GEMM in f32: sgemm on the values (on f32 copies of bf16 ones).
template <typename T>
static void productF32(const T *a, const T *b, float *c, int64_t m, int64_t n, int64_t k,
                       bool transposeA, bool transposeB) {
  if constexpr (!std::is_same_v<T, float>) {
    std::vector<float> af(a, a + m * k), bf(b, b + k * n);
    productF32(af.data(), bf.data(), c, m, n, k, transposeA, transposeB);
  } else {
    gemmF32(a, transposeA ? m : k, b, transposeB ? k : n, c, n, m, n, k, transposeA, transposeB);
  }
}

template <typename T>
void matmul(const T *a, const T *b, T *c, int64_t batch, int64_t m, int64_t n, int64_t k,
            bool transposeA, bool transposeB, bool sharedB, Causal causal, int64_t blockRows) {
  std::vector<GemmBlock> blocks = causalBlocks(causal, m, n, k, transposeA, blockRows);
  int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
  // bf16: f32 copies of a batch entry, its product rounded once (what
  // cuBLAS's bf16 GEMM with f32 compute gives, up to the order of its sums).
  std::vector<float> af, bf, cf;
  for (int64_t i = 0; i < batch; ++i) {
    const T *ai = a + i * m * k, *bi = sharedB ? b : b + i * k * n;
    T *ci = c + i * m * n;
    const float *fa, *fb;
    float *fc;
    if constexpr (std::is_same_v<T, float>) {
      fa = ai, fb = bi, fc = ci;
    } else {
      af.assign(ai, ai + m * k);
      if (bf.empty() || !sharedB)
        bf.assign(bi, bi + k * n);
      cf.resize(m * n);
      fa = af.data(), fb = bf.data(), fc = cf.data();
    }
    for (const GemmBlock &g : blocks) {
      gemmF32(fa + g.aOffset(lda, transposeA), lda, fb + g.bOffset(ldb, transposeB), ldb,
              fc + g.cOffset(n), n, g.rows, g.cols, g.k, transposeA, transposeB);
      if constexpr (!std::is_same_v<T, float>)
        for (int64_t r = 0; r < g.rows; ++r)
          std::copy_n(fc + g.cOffset(n) + r * n, g.cols, ci + g.cOffset(n) + r * n);
    }
  }
}

template <typename T>
void linear(const T *x, const T *w, const T *bias, const T *residual, T *y, int64_t rows, int64_t n,
            int64_t k, bool transposeW, bool gelu, T *preactivation) {
  // The f32 product: in `y` itself for f32, in a buffer for bf16.
  std::vector<float> product;
  float *out = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    out = y;
  } else {
    product.resize(rows * n);
    out = product.data();
  }
  productF32(x, w, out, rows, n, k, false, transposeW);
  // The epilogue a row at a time, each step a loop of its own that the
  // compiler vectorizes: the bias, the residual (as graph.add of the two:
  // the same bits either way round), the GELU.
  for (int64_t r = 0; r < rows; ++r) {
    float *row = out + r * n;
    for (int64_t j = 0; j < n; ++j)
      row[j] += static_cast<float>(bias[j]);
    if (residual)
      for (int64_t j = 0; j < n; ++j)
        row[j] += static_cast<float>(residual[r * n + j]);
    T *yRow = y + r * n;
    if (gelu && preactivation)
      std::copy_n(row, n, preactivation + r * n);
    if (gelu)
      for (int64_t j = 0; j < n; ++j)
        yRow[j] = elementwise::unary(UnaryKind::Gelu, row[j]);
    else if constexpr (!std::is_same_v<T, float>)
      std::copy_n(row, n, yRow);
  }
}

template <typename T>
void matmulGeluGrad(const T *g, const T *w, const T *pre, T *dx, T *biasGrad, int64_t rows,
                    int64_t n, int64_t k, bool transposeW) {
  std::vector<float> product(rows * n);
  productF32(g, w, product.data(), rows, n, k, false, transposeW);
  for (int64_t i = 0; i < rows * n; ++i) {
    product[i] = elementwise::geluGrad(pre[i], product[i]);
    dx[i] = product[i];
  }
  if (biasGrad) { // reduce's sums of the f32 values, rounded once
    std::vector<float> sums(n);
    reduce(ReduceKind::Sum, product.data(), {rows, n}, {0}, sums.data());
    std::copy(sums.begin(), sums.end(), biasGrad);
  }
}

template <typename T>
void matmulBiasGrad(const T *x, const T *dy, T *dw, T *biasGrad, int64_t rows, int64_t k,
                    int64_t n) {
  matmul(x, dy, dw, 1, k, n, rows, true, false, false);
  reduce(ReduceKind::Sum, dy, {rows, n}, {0}, biasGrad);
}

template <typename T>
void reduce(ReduceKind kind, const T *in, const Shape &shape, const std::vector<int64_t> &dims,
            T *out) {
  // Permute reduced dimensions last, then reduce contiguous rows.
  std::vector<int64_t> perm, keptShape;
  int64_t reducedCount = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      perm.push_back(d);
      keptShape.push_back(shape[d]);
    }
  for (int64_t d : dims) {
    perm.push_back(d);
    reducedCount *= shape[d];
  }
  std::vector<T> moved(numElements(shape));
  transpose(in, shape, perm, moved.data());
  int64_t rows = numElements(keptShape);
  for (int64_t r = 0; r < rows; ++r) {
    const T *row = moved.data() + r * reducedCount;
    if (kind == ReduceKind::Max) {
      out[r] = *std::max_element(row, row + reducedCount);
      continue;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < reducedCount; ++i)
      sum += row[i];
    out[r] = static_cast<float>(kind == ReduceKind::Mean ? sum / reducedCount : sum);
  }
}

/// Calls `visit(offset, stride)` for every line along `axis`: the line's
/// elements are at offset + j * stride for j < shape[axis].
template <typename Visit>
static void forEachLine(const Shape &shape, int64_t axis, Visit visit) {
  int64_t width = shape[axis], inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
    inner *= shape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      visit(o * width * inner + i, inner);
}

/// `x` as f32: itself, or its values converted into `copy`.
template <typename T> static const float *asF32(const T *x, int64_t n, std::vector<float> &copy) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    copy.assign(x, x + n);
    return copy.data();
  }
}

/// A row's largest value, and the sum of e^(x - largest) over the row.
struct RowExps {
  float largest;
  double sum;
};

/// Each e^(x[j] - largest) of the `width` values of `x` into `exps`, and
/// their sum: in double, as four running sums in a fixed order (the same
/// bits every run), so that neither the maximum nor the sum waits for the
/// previous element.
static RowExps expsOf(const float *x, int64_t width, float *exps) {
  constexpr int64_t kLanes = 4;
  float most[kLanes];
  std::fill_n(most, kLanes, -std::numeric_limits<float>::infinity());
  int64_t whole = width - width % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      most[l] = std::max(most[l], x[j + l]);
  for (int64_t j = whole; j < width; ++j)
    most[0] = std::max(most[0], x[j]);
  float largest = std::max(std::max(most[0], most[1]), std::max(most[2], most[3]));
  for (int64_t j = 0; j < width; ++j) {
    // x - largest in f32 and what rounding it lost (Knuth's two-sum), which
    // e^(d + lost) = e^d (1 + lost) takes back: far below the largest, d
    // alone would cost its e^d up to 60 ulp. A masked -inf (d = -inf) is 0.
    float d = x[j] - largest, xPart = d + largest, largestPart = d - xPart;
    float lost = (x[j] - xPart) - (largest + largestPart);
    float e = elementwise::expF32(d);
    exps[j] = e == 0.0f ? 0.0f : e + e * lost;
  }
  double sums[kLanes] = {};
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l)
      sums[l] += exps[j + l];
  for (int64_t j = whole; j < width; ++j)
    sums[0] += exps[j];
  return {largest, (sums[0] + sums[1]) + (sums[2] + sums[3])};
}

/// Softmax (log-softmax) of the `width` elements of `x`, `stride` apart,
/// into `y`; `buffer` is scratch, reused from line to line.
template <typename In, typename Out>
static void softmaxLine(const In *x, Out *y, int64_t width, int64_t stride, bool logSoftmax,
                        std::vector<float> &buffer) {
  buffer.resize(2 * width);
  float *values = buffer.data(), *exps = values + width;
  for (int64_t j = 0; j < width; ++j)
    values[j] = static_cast<float>(x[j * stride]);
  RowExps row = expsOf(values, width, exps);
  if (logSoftmax) {
    double logSum = std::log(row.sum);
    for (int64_t j = 0; j < width; ++j)
      y[j * stride] = static_cast<float>(static_cast<double>(values[j]) - row.largest - logSum);
  } else {
    double inverse = 1.0 / row.sum;
    for (int64_t j = 0; j < width; ++j)
      y[j * stride] = static_cast<float>(exps[j] * inverse);
  }
}

template <typename T>
void softmax(const T *in, T *out, const Shape &shape, int64_t axis, bool logSoftmax) {
  int64_t width = shape[axis];
  std::vector<float> buffer;
  forEachLine(shape, axis, [&](int64_t offset, int64_t stride) {
    softmaxLine(in + offset, out + offset, width, stride, logSoftmax, buffer);
  });
}

template <typename T>
void scaledSoftmax(const T *in, const T *scale, bool causal, T *out,
                   const Shape &shape) {
  int64_t width = shape.back(), rows = width ? numElements(shape) / width : 0;
  std::vector<float> row(width), buffer;
  for (int64_t r = 0; r < rows; ++r) {
    // Row r is query r % width of its block: keys after it are masked.
    // Masked keys are not read (exec.causal_matmul leaves them unwritten).
    for (int64_t j = 0; j < width; ++j)
      row[j] = causal && j > r % width ? -std::numeric_limits<float>::infinity()
               : scale                  ? in[r * width + j] * *scale
                                        : static_cast<float>(in[r * width + j]);
    softmaxLine(row.data(), out + r * width, width, 1, /*logSoftmax=*/false, buffer);
  }
}

template <typename T>
void attention(const T *q, const T *k, const T *v, const T *scale, bool causal, T *out,
               int64_t batch, int64_t s, int64_t t, int64_t d, int64_t dv, float *lse) {
  std::vector<float> scores(s * t), result(s * dv);
  float factor = scale ? static_cast<float>(*scale) : 1.0f;
  for (int64_t b = 0; b < batch; ++b) {
    productF32(q + b * s * d, k + b * t * d, scores.data(), s, t, d, false, true);
    for (int64_t i = 0; lse && i < s; ++i) {
      // The keys up to the query's under the mask, scaled as scaledSoftmax does.
      int64_t keys = causal ? std::min(i + 1, t) : t;
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < keys; ++j)
        top = std::max(top, scores[i * t + j] * factor);
      double sum = 0.0;
      for (int64_t j = 0; j < keys; ++j)
        sum += std::exp(static_cast<double>(scores[i * t + j] * factor) - top);
      lse[b * s + i] = static_cast<float>(top + std::log(sum));
    }
    scaledSoftmax(scores.data(), scale ? &factor : nullptr, causal, scores.data(), {s, t});
    if constexpr (std::is_same_v<T, float>) {
      productF32(scores.data(), v + b * t * dv, result.data(), s, dv, t, false, false);
    } else {
      std::vector<float> values(v + b * t * dv, v + (b + 1) * t * dv);
      productF32(scores.data(), values.data(), result.data(), s, dv, t, false, false);
    }
    std::copy(result.begin(), result.end(), out + b * s * dv);
  }
}

template <typename T>
void attentionGrad(const T *q, const T *k, const T *v, const T *out, const float *lse,
                   const T *dout, const T *scale, bool causal, T *dq, T *dk, T *dv,
                   int64_t batch, int64_t s, int64_t t, int64_t d, int64_t dvWidth) {
  std::vector<float> p(s * t), ds(s * t), result(std::max(s, t) * std::max(d, dvWidth));
  float factor = scale ? static_cast<float>(*scale) : 1.0f;
  // f32 copies of one entry's operands (or f32 views of them).
  auto entry = [](const T *x, int64_t n) { return std::vector<float>(x, x + n); };
  auto store = [&](T *to, int64_t n) { std::copy_n(result.begin(), n, to); };
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> qf = entry(q + b * s * d, s * d), kf = entry(k + b * t * d, t * d),
                       vf = entry(v + b * t * dvWidth, t * dvWidth),
                       of = entry(out + b * s * dvWidth, s * dvWidth),
                       gf = entry(dout + b * s * dvWidth, s * dvWidth);
    // The probabilities from the scores and the log-sum-exp.
    productF32(qf.data(), kf.data(), p.data(), s, t, d, false, true);
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < t; ++j)
        p[i * t + j] = causal && j > i ? 0.0f
                                       : static_cast<float>(std::exp(
                                             static_cast<double>(p[i * t + j] * factor) -
                                             lse[b * s + i]));
    productF32(p.data(), gf.data(), result.data(), t, dvWidth, s, true, false);
    store(dv + b * t * dvWidth, t * dvWidth);
    // dS = P (dP - rowsum(dO * O)) scale, dP = dO v^T.
    productF32(gf.data(), vf.data(), ds.data(), s, t, dvWidth, false, true);
    for (int64_t i = 0; i < s; ++i) {
      double dot = 0.0;
      for (int64_t c = 0; c < dvWidth; ++c)
        dot += static_cast<double>(gf[i * dvWidth + c]) * of[i * dvWidth + c];
      for (int64_t j = 0; j < t; ++j)
        ds[i * t + j] = p[i * t + j] * static_cast<float>(ds[i * t + j] - dot) * factor;
    }
    productF32(ds.data(), kf.data(), result.data(), s, d, t, false, false);
    store(dq + b * s * d, s * d);
    productF32(ds.data(), qf.data(), result.data(), t, d, s, true, false);
    store(dk + b * t * d, t * d);
  }
}

template <typename T>
void layerNorm(const T *in, const T *scale, const T *bias, T *out, int64_t rows,
               int64_t width, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *x = in + r * width;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < width; ++i)
      mean += x[i];
    mean /= width;
    for (int64_t i = 0; i < width; ++i)
      var += (x[i] - mean) * (x[i] - mean);
    var /= width;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < width; ++i)
      out[r * width + i] = static_cast<float>((x[i] - mean) * inv * scale[i] + bias[i]);
  }
}

template <typename T>
void transpose(const T *in, const Shape &shape, const std::vector<int64_t> &perm, T *out) {
  Shape inStrides = stridesOf(shape), outShape, permutedStrides;
  for (int64_t p : perm) {
    outShape.push_back(shape[p]);
    permutedStrides.push_back(inStrides[p]);
  }
  // The trailing dimensions the permutation keeps in place (a head's
  // features, moving with their token) are one contiguous run: copied as one.
  size_t kept = perm.size();
  int64_t run = 1;
  while (kept > 0 && perm[kept - 1] == static_cast<int64_t>(kept - 1))
    run *= shape[--kept];
  outShape.resize(kept);
  permutedStrides.resize(kept);
  if (run == 0)
    return;
  walk<1>(outShape, {permutedStrides}, {0}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    std::copy_n(in + at[0], run, out + i * run);
  });
}

/// Checks that index `value` at `position` of the block `place` places
/// lies in [0, limit).
static bool checkIndex(const char *what, int64_t value, int64_t position, int64_t limit,
                       const char *unit, const IndexPlace &place, std::string &error) {
  if (value >= 0 && value < limit)
    return true;
  error = place.outOfRange(what, value, position, limit, unit);
  return false;
}

template <typename T>
bool embedding(const T *table, int64_t rows, int64_t width, const int64_t *ids, int64_t count,
               T *out, const IndexPlace &place, std::string &error) {
  for (int64_t i = 0; i < count; ++i) {
    if (!checkIndex("index", ids[i], i, rows, "table rows", place, error))
      return false;
    std::copy(table + ids[i] * width, table + (ids[i] + 1) * width, out + i * width);
  }
  return true;
}

template <typename T>
void causalMask(const T *in, T *out, int64_t blocks, int64_t s, float fill) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t at = (b * s + i) * s + j;
        out[at] = j > i ? T(fill) : in[at];
      }
}

template <typename T>
bool crossEntropy(const T *logits, const int64_t *targets, int64_t rows, int64_t classes,
                  T *loss, const IndexPlace &place, std::string &error) {
  double total = 0.0;
  std::vector<float> exps(classes), copy;
  for (int64_t r = 0; r < rows; ++r) {
    if (!checkIndex("target", targets[r], r, classes, "classes", place, error))
      return false;
    // The target's log-probability, as log-softmax computes it.
    const float *row = asF32(logits + r * classes, classes, copy);
    RowExps sums = expsOf(row, classes, exps.data());
    total -= static_cast<float>(static_cast<double>(row[targets[r]]) - sums.largest -
                                std::log(sums.sum));
  }
  *loss = static_cast<float>(total);
  return true;
}

template <typename T>
void reluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = elementwise::reluGrad(x[i], dy[i]);
}

template <typename T>
void geluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = elementwise::geluGrad(x[i], dy[i]);
}

template <typename T>
void softmaxGrad(const T *y, const T *dy, T *dx, const Shape &shape, int64_t axis) {
  int64_t width = shape[axis];
  forEachLine(shape, axis, [&](int64_t offset, int64_t stride) {
    double dot = 0.0;
    for (int64_t j = 0; j < width; ++j)
      dot += static_cast<double>(dy[offset + j * stride]) * y[offset + j * stride];
    for (int64_t j = 0; j < width; ++j) {
      int64_t at = offset + j * stride;
      dx[at] = static_cast<float>(y[at] * (dy[at] - dot));
    }
  });
}

template <typename T>
void scaledSoftmaxGrad(const T *y, const T *dy, const T *scale, bool causal,
                       T *dx, const Shape &shape) {
  // softmaxGrad's arithmetic, then the mask and the scale, rounded once.
  int64_t width = shape.back(), rows = width ? numElements(shape) / width : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const T *yr = y + r * width, *dyr = dy + r * width;
    // Masked probabilities are 0: the dot leaves their gradient unread
    // (exec.causal_matmul leaves it unwritten).
    int64_t kept = causal ? r % width + 1 : width;
    double dot = 0.0;
    for (int64_t j = 0; j < kept; ++j)
      dot += static_cast<double>(dyr[j]) * yr[j];
    for (int64_t j = 0; j < width; ++j) {
      float g = j < kept ? static_cast<float>(yr[j] * (dyr[j] - dot)) : 0.0f;
      if (scale)
        g *= static_cast<float>(*scale);
      dx[r * width + j] = g;
    }
  }
}

template <typename T>
void layerNormGrad(const T *x, const T *scale, const T *dy, T *dx, T *dscale,
                   T *dbias, int64_t rows, int64_t width, float eps) {
  std::vector<double> scaleSum(width, 0.0), biasSum(width, 0.0), xhat(width);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * width, *dyr = dy + r * width;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < width; ++i)
      mean += xr[i];
    mean /= width;
    for (int64_t i = 0; i < width; ++i)
      var += (xr[i] - mean) * (xr[i] - mean);
    double rstd = 1.0 / std::sqrt(var / width + eps);
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale.
    double meanG = 0.0, meanGX = 0.0;
    for (int64_t i = 0; i < width; ++i) {
      xhat[i] = (xr[i] - mean) * rstd;
      double g = static_cast<double>(dyr[i]) * scale[i];
      meanG += g;
      meanGX += g * xhat[i];
      scaleSum[i] += dyr[i] * xhat[i];
      biasSum[i] += dyr[i];
    }
    meanG /= width;
    meanGX /= width;
    for (int64_t i = 0; i < width; ++i) {
      double g = static_cast<double>(dyr[i]) * scale[i];
      dx[r * width + i] = static_cast<float>(rstd * (g - meanG - xhat[i] * meanGX));
    }
  }
  for (int64_t i = 0; i < width; ++i) {
    dscale[i] = static_cast<float>(scaleSum[i]);
    dbias[i] = static_cast<float>(biasSum[i]);
  }
}

template <typename T>
bool embeddingGrad(const int64_t *ids, int64_t count, const T *dy, int64_t width, T *table,
                   int64_t rows, const IndexPlace &place, std::string &error) {
  // Sums in f32: in place for an f32 table, rounded once for a bf16 one.
  std::vector<float> sums;
  float *acc;
  if constexpr (std::is_same_v<T, float>) {
    acc = table;
  } else {
    sums.resize(rows * width);
    acc = sums.data();
  }
  std::fill(acc, acc + rows * width, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    if (!checkIndex("index", ids[i], i, rows, "table rows", place, error))
      return false;
    for (int64_t j = 0; j < width; ++j)
      acc[ids[i] * width + j] += dy[i * width + j];
  }
  if constexpr (!std::is_same_v<T, float>)
    std::copy(acc, acc + rows * width, table);
  return true;
}

template <typename T>
bool crossEntropyGrad(const T *logits, const int64_t *targets, float lossGrad, int64_t rows,
                      int64_t classes, T *dlogits, const IndexPlace &place, std::string &error) {
  std::vector<float> exps(classes), copy;
  for (int64_t r = 0; r < rows; ++r) {
    if (!checkIndex("target", targets[r], r, classes, "classes", place, error))
      return false;
    // (softmax - onehot(target)) * lossGrad, the softmax as softmax computes it.
    RowExps sums = expsOf(asF32(logits + r * classes, classes, copy), classes, exps.data());
    double inverse = 1.0 / sums.sum;
    auto gradient = [&](float prob) {
      return static_cast<float>(static_cast<double>(prob) * lossGrad);
    };
    T *row = dlogits + r * classes;
    for (int64_t c = 0; c < classes; ++c)
      row[c] = gradient(static_cast<float>(exps[c] * inverse));
    row[targets[r]] = gradient(static_cast<float>(exps[targets[r]] * inverse) - 1.0f);
  }
  return true;
}

template <typename T>
void pad(const T *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, T *out) {
  Shape outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    outShape.push_back(low[d] + shape[d] + high[d]);
  Shape outStrides = stridesOf(outShape);
  int64_t start = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    start += low[d] * outStrides[d];
  std::fill(out, out + numElements(outShape), 0.0f);
  // The dimensions not padded make runs (walkedDims).
  int64_t run;
  size_t d = walkedDims(
      shape, [&](size_t axis) { return low[axis] == 0 && high[axis] == 0; }, run);
  if (run == 0)
    return;
  Shape outer(shape.begin(), shape.begin() + d);
  outStrides.resize(d);
  walk<1>(outer, {outStrides}, {start}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    std::copy_n(in + i * run, run, out + at[0]);
  });
}

template <typename T>
void broadcast(const T *in, const Shape &inShape, T *out, const Shape &outShape) {
  walk<1>(outShape, {broadcastStrides(inShape, outShape)}, {0},
          [&](int64_t i, const std::array<int64_t, 1> &at) { out[i] = in[at[0]]; });
}

void sgdUpdate(const float *param, const float *grad, const float *velocity, int64_t n, double lr,
               double momentum, double weightDecay, float *newParam, float *newVelocity) {
  for (int64_t i = 0; i < n; ++i)
    elementwise::sgd(param[i], grad[i], velocity[i], lr, momentum, weightDecay, newParam[i],
                     newVelocity[i]);
}

void adamwUpdate(const float *param, const float *grad, const float *m, const float *v, int64_t n,
                 double step, double lr, double beta1, double beta2, double eps,
                 double weightDecay, float *newParam, float *newM, float *newV) {
  const elementwise::AdamwConstants constants =
      elementwise::adamwConstants(step, lr, beta1, beta2, eps, weightDecay);
  for (int64_t i = 0; i < n; ++i)
    elementwise::adamw(param[i], grad[i], m[i], v[i], constants, newParam[i], newM[i], newV[i]);
}

// Both storage types of every kernel (sgdUpdate and adamwUpdate are f32 only:
// parameters and optimizer state keep f32).
#define SBPRT_CPU_KERNELS(T)                                                                    \
  template void unary(UnaryKind, const T *, T *, int64_t);                                     \
  template void binary(BinaryKind, const T *, const Shape &, const T *, const Shape &, T *,    \
                       const Shape &);                                                         \
  template void matmul(const T *, const T *, T *, int64_t, int64_t, int64_t, int64_t, bool, bool,  \
                       bool, Causal, int64_t);                                                     \
  template void linear(const T *, const T *, const T *, const T *, T *, int64_t, int64_t, int64_t, \
                       bool, bool, T *);                                                           \
  template void matmulGeluGrad(const T *, const T *, const T *, T *, T *, int64_t, int64_t,        \
                               int64_t, bool);                                                     \
  template void matmulBiasGrad(const T *, const T *, T *, T *, int64_t, int64_t, int64_t);         \
  template void reduce(ReduceKind, const T *, const Shape &, const std::vector<int64_t> &, T *);   \
  template void softmax(const T *, T *, const Shape &, int64_t, bool);                         \
  template void scaledSoftmax(const T *, const T *, bool, T *, const Shape &);                 \
  template void attention(const T *, const T *, const T *, const T *, bool, T *, int64_t,      \
                          int64_t, int64_t, int64_t, int64_t, float *);                        \
  template void attentionGrad(const T *, const T *, const T *, const T *, const float *,       \
                              const T *, const T *, bool, T *, T *, T *, int64_t, int64_t,     \
                              int64_t, int64_t, int64_t);                                      \
  template void layerNorm(const T *, const T *, const T *, T *, int64_t, int64_t, float);      \
  template void transpose(const T *, const Shape &, const std::vector<int64_t> &, T *);        \
  template bool embedding(const T *, int64_t, int64_t, const int64_t *, int64_t, T *,          \
                          const IndexPlace &, std::string &);                                  \
  template void causalMask(const T *, T *, int64_t, int64_t, float);                           \
  template bool crossEntropy(const T *, const int64_t *, int64_t, int64_t, T *,                \
                             const IndexPlace &, std::string &);                               \
  template void reluGrad(const T *, const T *, T *, int64_t);                                  \
  template void geluGrad(const T *, const T *, T *, int64_t);                                  \
  template void softmaxGrad(const T *, const T *, T *, const Shape &, int64_t);                \
  template void scaledSoftmaxGrad(const T *, const T *, const T *, bool, T *, const Shape &);  \
  template void layerNormGrad(const T *, const T *, const T *, T *, T *, T *, int64_t, int64_t, \
                              float);                                                          \
  template bool embeddingGrad(const int64_t *, int64_t, const T *, int64_t, T *, int64_t,      \
                              const IndexPlace &, std::string &);                              \
  template bool crossEntropyGrad(const T *, const int64_t *, float, int64_t, int64_t, T *,     \
                                 const IndexPlace &, std::string &);                           \
  template void pad(const T *, const Shape &, const std::vector<int64_t> &,                    \
                    const std::vector<int64_t> &, T *);                                        \
  template void broadcast(const T *, const Shape &, T *, const Shape &);

SBPRT_CPU_KERNELS(float)
SBPRT_CPU_KERNELS(bf16)

} // namespace sbprt::cpu
