// Reference CPU kernels. Clear loops in a fixed order (bit-identical run to
// run); sums accumulate in double; GEMM goes to BLAS.
#include "runtime/cpu/Kernels.h"
#include "runtime/Elementwise.h"
#include "runtime/Tensor.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace sbprt::cpu {

static Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}


/// Visits every index of `shape` in row-major order, like an odometer, and
/// calls `visit(i, offsets)` with the linear output index and, for each of
/// the N strided views, the offset of that index (`start + sum(index * stride)`).
template <size_t N, typename Visit>
static void walk(const Shape &shape, const std::array<Shape, N> &strides,
                 std::array<int64_t, N> offsets, Visit visit) {
  int64_t rank = static_cast<int64_t>(shape.size()), n = numElements(shape);
  Shape index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    visit(i, offsets);
    for (int64_t d = rank - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k)
        offsets[k] += strides[k][d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

void unary(UnaryKind kind, const float *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = elementwise::unary(kind, in[i]);
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

void binary(BinaryKind kind, const float *lhs, const Shape &lhsShape, const float *rhs,
            const Shape &rhsShape, float *out, const Shape &outShape) {
  std::array<Shape, 2> strides = {broadcastStrides(lhsShape, outShape),
                                   broadcastStrides(rhsShape, outShape)};
  walk<2>(outShape, strides, {0, 0}, [&](int64_t i, const std::array<int64_t, 2> &at) {
    out[i] = elementwise::binary(kind, lhs[at[0]], rhs[at[1]]);
  });
}

void matmul(const float *a, const float *b, float *c, int64_t batch, int64_t m, int64_t n,
            int64_t k, bool transposeA, bool transposeB, bool sharedB) {
  for (int64_t i = 0; i < batch; ++i) {
    const float *ai = a + i * m * k;
    const float *bi = sharedB ? b : b + i * k * n;
    cblas_sgemm(CblasRowMajor, transposeA ? CblasTrans : CblasNoTrans,
                transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, ai, transposeA ? m : k,
                bi, transposeB ? k : n, 0.0f, c + i * m * n, n);
  }
}

void reduce(ReduceKind kind, const float *in, const Shape &shape, const std::vector<int64_t> &dims,
            float *out) {
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
  std::vector<float> moved(numElements(shape));
  transpose(in, shape, perm, moved.data());
  int64_t rows = numElements(keptShape);
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = moved.data() + r * reducedCount;
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

/// Softmax (log-softmax) of the `width` elements of `x`, `stride` apart, into `y`.
static void softmaxLine(const float *x, float *y, int64_t width, int64_t stride,
                        bool logSoftmax) {
  float maxValue = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < width; ++j)
    maxValue = std::max(maxValue, x[j * stride]);
  double sum = 0.0;
  for (int64_t j = 0; j < width; ++j)
    sum += std::exp(static_cast<double>(x[j * stride]) - maxValue);
  double logSum = std::log(sum);
  for (int64_t j = 0; j < width; ++j) {
    double shifted = static_cast<double>(x[j * stride]) - maxValue;
    y[j * stride] = static_cast<float>(logSoftmax ? shifted - logSum : std::exp(shifted) / sum);
  }
}

void softmax(const float *in, float *out, const Shape &shape, int64_t axis, bool logSoftmax) {
  int64_t width = shape[axis];
  forEachLine(shape, axis, [&](int64_t offset, int64_t stride) {
    softmaxLine(in + offset, out + offset, width, stride, logSoftmax);
  });
}

void scaledSoftmax(const float *in, const float *scale, bool causal, float *out,
                   const Shape &shape) {
  int64_t width = shape.back(), rows = width ? numElements(shape) / width : 0;
  std::vector<float> row(width);
  for (int64_t r = 0; r < rows; ++r) {
    // Row r is query r % width of its block: keys after it are masked.
    for (int64_t j = 0; j < width; ++j) {
      float x = in[r * width + j];
      row[j] = causal && j > r % width ? -std::numeric_limits<float>::infinity()
               : scale                  ? x * *scale
                                        : x;
    }
    softmaxLine(row.data(), out + r * width, width, 1, /*logSoftmax=*/false);
  }
}

void layerNorm(const float *in, const float *scale, const float *bias, float *out, int64_t rows,
               int64_t width, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *x = in + r * width;
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

void transpose(const float *in, const Shape &shape, const std::vector<int64_t> &perm, float *out) {
  Shape inStrides = stridesOf(shape), outShape, permutedStrides;
  for (int64_t p : perm) {
    outShape.push_back(shape[p]);
    permutedStrides.push_back(inStrides[p]);
  }
  walk<1>(outShape, {permutedStrides}, {0},
          [&](int64_t i, const std::array<int64_t, 1> &at) { out[i] = in[at[0]]; });
}

void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out) {
  Shape strides = stridesOf(shape), outShape;
  int64_t start = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    outShape.push_back(limits[d] - starts[d]);
    start += starts[d] * strides[d];
  }
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  walk<1>(outShape, {strides}, {start}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    std::memcpy(dst + i * elementBytes, src + at[0] * elementBytes, elementBytes);
  });
}

void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out) {
  // Every input contributes a contiguous run of shape[axis] * inner per outer index.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shapes[0][d];
  for (size_t d = axis + 1; d < shapes[0].size(); ++d)
    inner *= shapes[0][d];
  char *dst = static_cast<char *>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t run = static_cast<size_t>(shapes[i][axis] * inner) * elementBytes;
      std::memcpy(dst, static_cast<const char *>(inputs[i]) + o * run, run);
      dst += run;
    }
}

/// Checks that index `value` at `position` lies in [0, limit).
static bool checkIndex(const char *what, int64_t value, int64_t position, int64_t limit,
                       const char *unit, std::string &error) {
  if (value >= 0 && value < limit)
    return true;
  error = std::string(what) + " " + std::to_string(value) + " at position " +
          std::to_string(position) + " is out of range for " + std::to_string(limit) + " " + unit;
  return false;
}

bool embedding(const float *table, int64_t rows, int64_t width, const int64_t *ids, int64_t count,
               float *out, std::string &error) {
  for (int64_t i = 0; i < count; ++i) {
    if (!checkIndex("index", ids[i], i, rows, "table rows", error))
      return false;
    std::copy(table + ids[i] * width, table + (ids[i] + 1) * width, out + i * width);
  }
  return true;
}

void causalMask(const float *in, float *out, int64_t blocks, int64_t s, float fill) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t at = (b * s + i) * s + j;
        out[at] = j > i ? fill : in[at];
      }
}

bool crossEntropy(const float *logits, const int64_t *targets, int64_t rows, int64_t classes,
                  float *loss, std::string &error) {
  double total = 0.0;
  std::vector<float> logProbs(classes);
  for (int64_t r = 0; r < rows; ++r) {
    if (!checkIndex("target", targets[r], r, classes, "classes", error))
      return false;
    softmax(logits + r * classes, logProbs.data(), {classes}, 0, /*logSoftmax=*/true);
    total -= logProbs[targets[r]];
  }
  *loss = static_cast<float>(total);
  return true;
}

void reluGrad(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = elementwise::reluGrad(x[i], dy[i]);
}

void geluGrad(const float *x, const float *dy, float *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = elementwise::geluGrad(x[i], dy[i]);
}

void softmaxGrad(const float *y, const float *dy, float *dx, const Shape &shape, int64_t axis) {
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

void scaledSoftmaxGrad(const float *y, const float *dy, const float *scale, bool causal,
                       float *dx, const Shape &shape) {
  softmaxGrad(y, dy, dx, shape, static_cast<int64_t>(shape.size()) - 1);
  int64_t width = shape.back(), rows = width ? numElements(shape) / width : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      float &g = dx[r * width + j];
      if (causal && j > r % width)
        g = 0.0f;
      if (scale)
        g *= *scale;
    }
}

void layerNormGrad(const float *x, const float *scale, const float *dy, float *dx, float *dscale,
                   float *dbias, int64_t rows, int64_t width, float eps) {
  std::vector<double> scaleSum(width, 0.0), biasSum(width, 0.0), xhat(width);
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * width, *dyr = dy + r * width;
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

bool embeddingGrad(const int64_t *ids, int64_t count, const float *dy, int64_t width, float *table,
                   int64_t rows, std::string &error) {
  std::fill(table, table + rows * width, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    if (!checkIndex("index", ids[i], i, rows, "table rows", error))
      return false;
    for (int64_t j = 0; j < width; ++j)
      table[ids[i] * width + j] += dy[i * width + j];
  }
  return true;
}

bool crossEntropyGrad(const float *logits, const int64_t *targets, float lossGrad, int64_t rows,
                      int64_t classes, float *dlogits, std::string &error) {
  for (int64_t r = 0; r < rows; ++r) {
    if (!checkIndex("target", targets[r], r, classes, "classes", error))
      return false;
    float *d = dlogits + r * classes;
    softmax(logits + r * classes, d, {classes}, 0, /*logSoftmax=*/false);
    d[targets[r]] -= 1.0f;
    for (int64_t c = 0; c < classes; ++c)
      d[c] = static_cast<float>(static_cast<double>(d[c]) * lossGrad);
  }
  return true;
}

void pad(const float *in, const Shape &shape, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, float *out) {
  Shape outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    outShape.push_back(low[d] + shape[d] + high[d]);
  Shape outStrides = stridesOf(outShape);
  int64_t start = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    start += low[d] * outStrides[d];
  std::fill(out, out + numElements(outShape), 0.0f);
  walk<1>(shape, {outStrides}, {start},
          [&](int64_t i, const std::array<int64_t, 1> &at) { out[at[0]] = in[i]; });
}

void broadcast(const float *in, const Shape &inShape, float *out, const Shape &outShape) {
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
  double correction1 = 1.0 - std::pow(beta1, step), correction2 = 1.0 - std::pow(beta2, step);
  for (int64_t i = 0; i < n; ++i)
    elementwise::adamw(param[i], grad[i], m[i], v[i], lr, beta1, beta2, eps, weightDecay,
                       correction1, correction2, newParam[i], newM[i], newV[i]);
}

} // namespace sbprt::cpu
