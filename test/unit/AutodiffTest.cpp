// Finite-difference checks of every gradient rule: for each op, on shapes
// drawn at random, a loss sum(op(params...) * r) with random weights r is
// differentiated by --graph-autodiff and evaluated by the reference
// evaluator; the directional derivative along a random direction, per
// parameter, must match the central difference of the loss.
#include "compiler/Reference/Evaluator.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "passes/Graph/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;

namespace {

/// How a parameter is initialized: away from the kinks and poles of the
/// op under test.
enum class Init { Normal, Positive, AwayFromZero };

struct Arg {
  std::string name;
  std::vector<int64_t> shape;
  bool isParam = true;
  Init init = Init::Normal;
  int64_t indexRange = 0; // > 0: an i64 input of ids in [0, indexRange)
};

struct Case {
  std::string name;
  std::vector<Arg> args;
  /// The op, reading %<arg name>, defining %y of type `result`.
  std::string op;
  std::vector<int64_t> result;
};

std::string tensorType(const std::vector<int64_t> &shape, const char *element = "f32") {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + element + ">";
}

std::string moduleText(const Case &c) {
  std::string args;
  for (const Arg &a : c.args)
    args += llvm::formatv("%{0}: {1} {{graph.{2} = \"{0}\"}, ", a.name,
                          tensorType(a.shape, a.indexRange ? "i64" : "f32"),
                          a.isParam ? "param" : "input")
                .str();
  std::string y = tensorType(c.result);
  std::string dims;
  for (size_t d = 0; d < c.result.size(); ++d)
    dims += (d ? ", " : "") + std::to_string(d);
  std::string loss =
      c.result.empty()
          ? "%l = graph.mul %y, %r : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
          : llvm::formatv("%m = graph.mul %y, %r : ({0}, {0}) -> {0}\n"
                          "  %l = graph.reduce_sum %m dims [{1}] : ({0}) -> tensor<f32>\n",
                          y, dims)
                .str();
  return llvm::formatv("func.func @f({0}%r: {1} {{graph.input = \"r\"}) -> "
                       "(tensor<f32> {{graph.output = \"loss\"}) {{\n  {2}\n  {3}"
                       "  return %l : tensor<f32>\n}\n",
                       args, y, c.op, loss)
      .str();
}

class AutodiffTest : public ::testing::Test {
protected:
  AutodiffTest() { ctx.loadDialect<sbpc::graph::GraphDialect, func::FuncDialect>(); }

  sbprt::Tensor random(const std::vector<int64_t> &shape, Init init, int64_t indexRange) {
    if (indexRange) {
      sbprt::Tensor t(sbprt::DType::I64, shape);
      std::uniform_int_distribution<int64_t> ids(0, indexRange - 1);
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.as<int64_t>()[i] = ids(rng);
      return t;
    }
    sbprt::Tensor t(sbprt::DType::F32, shape);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < t.numElements(); ++i) {
      float v = normal(rng);
      if (init == Init::Positive)
        v = 0.5f + unit(rng);
      else if (init == Init::AwayFromZero)
        v = (unit(rng) < 0.5f ? -1.0f : 1.0f) * (0.25f + unit(rng));
      t.as<float>()[i] = v;
    }
    return t;
  }

  void check(const Case &c) {
    SCOPED_TRACE(c.name);
    std::string text = moduleText(c);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
    ASSERT_TRUE(module) << text;
    PassManager pm(&ctx);
    pm.addPass(sbpc::graph::createGraphAutodiff());
    ASSERT_TRUE(succeeded(pm.run(*module))) << text;
    auto fn = *module->getOps<func::FuncOp>().begin();

    std::vector<sbprt::Tensor> point;
    for (const Arg &a : c.args)
      point.push_back(random(a.shape, a.init, a.indexRange));
    point.push_back(random(c.result, Init::Normal, 0));
    auto at = [&](const std::vector<sbprt::Tensor> &args) {
      FailureOr<std::vector<sbprt::Tensor>> out = sbpc::evaluate(fn, args);
      EXPECT_TRUE(succeeded(out));
      return *out;
    };
    std::vector<sbprt::Tensor> outputs = at(point);
    size_t grad = 1; // outputs: loss, then one gradient per parameter
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (!c.args[i].isParam)
        continue;
      SCOPED_TRACE("parameter " + c.args[i].name);
      const sbprt::Tensor &g = outputs[grad++];
      ASSERT_EQ(g.shape(), point[i].shape());
      sbprt::Tensor direction = random(point[i].shape(), Init::Normal, 0);
      double analytic = 0;
      for (int64_t k = 0; k < g.numElements(); ++k)
        analytic += double(g.as<float>()[k]) * direction.as<float>()[k];
      const float eps = 1e-2f;
      auto shifted = [&](float sign) {
        std::vector<sbprt::Tensor> args = point;
        for (int64_t k = 0; k < direction.numElements(); ++k)
          args[i].as<float>()[k] += sign * eps * direction.as<float>()[k];
        return double(at(args)[0].as<float>()[0]);
      };
      double numeric = (shifted(1) - shifted(-1)) / (2 * eps);
      double scale = std::max({std::abs(analytic), std::abs(numeric), 1.0});
      EXPECT_NEAR(analytic, numeric, 2e-2 * scale) << text;
    }
  }

  /// A size in [lo, hi].
  int64_t size(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

  MLIRContext ctx;
  std::mt19937 rng{20261121};
};

TEST_F(AutodiffTest, Elementwise) {
  for (int trial = 0; trial < 2; ++trial) {
    std::vector<int64_t> s = {size(1, 3), size(2, 4)};
    std::string t = tensorType(s);
    auto unary = [&](const char *op, Init init) {
      check({op, {{"x", s, true, init}}, llvm::formatv("%y = graph.{0} %x : {1}", op, t).str(), s});
    };
    unary("neg", Init::Normal);
    unary("exp", Init::Normal);
    unary("log", Init::Positive);
    unary("tanh", Init::Normal);
    unary("sqrt", Init::Positive);
    unary("rsqrt", Init::Positive);
    unary("relu", Init::AwayFromZero);
    unary("gelu", Init::Normal);
    // Binary ops, both operands parameters, the second broadcast.
    std::vector<int64_t> row = {s[1]};
    for (const char *op : {"add", "sub", "mul", "div"})
      check({op,
             {{"a", s}, {"b", row, true, std::string(op) == "div" ? Init::Positive : Init::Normal}},
             llvm::formatv("%y = graph.{0} %a, %b : ({1}, {2}) -> {1}", op, t, tensorType(row))
                 .str(),
             s});
    std::vector<int64_t> column = {s[0], 1};
    check({"mul column", {{"a", column}, {"b", s}},
           llvm::formatv("%y = graph.mul %a, %b : ({0}, {1}) -> {1}", tensorType(column), t).str(),
           s});
  }
}

TEST_F(AutodiffTest, Matmul) {
  int64_t b = size(1, 3), m = size(1, 4), k = size(2, 4), n = size(1, 4);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<int64_t> a = ta ? std::vector<int64_t>{b, k, m} : std::vector<int64_t>{b, m, k};
      std::vector<int64_t> batched = tb ? std::vector<int64_t>{b, n, k}
                                        : std::vector<int64_t>{b, k, n};
      std::vector<int64_t> shared = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
      std::string flags = std::string(ta ? " transpose_lhs" : "") + (tb ? " transpose_rhs" : "");
      for (const auto &rhs : {batched, shared})
        check({"matmul" + flags + (rhs.size() == 2 ? " shared" : ""),
               {{"a", a}, {"w", rhs}},
               llvm::formatv("%y = graph.matmul %a, %w{0} : ({1}, {2}) -> {3}", flags,
                             tensorType(a), tensorType(rhs), tensorType({b, m, n}))
                   .str(),
               {b, m, n}});
    }
}

TEST_F(AutodiffTest, ReductionsAndNormalizations) {
  std::vector<int64_t> s = {size(2, 3), size(2, 4), size(2, 5)};
  std::string t = tensorType(s);
  check({"reduce_sum", {{"x", s}},
         llvm::formatv("%y = graph.reduce_sum %x dims [0, 2] : ({0}) -> {1}", t,
                       tensorType({s[1]}))
             .str(),
         {s[1]}});
  check({"reduce_mean keepdims", {{"x", s}},
         llvm::formatv("%y = graph.reduce_mean %x dims [1] keepdims : ({0}) -> {1}", t,
                       tensorType({s[0], 1, s[2]}))
             .str(),
         {s[0], 1, s[2]}});
  check({"softmax", {{"x", s}}, llvm::formatv("%y = graph.softmax %x axis = 2 : {0}", t).str(), s});
  check({"log_softmax", {{"x", s}},
         llvm::formatv("%y = graph.log_softmax %x axis = 1 : {0}", t).str(), s});
  std::vector<int64_t> w = {s[2]};
  check({"layer_norm", {{"x", s}, {"g", w}, {"b", w}},
         llvm::formatv("%y = graph.layer_norm %x, %g, %b eps = 1.0e-05 : ({0}, {1}, {1}) -> {0}",
                       t, tensorType(w))
             .str(),
         s});
}

TEST_F(AutodiffTest, DataMovement) {
  std::vector<int64_t> s = {size(2, 3), size(2, 4), size(3, 5)};
  std::string t = tensorType(s);
  check({"transpose", {{"x", s}},
         llvm::formatv("%y = graph.transpose %x perm [2, 0, 1] : ({0}) -> {1}", t,
                       tensorType({s[2], s[0], s[1]}))
             .str(),
         {s[2], s[0], s[1]}});
  check({"reshape", {{"x", s}},
         llvm::formatv("%y = graph.reshape %x : ({0}) -> {1}", t,
                       tensorType({s[0] * s[1], s[2]}))
             .str(),
         {s[0] * s[1], s[2]}});
  check({"slice", {{"x", s}},
         llvm::formatv("%y = graph.slice %x starts [0, 1, 1] limits [{0}, {1}, {2}] : ({3}) -> {4}",
                       s[0], s[1], s[2] - 1, t, tensorType({s[0], s[1] - 1, s[2] - 2}))
             .str(),
         {s[0], s[1] - 1, s[2] - 2}});
  std::vector<int64_t> other = {s[0], 2, s[2]}, joined = {s[0], s[1] + 2, s[2]};
  check({"concat", {{"x", s}, {"z", other}},
         llvm::formatv("%y = graph.concat %x, %z axis = 1 : ({0}, {1}) -> {2}", t,
                       tensorType(other), tensorType(joined))
             .str(),
         joined});
  check({"pad", {{"x", s}},
         llvm::formatv("%y = graph.pad %x low [1, 0, 2] high [0, 1, 0] : ({0}) -> {1}", t,
                       tensorType({s[0] + 1, s[1] + 1, s[2] + 2}))
             .str(),
         {s[0] + 1, s[1] + 1, s[2] + 2}});
  std::vector<int64_t> wide = {s[1], s[0], s[1], s[2]};
  check({"broadcast", {{"x", s}},
         llvm::formatv("%y = graph.broadcast %x : ({0}) -> {1}", t, tensorType(wide)).str(),
         wide});
  int64_t n = size(2, 4);
  std::vector<int64_t> scores = {s[0], n, n};
  check({"causal_mask then softmax", {{"x", scores}},
         llvm::formatv("%c = graph.causal_mask %x : {0}\n  %y = graph.softmax %c axis = 2 : {0}",
                       tensorType(scores))
             .str(),
         scores});
}

TEST_F(AutodiffTest, EmbeddingAndCrossEntropy) {
  int64_t rows = size(3, 6), width = size(2, 4), b = size(1, 3), s = size(2, 4);
  check({"embedding", {{"table", {rows, width}}, {"ids", {b, s}, false, Init::Normal, rows}},
         llvm::formatv("%y = graph.embedding %table, %ids : ({0}, {1}) -> {2}",
                       tensorType({rows, width}), tensorType({b, s}, "i64"),
                       tensorType({b, s, width}))
             .str(),
         {b, s, width}});
  check({"cross_entropy", {{"logits", {b, s, rows}}, {"t", {b, s}, false, Init::Normal, rows}},
         llvm::formatv("%y = graph.cross_entropy %logits, %t : ({0}, {1}) -> tensor<f32>",
                       tensorType({b, s, rows}), tensorType({b, s}, "i64"))
             .str(),
         {}});
}

TEST_F(AutodiffTest, FanOutAddsGradientsAndUnreachedParametersGetZeros) {
  std::vector<int64_t> s = {3, 4};
  std::string t = tensorType(s);
  // x is used twice; u never reaches the loss.
  check({"fan-out", {{"x", s}, {"u", s}},
         llvm::formatv("%a = graph.tanh %x : {0}\n  %y = graph.mul %a, %x : ({0}, {0}) -> {0}", t)
             .str(),
         s});
}

TEST_F(AutodiffTest, OpsWithoutARuleAreErrors) {
  std::string text = moduleText({"reduce_max", {{"x", {2, 3}}},
                                 "%y = graph.reduce_max %x dims [1] : (tensor<2x3xf32>) -> tensor<2xf32>",
                                 {2}});
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  PassManager pm(&ctx);
  pm.addPass(sbpc::graph::createGraphAutodiff());
  EXPECT_TRUE(failed(pm.run(*module)));
  EXPECT_NE(message.find("'graph.reduce_max' op has no gradient rule"), std::string::npos)
      << message;
}

} // namespace
