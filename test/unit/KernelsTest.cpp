// Tests for the reference CPU kernels against naive double-precision versions.
#include "runtime/cpu/Kernels.h"
#include "runtime/Elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

using namespace sbprt::cpu;
using sbprt::IndexPlace;

namespace {

using Values = std::vector<float>;
using Expected = std::vector<double>;

int64_t count(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Uniform values in [lo, hi], none exactly zero.
Values randomData(int64_t n, unsigned seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Values v(n);
  std::generate(v.begin(), v.end(), [&] {
    float x = dist(rng);
    return x == 0.0f ? hi : x;
  });
  return v;
}

/// Calls `visit(index)` for every multi-index of `shape`, row-major.
void forEachIndex(const Shape &shape, const std::function<void(const Shape &)> &visit) {
  Shape index(shape.size(), 0);
  for (int64_t i = 0, n = count(shape); i < n; ++i) {
    visit(index);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// Row-major offset of `index` within `shape`.
int64_t offsetOf(const Shape &index, const Shape &shape) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + index[d];
  return offset;
}

/// The naive result: `value(index)` at every index of `shape`, row-major.
Expected tabulate(const Shape &shape, const std::function<double(const Shape &)> &value) {
  Expected result;
  forEachIndex(shape, [&](const Shape &index) { result.push_back(value(index)); });
  return result;
}

/// Expects a failed call whose error (set by then) is `want`.
void expectOutOfRange(bool ok, const std::string &error, const std::string &want) {
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, want);
}

/// Expects |got - want| <= rtol * scale element-wise, where scale is |want|
/// unless given; rtol 0 demands exact equality.
void expectClose(const Values &got, const Expected &want, double rtol, double scale = 0.0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::abs(got[i] - want[i]), rtol * (scale > 0.0 ? scale : std::abs(want[i])))
        << "at " << i << ": got " << got[i] << ", want " << want[i];
}

constexpr double kRtol = 1e-5;

TEST(KernelsTest, Unary) {
  const double c = std::sqrt(2.0 / M_PI);
  std::vector<std::pair<UnaryKind, std::function<double(double)>>> cases = {
      {UnaryKind::Neg, [](double x) { return -x; }},
      {UnaryKind::Exp, [](double x) { return std::exp(x); }},
      {UnaryKind::Log, [](double x) { return std::log(x); }},
      {UnaryKind::Tanh, [](double x) { return std::tanh(x); }},
      {UnaryKind::Sqrt, [](double x) { return std::sqrt(x); }},
      {UnaryKind::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }},
      {UnaryKind::Relu, [](double x) { return x > 0.0 ? x : 0.0; }},
      {UnaryKind::Gelu,
       [c](double x) { return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x))); }}};
  for (auto &[kind, naive] : cases) {
    SCOPED_TRACE(static_cast<int>(kind));
    bool positive = kind == UnaryKind::Log || kind == UnaryKind::Sqrt || kind == UnaryKind::Rsqrt;
    Values in = positive ? randomData(37, 1, 0.05f, 2.0f) : randomData(37, 1), out(in.size());
    unary(kind, in.data(), out.data(), static_cast<int64_t>(in.size()));
    expectClose(out, tabulate({37}, [&](const Shape &i) { return naive(in[i[0]]); }), kRtol);
  }
}

/// GELU and its gradient in f32 against the tanh form in double, over the
/// ordinary range and where tanh saturates or x^3 and x^2 overflow: finite
/// limits there (x or 0, dy or 0), never NaN.
TEST(KernelsTest, GeluAndGradientInF32) {
  const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
  auto gelu = [&](double x) { return 0.5 * x * (1.0 + std::tanh(c * (x + k * x * x * x))); };
  auto grad = [&](double x) {
    double t = std::tanh(c * (x + k * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * k * x * x);
  };
  Values x = randomData(257, 1, -6.0f, 6.0f);
  for (float far : {9.5f, 30.0f, 1e7f, 1e14f, 1e20f, 3e38f})
    x.insert(x.end(), {far, -far});
  int64_t n = static_cast<int64_t>(x.size());
  Values dy = randomData(n, 2), y(n), dx(n);
  unary(UnaryKind::Gelu, x.data(), y.data(), n);
  geluGrad(x.data(), dy.data(), dx.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(x[i]);
    double wantY = std::fabs(x[i]) > 1e13f ? (x[i] > 0 ? x[i] : 0.0) : gelu(x[i]);
    double wantDx = std::fabs(x[i]) > 1e13f ? (x[i] > 0 ? dy[i] : 0.0) : dy[i] * grad(x[i]);
    EXPECT_NEAR(y[i], wantY, 1e-6 * std::max(1.0, std::fabs(wantY)));
    EXPECT_NEAR(dx[i], wantDx, 1e-6 * std::max(1.0, std::fabs(double(dy[i]))));
  }
}

/// e^x in f32 (graph.exp, and inside GELU, softmax and cross-entropy on the
/// CPU) within 2 ulp of the exact value over its whole range, subnormal
/// results included; 0 and infinity past its ends, NaN kept; the
/// vectorized loop and a lone call give the same bits.
TEST(KernelsTest, ExpIsWithinTwoUlps) {
  Values x;
  for (double v = -105.0; v <= 89.0; v += 0.0037)
    x.push_back(static_cast<float>(v));
  for (float special : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.33f, -103.9f})
    x.push_back(special);
  int64_t n = static_cast<int64_t>(x.size());
  Values y(n);
  unary(UnaryKind::Exp, x.data(), y.data(), n);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(testing::Message() << "e^" << x[i]);
    double want = std::exp(static_cast<double>(x[i]));
    ASSERT_EQ(sbprt::elementwise::expF32(x[i]), y[i]);
    if (want > std::numeric_limits<float>::max() * (1.0 + 1e-7)) {
      EXPECT_EQ(y[i], std::numeric_limits<float>::infinity());
      continue;
    }
    float rounded = static_cast<float>(want);
    double ulp = std::max<double>(std::nextafter(rounded, INFINITY) - rounded, tiny);
    EXPECT_LE(std::fabs(y[i] - want), 2.0 * ulp) << "got " << y[i] << ", want " << want;
  }
  Values special = {-INFINITY, INFINITY, NAN, -1000.0f, 1000.0f}, out(special.size());
  unary(UnaryKind::Exp, special.data(), out.data(), static_cast<int64_t>(special.size()));
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], INFINITY);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 0.0f);
  EXPECT_EQ(out[4], INFINITY);
}

/// AdamW as PyTorch defines it (decoupled weight decay, bias-corrected
/// moments), computed in double here, over several steps.
TEST(KernelsTest, AdamwIsPyTorchsUpdate) {
  const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, decay = 0.01;
  const int64_t n = 203;
  Values param = randomData(n, 30), m(n, 0.0f), v(n, 0.0f);
  std::vector<double> p(param.begin(), param.end()), m2(n, 0.0), v2(n, 0.0);
  for (int step = 1; step <= 5; ++step) {
    Values grad = randomData(n, 40 + step), newParam(n), newM(n), newV(n);
    adamwUpdate(param.data(), grad.data(), m.data(), v.data(), n, step, lr, beta1, beta2, eps,
                decay, newParam.data(), newM.data(), newV.data());
    for (int64_t i = 0; i < n; ++i) {
      m2[i] = beta1 * m2[i] + (1 - beta1) * grad[i];
      v2[i] = beta2 * v2[i] + (1 - beta2) * double(grad[i]) * grad[i];
      double mHat = m2[i] / (1 - std::pow(beta1, step)), vHat = v2[i] / (1 - std::pow(beta2, step));
      p[i] = p[i] * (1 - lr * decay) - lr * mHat / (std::sqrt(vHat) + eps);
    }
    SCOPED_TRACE(step);
    // The moments against the gradients' scale (|g| <= 2): m is often a
    // small difference of terms that size.
    expectClose(newM, m2, 1e-6, 2.0);
    expectClose(newV, v2, 1e-6, 4.0);
    // Each step moves a parameter by about lr: the update's own error
    // against lr, the parameter's rounding against its size.
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(newParam[i], p[i], 1e-3 * lr + 1e-6 * std::fabs(p[i])) << "at " << i;
    param = newParam, m = newM, v = newV;
  }
}

/// Offset of the element of a `shape` tensor broadcast to `outIndex`.
int64_t broadcastOffset(const Shape &outIndex, const Shape &shape) {
  Shape index(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    index[d] = shape[d] == 1 ? 0 : outIndex[outIndex.size() - shape.size() + d];
  return offsetOf(index, shape);
}

TEST(KernelsTest, BinaryBroadcasting) {
  // {lhs, rhs, out} shapes.
  std::vector<std::array<Shape, 3>> shapes = {
      {{{2, 3, 4}, {4}, {2, 3, 4}}}, {{{2, 1, 4}, {3, 1}, {2, 3, 4}}}, {{{1}, {2, 3}, {2, 3}}},
      {{{2, 3}, {2, 3}, {2, 3}}},    {{{}, {2, 3}, {2, 3}}},           {{{2, 3}, {}, {2, 3}}}};
  std::vector<std::pair<BinaryKind, std::function<double(double, double)>>> kinds = {
      {BinaryKind::Add, [](double a, double b) { return a + b; }},
      {BinaryKind::Sub, [](double a, double b) { return a - b; }},
      {BinaryKind::Mul, [](double a, double b) { return a * b; }},
      {BinaryKind::Div, [](double a, double b) { return a / b; }}};
  for (auto &[kind, naive] : kinds)
    for (auto &[lhsShape, rhsShape, outShape] : shapes) {
      SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(kind) << ", lhs rank "
                                      << lhsShape.size() << ", rhs rank " << rhsShape.size());
      Values lhs = randomData(count(lhsShape), 2);
      Values rhs = randomData(count(rhsShape), 3);
      if (kind == BinaryKind::Div) // Keep denominators at least 0.5 away from zero.
        for (float &x : rhs)
          x += x < 0.0f ? -0.5f : 0.5f;
      Values out(count(outShape));
      binary(kind, lhs.data(), lhsShape, rhs.data(), rhsShape, out.data(), outShape);
      Expected want = tabulate(outShape, [&](const Shape &index) {
        return naive(lhs[broadcastOffset(index, lhsShape)], rhs[broadcastOffset(index, rhsShape)]);
      });
      expectClose(out, want, kRtol);
    }
}

void checkMatmul(int64_t batch, int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                 bool sharedB) {
  SCOPED_TRACE(testing::Message() << "batch " << batch << " transA " << transA << " transB "
                                  << transB << " sharedB " << sharedB);
  Values a = randomData(batch * m * k, 4), b = randomData((sharedB ? 1 : batch) * k * n, 5);
  Values c(batch * m * n);
  matmul(a.data(), b.data(), c.data(), batch, m, n, k, transA, transB, sharedB);
  Expected want = tabulate({batch, m, n}, [&](const Shape &index) {
    int64_t bi = index[0], i = index[1], j = index[2];
    double sum = 0.0;
    for (int64_t p = 0; p < k; ++p)
      sum += double(a[bi * m * k + (transA ? p * m + i : i * k + p)]) *
             b[(sharedB ? 0 : bi * k * n) + (transB ? j * k + p : p * n + j)];
    return sum;
  });
  double maxMagnitude = 0.0;
  for (double w : want)
    maxMagnitude = std::max(maxMagnitude, std::abs(w));
  expectClose(c, want, 1e-4, maxMagnitude);
}

TEST(KernelsTest, Matmul) {
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (bool sharedB : {false, true}) {
        checkMatmul(3, 4, 5, 6, transA, transB, sharedB);
        checkMatmul(1, 7, 2, 3, transA, transB, sharedB);
      }
  // Nothing to contract: zeros, not BLAS's error on a leading dimension of 0.
  Values c(6, 1.0f);
  matmul(c.data(), c.data(), c.data(), 1, 2, 3, 0, false, false, true);
  for (float v : c)
    EXPECT_EQ(v, 0.0f);
}

/// exec.causal_matmul's blocks: what the causal kind needs equals the whole
/// product, and what it does not need is not computed.
TEST(KernelsTest, CausalMatmulComputesOnlyToTheDiagonal) {
  const int64_t batch = 2, s = 7, d = 5;
  const float unwritten = std::numeric_limits<float>::quiet_NaN();
  for (int64_t blockRows : {1, 3, 6, 7}) {
    // The scores q k^T (or dO v^T): only the diagonal and below.
    Values q = randomData(batch * s * d, 21), key = randomData(batch * s * d, 22);
    Values whole(batch * s * s), blocked(batch * s * s, unwritten);
    matmul(q.data(), key.data(), whole.data(), batch, s, s, d, false, true, false);
    matmul(q.data(), key.data(), blocked.data(), batch, s, s, d, false, true, false,
           sbprt::Causal::LowerResult, blockRows);
    for (int64_t i = 0; i < batch * s * s; ++i) {
      int64_t row = i / s % s, col = i % s;
      if (col <= row) {
        ASSERT_NEAR(blocked[i], whole[i], 1e-5) << "element " << i << " blockRows " << blockRows;
      } else if (col >= (row / blockRows + 1) * blockRows) { // past the row's block
        ASSERT_TRUE(std::isnan(blocked[i])) << "element " << i << " blockRows " << blockRows;
      }
    }
    // By probabilities 0 above the diagonal (p v, p^T dO), with b either
    // way round: every element, as the whole product.
    Values p = randomData(batch * s * s, 23), v = randomData(batch * s * d, 24);
    for (int64_t i = 0; i < batch * s * s; ++i)
      if (i % s > i / s % s)
        p[i] = 0.0f;
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        // What no block reads is NaN here: past the row's block (before
        // it, transposed), so a product that read it would show.
        Values unread = p;
        for (int64_t i = 0; i < batch * s * s; ++i) {
          int64_t row = i / s % s, col = i % s;
          int64_t query = transA ? col : row, key = transA ? row : col;
          int64_t first = query / blockRows * blockRows, end = first + blockRows;
          if (blockRows < s && (transA ? key < first : key >= end))
            unread[i] = unwritten;
        }
        Values full(batch * s * d), part(batch * s * d, unwritten);
        matmul(p.data(), v.data(), full.data(), batch, s, d, s, transA, transB, false);
        matmul(unread.data(), v.data(), part.data(), batch, s, d, s, transA, transB, false,
               sbprt::Causal::LowerLhs, blockRows);
        for (int64_t i = 0; i < batch * s * d; ++i)
          ASSERT_NEAR(part[i], full[i], 1e-5) << "element " << i << " blockRows " << blockRows
                                              << " transA " << transA << " transB " << transB;
      }
  }
  // bf16 rounds each computed element once, as the whole product does.
  std::vector<sbprt::bf16> p(s * s), v(s * d), full(s * d), part(s * d, sbprt::bf16(unwritten));
  Values pv = randomData(s * s, 25), vv = randomData(s * d, 26);
  for (int64_t i = 0; i < s * s; ++i)
    p[i] = i % s > i / s ? 0.0f : pv[i];
  std::copy(vv.begin(), vv.end(), v.begin());
  matmul(p.data(), v.data(), full.data(), 1, s, d, s, false, false, false);
  matmul(p.data(), v.data(), part.data(), 1, s, d, s, false, false, false, sbprt::Causal::LowerLhs,
         2);
  for (int64_t i = 0; i < s * d; ++i)
    ASSERT_NEAR(float(part[i]), float(full[i]), 1e-2) << "element " << i;
  // bf16 scores by a shared key matrix: the computed part as the whole's.
  std::vector<sbprt::bf16> qb(batch * s * d), kb(s * d), sw(batch * s * s),
      sb(batch * s * s, sbprt::bf16(unwritten));
  Values qv = randomData(batch * s * d, 29), kv = randomData(s * d, 30);
  std::copy(qv.begin(), qv.end(), qb.begin());
  std::copy(kv.begin(), kv.end(), kb.begin());
  matmul(qb.data(), kb.data(), sw.data(), batch, s, s, d, false, true, true);
  matmul(qb.data(), kb.data(), sb.data(), batch, s, s, d, false, true, true,
         sbprt::Causal::LowerResult, 3);
  for (int64_t i = 0; i < batch * s * s; ++i)
    if (i % s <= i / s % s) {
      // Within one bf16 step: the f32 sums may differ in their last bits.
      ASSERT_LE(std::abs(float(sb[i]) - float(sw[i])), std::abs(float(sw[i])) / 128 + 1e-6f)
          << "element " << i;
    }
  // Not the square the kind needs: the whole product.
  Values a = randomData(3 * 4, 27), b = randomData(4 * 5, 28), c(3 * 5), want(3 * 5);
  matmul(a.data(), b.data(), want.data(), 1, 3, 5, 4, false, false, false);
  matmul(a.data(), b.data(), c.data(), 1, 3, 5, 4, false, false, false, sbprt::Causal::LowerResult,
         1);
  for (int64_t i = 0; i < 3 * 5; ++i)
    ASSERT_EQ(c[i], want[i]) << "element " << i;
}

/// exec.linear without a residual.
constexpr const float *kNoResidual = nullptr;

/// exec.linear is graph.matmul, graph.add of the bias and graph.gelu one
/// after the other, bit for bit, with the weight either way round.
TEST(KernelsTest, LinearIsMatmulAddGelu) {
  const int64_t rows = 5, n = 7, k = 9;
  Values x = randomData(rows * k, 11), w = randomData(k * n, 12), bias = randomData(n, 13);
  for (bool transposeW : {false, true})
    for (bool gelu : {false, true}) {
      Values product(rows * n), want(rows * n), got(rows * n);
      matmul(x.data(), w.data(), product.data(), 1, rows, n, k, false, transposeW, true);
      binary(BinaryKind::Add, product.data(), {rows, n}, bias.data(), {n}, want.data(),
             {rows, n});
      if (gelu)
        unary(UnaryKind::Gelu, want.data(), want.data(), rows * n);
      linear(x.data(), w.data(), bias.data(), kNoResidual, got.data(), rows, n, k, transposeW, gelu);
      for (int64_t i = 0; i < rows * n; ++i)
        ASSERT_EQ(got[i], want[i]) << "element " << i << " transposeW " << transposeW
                                   << " gelu " << gelu;
    }
  // With a residual: graph.add of it to the sum, bit for bit.
  Values residual = randomData(rows * n, 14);
  for (bool transposeW : {false, true}) {
    Values product(rows * n), want(rows * n), got(rows * n);
    matmul(x.data(), w.data(), product.data(), 1, rows, n, k, false, transposeW, true);
    binary(BinaryKind::Add, product.data(), {rows, n}, bias.data(), {n}, want.data(), {rows, n});
    binary(BinaryKind::Add, residual.data(), {rows, n}, want.data(), {rows, n}, want.data(),
           {rows, n});
    linear(x.data(), w.data(), bias.data(), residual.data(), got.data(), rows, n, k, transposeW,
           false);
    for (int64_t i = 0; i < rows * n; ++i)
      ASSERT_EQ(got[i], want[i]) << "element " << i << " transposeW " << transposeW;
  }
  // Nothing to contract: the bias alone.
  Values got(rows * n);
  linear(x.data(), w.data(), bias.data(), kNoResidual, got.data(), rows, n, 0, false, false);
  for (int64_t i = 0; i < rows * n; ++i)
    ASSERT_EQ(got[i], bias[i % n]);
}

// The linear layers' backward ops: the bits of the ops they replace in f32.
TEST(KernelsTest, LinearGradientsAreTheirOps) {
  const int64_t rows = 6, n = 7, k = 5;
  Values g = randomData(rows * k, 21), w = randomData(k * n, 22), pre = randomData(rows * n, 23);
  for (bool transposeW : {false, true}) {
    Values product(rows * n), want(rows * n), wantBias(n), got(rows * n), gotBias(n);
    matmul(g.data(), w.data(), product.data(), 1, rows, n, k, false, transposeW, true);
    geluGrad(pre.data(), product.data(), want.data(), rows * n);
    reduce(ReduceKind::Sum, want.data(), {rows, n}, {0}, wantBias.data());
    matmulGeluGrad(g.data(), w.data(), pre.data(), got.data(), gotBias.data(), rows, n, k,
                   transposeW);
    for (int64_t i = 0; i < rows * n; ++i)
      ASSERT_EQ(got[i], want[i]) << "element " << i << " transposeW " << transposeW;
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(gotBias[j], wantBias[j]) << "bias gradient " << j;
    // Without the bias gradient, the same result.
    Values alone(rows * n);
    matmulGeluGrad(g.data(), w.data(), pre.data(), alone.data(), static_cast<float *>(nullptr),
                   rows, n, k, transposeW);
    ASSERT_EQ(alone, got);
  }
  // The weight's gradient x^T dy and the bias's, the sums of dy's rows.
  Values x = randomData(rows * k, 24), dy = randomData(rows * n, 25);
  Values want(k * n), wantBias(n), got(k * n), gotBias(n);
  matmul(x.data(), dy.data(), want.data(), 1, k, n, rows, true, false, true);
  reduce(ReduceKind::Sum, dy.data(), {rows, n}, {0}, wantBias.data());
  matmulBiasGrad(x.data(), dy.data(), got.data(), gotBias.data(), rows, k, n);
  ASSERT_EQ(got, want);
  ASSERT_EQ(gotBias, wantBias);
  // The forward keeps the sum before the GELU: the bias's add, bit for bit.
  Values b = randomData(n, 26), sum(rows * n), y(rows * n), wantSum(rows * n), product(rows * n);
  linear(x.data(), w.data(), b.data(), kNoResidual, y.data(), rows, n, k, false, true, sum.data());
  matmul(x.data(), w.data(), product.data(), 1, rows, n, k, false, false, true);
  binary(BinaryKind::Add, product.data(), {rows, n}, b.data(), {n}, wantSum.data(), {rows, n});
  ASSERT_EQ(sum, wantSum);
  unary(UnaryKind::Gelu, wantSum.data(), wantSum.data(), rows * n);
  ASSERT_EQ(y, wantSum);
}

// exec.attention's log-sum-exp, and exec.attention_grad against the ops
// it replaces (the probabilities' products, the softmax's gradient with
// the mask and the scale): the same values up to f32 rounding, as
// attention_grad recomputes the probabilities from the log-sum-exp and
// sums dO * O where the ops sum P * dP.
TEST(KernelsTest, AttentionGradientsAreTheirOps) {
  const int64_t batch = 2, s = 5, d = 4;
  for (bool causal : {false, true})
    for (int64_t t : causal ? std::vector<int64_t>{5} : std::vector<int64_t>{5, 7}) {
      SCOPED_TRACE(testing::Message() << "causal " << causal << ", " << t << " keys");
      Values q = randomData(batch * s * d, 31), k = randomData(batch * t * d, 32),
             v = randomData(batch * t * d, 33), dout = randomData(batch * s * d, 34);
      float scale = -0.6f;
      Values out(batch * s * d), lse(batch * s);
      attention(q.data(), k.data(), v.data(), &scale, causal, out.data(), batch, s, t, d, d,
                lse.data());
      // The ops: scores, probabilities, the output, and the backward.
      Values scores(batch * s * t), probs(batch * s * t), want(batch * s * d);
      matmul(q.data(), k.data(), scores.data(), batch, s, t, d, false, true, false);
      for (int64_t r = 0; r < batch * s; ++r) {
        double sum = 0.0;
        for (int64_t j = 0; j < (causal ? r % s + 1 : t); ++j)
          sum += std::exp(static_cast<double>(scores[r * t + j] * scale));
        EXPECT_NEAR(lse[r], std::log(sum), 1e-5 * std::max(1.0, std::abs(std::log(sum))))
            << "row " << r;
      }
      scaledSoftmax(scores.data(), &scale, causal, probs.data(), {batch, s, t});
      matmul(probs.data(), v.data(), want.data(), batch, s, d, t, false, false, false);
      ASSERT_EQ(out, want);
      Values dp(batch * s * t), ds(batch * s * t), wantDq(batch * s * d), wantDk(batch * t * d),
          wantDv(batch * t * d);
      matmul(probs.data(), dout.data(), wantDv.data(), batch, t, d, s, true, false, false);
      matmul(dout.data(), v.data(), dp.data(), batch, s, t, d, false, true, false);
      scaledSoftmaxGrad(probs.data(), dp.data(), &scale, causal, ds.data(), {batch, s, t});
      matmul(ds.data(), k.data(), wantDq.data(), batch, s, d, t, false, false, false);
      matmul(ds.data(), q.data(), wantDk.data(), batch, t, d, s, true, false, false);
      Values dq(batch * s * d), dk(batch * t * d), dv(batch * t * d);
      attentionGrad(q.data(), k.data(), v.data(), out.data(), lse.data(), dout.data(), &scale,
                    causal, dq.data(), dk.data(), dv.data(), batch, s, t, d, d);
      for (auto [got, expected, name] : {std::make_tuple(&dq, &wantDq, "dq"),
                                         std::make_tuple(&dk, &wantDk, "dk"),
                                         std::make_tuple(&dv, &wantDv, "dv")}) {
        float largest = 0.0f;
        for (float x : *expected)
          largest = std::max(largest, std::abs(x));
        ASSERT_GT(largest, 0.1f) << name;
        for (size_t i = 0; i < got->size(); ++i)
          ASSERT_NEAR((*got)[i], (*expected)[i], 2e-5f * largest) << name << " element " << i;
      }
    }
}

TEST(KernelsTest, Reduce) {
  Shape shape = {3, 4, 5};
  Values in = randomData(count(shape), 6);
  std::vector<std::vector<int64_t>> dimSets = {{0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max})
    for (const auto &dims : dimSets) {
      SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(kind) << ", " << dims.size()
                                      << " dims from " << dims[0]);
      // Kept dimensions stay as size 1, which leaves the row-major layout unchanged.
      Shape kept = shape;
      for (int64_t d : dims)
        kept[d] = 1;
      Values out(count(kept));
      reduce(kind, in.data(), shape, dims, out.data());
      Expected want(out.size(), kind == ReduceKind::Max ? -INFINITY : 0.0);
      forEachIndex(shape, [&](const Shape &index) {
        double x = in[offsetOf(index, shape)];
        Shape keptIndex = index;
        for (int64_t d : dims)
          keptIndex[d] = 0;
        double &acc = want[offsetOf(keptIndex, kept)];
        acc = kind == ReduceKind::Max ? std::max(acc, x) : acc + x;
      });
      if (kind == ReduceKind::Mean)
        for (double &w : want)
          w /= double(count(shape) / count(kept));
      expectClose(out, want, kRtol);
    }
}

TEST(KernelsTest, Softmax) {
  Shape shape = {2, 3, 4};
  Values in = randomData(count(shape), 7);
  for (int64_t axis : {1, 2})
    for (bool logSoftmax : {false, true}) {
      SCOPED_TRACE(testing::Message() << "axis " << axis << " log " << logSoftmax);
      Values out(in.size());
      softmax(in.data(), out.data(), shape, axis, logSoftmax);
      // Walk each row along the axis: naive values, and the row must sum to 1.
      Shape rowsShape = shape;
      rowsShape[axis] = 1;
      Expected want(out.size());
      forEachIndex(rowsShape, [&](const Shape &row) {
        Shape at = row;
        double sum = 0.0, total = 0.0;
        for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis])
          sum += std::exp(double(in[offsetOf(at, shape)]));
        for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis]) {
          int64_t i = offsetOf(at, shape);
          want[i] = logSoftmax ? in[i] - std::log(sum) : std::exp(double(in[i])) / sum;
          total += logSoftmax ? std::exp(double(out[i])) : out[i];
        }
        EXPECT_NEAR(total, 1.0, kRtol);
      });
      expectClose(out, want, kRtol);
    }
}

/// Probabilities far below the row's maximum keep f32 accuracy: x - max
/// rounds in f32, and the exponential takes back what the rounding lost
/// (without it, 60 ulp at 80 below the maximum).
TEST(KernelsTest, SoftmaxIsAccurateFarBelowTheMaximum) {
  const int64_t width = 50;
  Values row = randomData(width, 14, -80.0f, 0.0f);
  row[7] = 3.3719f; // the maximum, not a round number
  Values out(width);
  softmax(row.data(), out.data(), {1, width}, 1, /*logSoftmax=*/false);
  double sum = 0.0;
  for (float x : row)
    sum += std::exp(double(x) - 3.3719);
  for (int64_t j = 0; j < width; ++j) {
    double want = std::exp(double(row[j]) - 3.3719) / sum;
    EXPECT_NEAR(out[j], want, 4e-7 * want) << "at " << j << " (x = " << row[j] << ")";
  }
}

TEST(KernelsTest, LayerNorm) {
  const int64_t rows = 3, width = 8;
  const float eps = 1e-5f;
  Values in = randomData(rows * width, 8), scale = randomData(width, 9),
         bias = randomData(width, 10), out(in.size());
  layerNorm(in.data(), scale.data(), bias.data(), out.data(), rows, width, eps);
  Expected want = tabulate({rows, width}, [&](const Shape &at) {
    const float *x = in.data() + at[0] * width;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < width; ++i)
      mean += x[i] / double(width);
    for (int64_t i = 0; i < width; ++i)
      var += (x[i] - mean) * (x[i] - mean) / double(width);
    return (x[at[1]] - mean) / std::sqrt(var + eps) * scale[at[1]] + bias[at[1]];
  });
  expectClose(out, want, kRtol);
}

/// Permutations that move every dimension, and ones that keep trailing
/// dimensions in place (copied as runs).
TEST(KernelsTest, Transpose) {
  Shape shape = {2, 3, 4, 5};
  Values in = randomData(count(shape), 11);
  for (std::vector<int64_t> perm : std::vector<std::vector<int64_t>>{
           {2, 0, 3, 1}, {0, 2, 1, 3}, {1, 0, 2, 3}, {0, 1, 3, 2}, {0, 1, 2, 3}, {3, 2, 1, 0}}) {
    SCOPED_TRACE(testing::Message() << perm[0] << perm[1] << perm[2] << perm[3]);
    Shape outShape;
    for (int64_t p : perm)
      outShape.push_back(shape[p]);
    Values out(in.size());
    transpose(in.data(), shape, perm, out.data());
    Expected want = tabulate(outShape, [&](const Shape &index) {
      Shape inIndex(shape.size());
      for (size_t d = 0; d < perm.size(); ++d)
        inIndex[perm[d]] = index[d];
      return in[offsetOf(inIndex, shape)];
    });
    expectClose(out, want, 0.0);
  }
}

/// Slices of every kind: a dimension cut or taken whole, at each place
/// (the trailing whole ones copied as one run with the one before), and
/// empty ones.
TEST(KernelsTest, Slice) {
  Shape shape = {4, 5, 6};
  Values in = randomData(count(shape), 12);
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 2, 3}, {3, 5, 5}}, {{1, 0, 0}, {3, 5, 6}}, {{0, 2, 0}, {4, 4, 6}},
      {{0, 0, 0}, {4, 5, 6}}, {{2, 1, 5}, {3, 2, 6}}, {{0, 3, 0}, {4, 3, 6}},
      {{1, 0, 2}, {1, 5, 6}}};
  for (auto &[starts, limits] : cases) {
    SCOPED_TRACE(testing::Message() << starts[0] << "," << starts[1] << "," << starts[2]);
    Shape outShape;
    for (size_t d = 0; d < shape.size(); ++d)
      outShape.push_back(limits[d] - starts[d]);
    Values out(count(outShape));
    slice(in.data(), sizeof(float), shape, starts, limits, out.data());
    Expected want = tabulate(outShape, [&](const Shape &index) {
      Shape inIndex = index;
      for (size_t d = 0; d < shape.size(); ++d)
        inIndex[d] += starts[d];
      return in[offsetOf(inIndex, shape)];
    });
    expectClose(out, want, 0.0);
  }
}

/// Zeros around the input, in any dimensions: the gradient of a slice.
TEST(KernelsTest, Pad) {
  Shape shape = {3, 4, 5};
  Values in = randomData(count(shape), 13);
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{0, 0, 0}, {0, 0, 0}}, {{1, 0, 0}, {2, 0, 0}}, {{0, 2, 0}, {0, 1, 0}},
      {{0, 0, 3}, {0, 0, 1}}, {{1, 2, 3}, {3, 2, 1}}, {{0, 1, 0}, {0, 0, 0}}};
  for (auto &[low, high] : cases) {
    SCOPED_TRACE(testing::Message()
                 << low[0] << low[1] << low[2] << "/" << high[0] << high[1] << high[2]);
    Shape outShape;
    for (size_t d = 0; d < shape.size(); ++d)
      outShape.push_back(low[d] + shape[d] + high[d]);
    Values out(count(outShape), 7.0f); // overwritten everywhere
    pad(in.data(), shape, low, high, out.data());
    Expected want = tabulate(outShape, [&](const Shape &index) {
      Shape inIndex = index;
      for (size_t d = 0; d < shape.size(); ++d) {
        inIndex[d] -= low[d];
        if (inIndex[d] < 0 || inIndex[d] >= shape[d])
          return 0.0;
      }
      return double(in[offsetOf(inIndex, shape)]);
    });
    expectClose(out, want, 0.0);
  }
}

void checkConcat(const std::vector<Shape> &shapes, int64_t axis) {
  SCOPED_TRACE(testing::Message() << "axis " << axis);
  std::vector<Values> data;
  std::vector<const void *> inputs;
  Shape outShape = shapes[0];
  outShape[axis] = 0;
  data.reserve(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(data.emplace_back(randomData(count(shapes[i]), 13 + i)).data());
    outShape[axis] += shapes[i][axis];
  }
  Values out(count(outShape));
  concat(inputs, sizeof(float), shapes, axis, out.data());
  Expected want = tabulate(outShape, [&](const Shape &index) {
    Shape inIndex = index;
    size_t which = 0;
    while (inIndex[axis] >= shapes[which][axis])
      inIndex[axis] -= shapes[which++][axis];
    return data[which][offsetOf(inIndex, shapes[which])];
  });
  expectClose(out, want, 0.0);
}

TEST(KernelsTest, Concat) {
  checkConcat({{2, 3, 4}, {1, 3, 4}, {3, 3, 4}}, 0);
  checkConcat({{2, 3, 4}, {2, 1, 4}, {2, 2, 4}}, 1);
  checkConcat({{2, 3, 4}, {2, 3, 2}, {2, 3, 1}}, 2);
}

TEST(KernelsTest, Embedding) {
  const int64_t rows = 5, width = 3;
  Values table = randomData(rows * width, 16);
  std::vector<int64_t> ids = {4, 0, 2, 2};
  Values out(ids.size() * width);
  std::string error;
  IndexPlace place{{4}};
  ASSERT_TRUE(
      embedding(table.data(), rows, width, ids.data(), ids.size(), out.data(), place, error))
      << error;
  Expected want =
      tabulate({4, width}, [&](const Shape &i) { return table[ids[i[0]] * width + i[1]]; });
  expectClose(out, want, 0.0);

  // Named where they lie in what the user gave: the second row of a
  // rank's 1x3 block that starts at row 2 of the 4x3 input.
  IndexPlace input{{1, 3}, {2, 0}, {4, 3}, {}, {}, "input 'ids'"};
  for (int64_t bad : {rows, int64_t(9), int64_t(-3)}) {
    std::vector<int64_t> badIds = {1, bad, 0};
    expectOutOfRange(embedding(table.data(), rows, width, badIds.data(), badIds.size(),
                               out.data(), input, error),
                     error,
                     "index " + std::to_string(bad) +
                         " at [2, 1] of input 'ids' is out of range for 5 table rows");
  }
}

TEST(KernelsTest, CausalMask) {
  const int64_t blocks = 3, s = 4;
  Values in = randomData(blocks * s * s, 17), out(in.size());
  causalMask(in.data(), out.data(), blocks, s, -std::numeric_limits<float>::infinity());
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        int64_t at = (b * s + i) * s + j;
        if (j > i)
          EXPECT_EQ(out[at], -std::numeric_limits<float>::infinity()) << "at " << at;
        else
          EXPECT_EQ(out[at], in[at]) << "at " << at;
      }
}

TEST(KernelsTest, CrossEntropy) {
  const int64_t rows = 4, classes = 5;
  Values logits = randomData(rows * classes, 18);
  std::vector<int64_t> targets = {3, 0, 4, 1};
  float loss = 0.0f;
  std::string error;
  IndexPlace place{{rows}};
  ASSERT_TRUE(crossEntropy(logits.data(), targets.data(), rows, classes, &loss, place, error))
      << error;
  double want = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(double(logits[r * classes + c]));
    want += std::log(sum) - logits[r * classes + targets[r]];
  }
  expectClose({loss}, {want}, kRtol);

  for (int64_t bad : {classes, int64_t(-1)}) {
    std::vector<int64_t> badTargets = {0, 1, bad, 2};
    expectOutOfRange(
        crossEntropy(logits.data(), badTargets.data(), rows, classes, &loss, place, error), error,
        "target " + std::to_string(bad) + " at [2] is out of range for 5 classes");
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// bf16 storage
//===----------------------------------------------------------------------===//

namespace {

uint16_t bitsOf(float value) { return sbprt::bf16(value).bits; }

float fromBits(uint32_t word) {
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

/// `values` rounded to bf16 and read back: inputs every bf16 kernel sees
/// exactly.
Values bf16Exact(Values values) {
  for (float &v : values)
    v = sbprt::bf16(v);
  return values;
}

std::vector<sbprt::bf16> toBf16(const Values &values) {
  return std::vector<sbprt::bf16>(values.begin(), values.end());
}

/// A bf16 kernel computes what the f32 kernel computes on the same
/// (bf16-exact) inputs, rounded once: its every output is the f32 output
/// rounded to bf16, bit for bit.
void expectRoundedOnce(const Values &f32Out, const std::vector<sbprt::bf16> &bf16Out) {
  ASSERT_EQ(f32Out.size(), bf16Out.size());
  for (size_t i = 0; i < f32Out.size(); ++i)
    ASSERT_EQ(bf16Out[i].bits, bitsOf(f32Out[i])) << "element " << i << ": f32 " << f32Out[i];
}

} // namespace

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(bitsOf(1.0f), 0x3f80);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to even (1). Just above
  // it goes up; 1 + 3 * 2^-8 is halfway to an odd neighbour's even one.
  EXPECT_EQ(bitsOf(fromBits(0x3f808000)), 0x3f80);
  EXPECT_EQ(bitsOf(fromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(bitsOf(fromBits(0x3f818000)), 0x3f82);
  EXPECT_EQ(bitsOf(-2.5f), 0xc020);
  EXPECT_EQ(float(sbprt::bf16(3.140625f)), 3.140625f); // exact in 8 bits
  // Beyond the largest bf16 is infinity; infinities and NaN stay so.
  EXPECT_EQ(bitsOf(fromBits(0x7f7fffff)), 0x7f80);
  EXPECT_EQ(bitsOf(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bitsOf(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(float(sbprt::bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the dropped bits stays a NaN, not infinity.
  EXPECT_TRUE(std::isnan(float(sbprt::bf16(fromBits(0x7f800001)))));
}

TEST(Bf16Test, KernelsRoundOnce) {
  const int64_t rows = 6, width = 16, k = 24;
  Values x = bf16Exact(randomData(rows * width, 1)), scale = bf16Exact(randomData(width, 2)),
         bias = bf16Exact(randomData(width, 3)), w = bf16Exact(randomData(width * k, 4));
  auto xb = toBf16(x), scaleb = toBf16(scale), biasb = toBf16(bias), wb = toBf16(w);
  Values f(rows * width);
  std::vector<sbprt::bf16> b(rows * width);

  unary(UnaryKind::Gelu, x.data(), f.data(), rows * width);
  unary(UnaryKind::Gelu, xb.data(), b.data(), rows * width);
  expectRoundedOnce(f, b);

  binary(BinaryKind::Add, x.data(), {rows, width}, bias.data(), {width}, f.data(), {rows, width});
  binary(BinaryKind::Add, xb.data(), {rows, width}, biasb.data(), {width}, b.data(),
         {rows, width});
  expectRoundedOnce(f, b);

  softmax(x.data(), f.data(), {rows, width}, 1, false);
  softmax(xb.data(), b.data(), {rows, width}, 1, false);
  expectRoundedOnce(f, b);

  layerNorm(x.data(), scale.data(), bias.data(), f.data(), rows, width, 1e-5f);
  layerNorm(xb.data(), scaleb.data(), biasb.data(), b.data(), rows, width, 1e-5f);
  expectRoundedOnce(f, b);

  Values fm(rows * k);
  std::vector<sbprt::bf16> bm(rows * k);
  matmul(x.data(), w.data(), fm.data(), 1, rows, k, width, false, false, true);
  matmul(xb.data(), wb.data(), bm.data(), 1, rows, k, width, false, false, true);
  expectRoundedOnce(fm, bm);

  Values fs(width);
  std::vector<sbprt::bf16> bs(width);
  // The linear layer rounds once, after the bias and the GELU.
  Values biasK = bf16Exact(randomData(k, 8));
  auto biasKb = toBf16(biasK);
  linear(x.data(), w.data(), biasK.data(), kNoResidual, fm.data(), rows, k, width, false, true);
  linear(xb.data(), wb.data(), biasKb.data(), static_cast<const sbprt::bf16 *>(nullptr),
         bm.data(), rows, k, width, false, true);
  expectRoundedOnce(fm, bm);
  // And after the bias and the residual.
  Values residual = bf16Exact(randomData(rows * k, 9));
  auto residualb = toBf16(residual);
  linear(x.data(), w.data(), biasK.data(), residual.data(), fm.data(), rows, k, width, false,
         false);
  linear(xb.data(), wb.data(), biasKb.data(), residualb.data(), bm.data(), rows, k, width, false,
         false);
  expectRoundedOnce(fm, bm);

  reduce(ReduceKind::Sum, x.data(), {rows, width}, {0}, fs.data());
  reduce(ReduceKind::Sum, xb.data(), {rows, width}, {0}, bs.data());
  expectRoundedOnce(fs, bs);

  // Gradients: the scaled softmax's and layer norm's (three outputs).
  Values dy = bf16Exact(randomData(rows * width, 5));
  auto dyb = toBf16(dy);
  float half = 0.5f;
  sbprt::bf16 halfb(half);
  Values sqGrad(width * width);
  std::vector<sbprt::bf16> bq(width * width);
  Values probs = bf16Exact(randomData(width * width, 6, 0.0f, 1.0f));
  Values dprobs = bf16Exact(randomData(width * width, 7));
  auto probsb = toBf16(probs), dprobsb = toBf16(dprobs);
  scaledSoftmaxGrad(probs.data(), dprobs.data(), &half, true, sqGrad.data(), {width, width});
  scaledSoftmaxGrad(probsb.data(), dprobsb.data(), &halfb, true, bq.data(), {width, width});
  expectRoundedOnce(sqGrad, bq);

  Values fdx(rows * width), fds(width), fdb(width);
  std::vector<sbprt::bf16> bdx(rows * width), bds(width), bdb(width);
  layerNormGrad(x.data(), scale.data(), dy.data(), fdx.data(), fds.data(), fdb.data(), rows,
                width, 1e-5f);
  layerNormGrad(xb.data(), scaleb.data(), dyb.data(), bdx.data(), bds.data(), bdb.data(), rows,
                width, 1e-5f);
  expectRoundedOnce(fdx, bdx);
  expectRoundedOnce(fds, bds);
  expectRoundedOnce(fdb, bdb);
}
