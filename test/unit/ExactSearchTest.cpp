// Tests the exact layout search against brute-force enumeration on models
// small enough to enumerate, and that its reported cost is evaluate()'s.
#include "compiler/Gen/ModelGen.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Search/SearchProblem.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace sbpc;

namespace {

class ExactSearchTest : public ::testing::Test {
protected:
  ExactSearchTest() : ctx(registry()) {
    ctx.loadDialect<graph::GraphDialect, sbp::SbpDialect, func::FuncDialect>();
  }
  static DialectRegistry registry() {
    DialectRegistry r;
    registerGraphSbpModels(r);
    return r;
  }

  /// The cheapest cost over every assignment of choices.
  static double bruteForce(search::SearchProblem &problem, size_t &assignments) {
    const auto &nodes = problem.nodes();
    std::vector<size_t> choice(nodes.size(), 0);
    double best = std::numeric_limits<double>::infinity();
    assignments = 0;
    while (true) {
      best = std::min(best, search::evaluate(problem, choice));
      ++assignments;
      size_t i = 0;
      while (i < nodes.size() && ++choice[i] == nodes[i].choices.size())
        choice[i++] = 0;
      if (i == nodes.size())
        return best;
    }
  }

  /// `minAssignments`: enough choices that a wrong DP would show.
  void expectExactIsOptimal(const std::string &source, const sbprt::Mesh &mesh,
                            size_t minAssignments) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
    ASSERT_TRUE(module);
    auto fn = *module->getOps<func::FuncOp>().begin();
    std::string error;
    Cluster cluster = *loadCluster("dgx-h100-cluster", error);
    sbp::BoxingPlans plans(mesh, cluster);
    FailureOr<search::SearchProblem> problem =
        search::SearchProblem::build(fn, mesh, cluster, plans);
    ASSERT_TRUE(succeeded(problem));
    std::optional<search::Solution> solution = search::solveExact(*problem, 1000000, error);
    ASSERT_TRUE(solution) << error;
    EXPECT_NEAR(solution->seconds, search::evaluate(*problem, solution->choice),
                1e-12 * std::max(1.0, solution->seconds));
    size_t assignments = 0;
    double best = bruteForce(*problem, assignments);
    EXPECT_GE(assignments, minAssignments);
    EXPECT_NEAR(best, solution->seconds, 1e-12 * std::max(1.0, best));
  }

  MLIRContext ctx;
};

TEST_F(ExactSearchTest, MatchesBruteForceOnAnMlpOnTwoDevices) {
  expectExactIsOptimal(R"(
    func.func @f(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x8xf32>) -> tensor<8x8xf32> {
      %h = graph.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
      %a = graph.relu %h : tensor<8x32xf32>
      %y = graph.matmul %a, %w2 : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
      return %y : tensor<8x8xf32>
    })",
                       {{"x"}, {2}}, 100);
}

TEST_F(ExactSearchTest, MatchesBruteForceWithSharedValuesOnATwoByTwoMesh) {
  // %x feeds two ops and %h is used twice: the DP must carry their layouts.
  expectExactIsOptimal(R"(
    func.func @f(%x: tensor<8x8xf32> {sbp.layout = #sbp.nd<[S(0), B]>}, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
      %h = graph.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %g = graph.add %h, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %y = graph.mul %g, %h : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      return %y : tensor<8x8xf32>
    })",
                       {{"a", "b"}, {2, 2}}, 10000);
}

} // namespace
