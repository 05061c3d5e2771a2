// Reference CPU kernels. Clear loops in a fixed order (bit-identical run to
// run); sums accumulate in double; GEMM goes to BLAS.
#include "runtime/cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace sbprt::cpu {

static Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

static int64_t product(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Visits every index of `shape` in row-major order, like an odometer, and
/// calls `visit(i, offsets)` with the linear output index and, for each of
/// the N strided views, the offset of that index (`start + sum(index * stride)`).
template <size_t N, typename Visit>
static void walk(const Shape &shape, const std::array<Shape, N> &strides,
                 std::array<int64_t, N> offsets, Visit visit) {
  int64_t rank = static_cast<int64_t>(shape.size()), n = product(shape);
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

static float applyUnary(UnaryKind kind, float x) {
  switch (kind) {
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Rsqrt:
    return 1.0f / std::sqrt(x);
  case UnaryKind::Relu:
    return x > 0.0f ? x : 0.0f;
  case UnaryKind::Gelu: {
    const double c = std::sqrt(2.0 / M_PI);
    double v = x;
    return static_cast<float>(0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v))));
  }
  }
  return x;
}

void unary(UnaryKind kind, const float *in, float *out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = applyUnary(kind, in[i]);
}

static float applyBinary(BinaryKind kind, float a, float b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  }
  return a;
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
    out[i] = applyBinary(kind, lhs[at[0]], rhs[at[1]]);
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
  std::vector<float> moved(product(shape));
  transpose(in, shape, perm, moved.data());
  int64_t rows = product(keptShape);
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

void softmax(const float *in, float *out, const Shape &shape, int64_t axis, bool logSoftmax) {
  int64_t width = shape[axis];
  int64_t inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
    inner *= shape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float *x = in + o * width * inner + i;
      float *y = out + o * width * inner + i;
      float maxValue = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < width; ++j)
        maxValue = std::max(maxValue, x[j * inner]);
      double sum = 0.0;
      for (int64_t j = 0; j < width; ++j)
        sum += std::exp(static_cast<double>(x[j * inner]) - maxValue);
      double logSum = std::log(sum);
      for (int64_t j = 0; j < width; ++j) {
        double shifted = static_cast<double>(x[j * inner]) - maxValue;
        y[j * inner] = static_cast<float>(logSoftmax ? shifted - logSum : std::exp(shifted) / sum);
      }
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

void slice(const float *in, const Shape &shape, const std::vector<int64_t> &starts,
           const std::vector<int64_t> &limits, float *out) {
  Shape strides = stridesOf(shape), outShape;
  int64_t src = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    outShape.push_back(limits[d] - starts[d]);
    src += starts[d] * strides[d];
  }
  walk<1>(outShape, {strides}, {src},
          [&](int64_t i, const std::array<int64_t, 1> &at) { out[i] = in[at[0]]; });
}

void concat(const std::vector<const float *> &inputs, const std::vector<Shape> &shapes,
            int64_t axis, float *out) {
  // Every input contributes a contiguous run of shape[axis] * inner per outer index.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shapes[0][d];
  for (size_t d = axis + 1; d < shapes[0].size(); ++d)
    inner *= shapes[0][d];
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inputs.size(); ++i) {
      int64_t run = shapes[i][axis] * inner;
      out = std::copy(inputs[i] + o * run, inputs[i] + (o + 1) * run, out);
    }
}

bool embedding(const float *table, int64_t rows, int64_t width, const int64_t *ids, int64_t count,
               float *out, std::string &error) {
  for (int64_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= rows) {
      error = "index " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
              " is out of range for a table of " + std::to_string(rows) + " rows";
      return false;
    }
    std::copy(table + ids[i] * width, table + (ids[i] + 1) * width, out + i * width);
  }
  return true;
}

void causalMask(const float *in, float *out, int64_t blocks, int64_t s) {
  const float negInf = -std::numeric_limits<float>::infinity();
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t at = (b * s + i) * s + j;
        out[at] = j > i ? negInf : in[at];
      }
}

bool crossEntropy(const float *logits, const int64_t *targets, int64_t rows, int64_t classes,
                  float *loss, std::string &error) {
  double total = 0.0;
  std::vector<float> logProbs(classes);
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] < 0 || targets[r] >= classes) {
      error = "target " + std::to_string(targets[r]) + " at position " + std::to_string(r) +
              " is out of range for " + std::to_string(classes) + " classes";
      return false;
    }
    softmax(logits + r * classes, logProbs.data(), {classes}, 0, /*logSoftmax=*/true);
    total -= logProbs[targets[r]];
  }
  *loss = static_cast<float>(total / rows);
  return true;
}

} // namespace sbprt::cpu
