// Tests the layout searches: exact against brute-force enumeration on
// models small enough to enumerate; auto against exact, and D-Rec and
// auto's local search against both, on random small graphs.
#include "compiler/Gen/ModelGen.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Search/SearchProblem.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <sstream>

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
      while (i < nodes.size() && ++choice[i] == nodes[i].numChoices())
        choice[i++] = 0;
      if (i == nodes.size())
        return best;
    }
  }

  /// The number of assignments brute force would enumerate (saturating).
  static double assignmentsOf(search::SearchProblem &problem) {
    double count = 1;
    for (const search::Node &node : problem.nodes())
      count *= static_cast<double>(node.numChoices());
    return count;
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
    std::optional<search::Solution> solution = search::solveExact(*problem, search::ExactBudget{}, error);
    ASSERT_TRUE(solution) << error;
    EXPECT_NEAR(solution->seconds, search::evaluate(*problem, solution->choice),
                1e-12 * std::max(1.0, solution->seconds));
    size_t assignments = 0;
    double best = bruteForce(*problem, assignments);
    EXPECT_GE(assignments, minAssignments);
    EXPECT_NEAR(best, solution->seconds, 1e-12 * std::max(1.0, best));
  }

  /// A random trial's graph, parsed, its search problem and its optimum
  /// (none where one fails, `error` then saying why).
  struct Trial {
    OwningOpRef<ModuleOp> module;
    std::unique_ptr<sbp::BoxingPlans> plans;
    std::optional<search::SearchProblem> problem;
    std::optional<search::Solution> exact;
    std::string error;
  };
  Trial buildTrial(const std::string &source, const sbprt::Mesh &mesh, const Cluster &cluster) {
    Trial trial;
    trial.module = parseSourceString<ModuleOp>(source, &ctx);
    if (!trial.module)
      return trial;
    auto fn = *trial.module->getOps<func::FuncOp>().begin();
    trial.plans = std::make_unique<sbp::BoxingPlans>(mesh, cluster);
    FailureOr<search::SearchProblem> problem =
        search::SearchProblem::build(fn, mesh, cluster, *trial.plans);
    if (failed(problem))
      return trial;
    trial.problem = std::move(*problem);
    trial.exact = search::solveExact(*trial.problem, search::ExactBudget{}, trial.error);
    return trial;
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

/// A random graph of matmuls, element-wise ops and shared values on 2-D
/// tensors of sizes 4 and 8 (every one divisible on the meshes below).
std::string randomGraph(std::mt19937 &rng, int ops) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  struct Value {
    std::string name;
    int rows, cols;
  };
  auto type = [](int r, int c) {
    return "tensor<" + std::to_string(r) + "x" + std::to_string(c) + "xf32>";
  };
  std::vector<Value> values{{"%x", 8, 8}};
  std::vector<std::string> args{"%x: " + type(8, 8)};
  std::ostringstream body;
  for (int i = 0; i < ops; ++i) {
    std::string name = "%v" + std::to_string(i);
    const Value a = values[pick(values.size())];
    std::vector<Value> same;
    for (const Value &v : values)
      if (v.rows == a.rows && v.cols == a.cols)
        same.push_back(v);
    switch (pick(4)) {
    case 0: { // matmul with a new weight
      int cols = pick(2) ? 4 : 8;
      std::string w = "%w" + std::to_string(i);
      args.push_back(w + ": " + type(a.cols, cols));
      body << name << " = graph.matmul " << a.name << ", " << w << " : (" << type(a.rows, a.cols)
           << ", " << type(a.cols, cols) << ") -> " << type(a.rows, cols) << "\n";
      values.push_back({name, a.rows, cols});
      continue;
    }
    case 1:
    case 2: { // a binary op on two values of one shape
      const Value b = same[pick(same.size())];
      body << name << " = graph." << (pick(2) ? "add " : "mul ") << a.name << ", " << b.name
           << " : (" << type(a.rows, a.cols) << ", " << type(a.rows, a.cols) << ") -> "
           << type(a.rows, a.cols) << "\n";
      break;
    }
    default:
      body << name << " = graph." << (pick(2) ? "relu " : "gelu ") << a.name << " : "
           << type(a.rows, a.cols) << "\n";
    }
    values.push_back({name, a.rows, a.cols});
  }
  const Value &last = values.back();
  std::ostringstream fn;
  fn << "func.func @f(";
  for (size_t i = 0; i < args.size(); ++i)
    fn << (i ? ", " : "") << args[i];
  fn << ") -> " << type(last.rows, last.cols) << " {\n"
     << body.str() << "return " << last.name << " : " << type(last.rows, last.cols) << "\n}\n";
  return fn.str();
}

TEST_F(ExactSearchTest, AutoEqualsExactAndBoundsTheHeuristicsOnRandomGraphs) {
  std::mt19937 rng(20261121);
  std::vector<sbprt::Mesh> meshes{{{"x"}, {2}}, {{"x"}, {4}}, {{"a", "b"}, {2, 2}}};
  std::string error;
  Cluster cluster = *loadCluster("dgx-h100-cluster", error);
  int bruteForced = 0, localBeatsDRec = 0;
  for (int trial = 0; trial < 36; ++trial) {
    const sbprt::Mesh &mesh = meshes[trial % meshes.size()];
    std::string source = randomGraph(rng, 3 + trial % 5);
    SCOPED_TRACE(source);
    Trial built = buildTrial(source, mesh, cluster);
    ASSERT_TRUE(built.exact) << built.error;
    search::SearchProblem *problem = &*built.problem;
    const std::optional<search::Solution> &exact = built.exact;
    double tolerance = 1e-9 * exact->seconds;
    if (assignmentsOf(*problem) <= 2e5) {
      size_t assignments = 0;
      EXPECT_NEAR(bruteForce(*problem, assignments), exact->seconds, tolerance);
      ++bruteForced;
    }
    // auto solves graphs this small exactly.
    std::optional<search::Solution> automatic = search::solveAuto(*problem, error);
    ASSERT_TRUE(automatic) << error;
    EXPECT_NEAR(automatic->seconds, exact->seconds, tolerance);
    // Its local search (the path for large graphs) and D-Rec: never below
    // the optimum, and local search never above D-Rec, where it starts.
    search::AutoOptions local;
    local.whole.maxWork = 0;
    std::optional<search::Solution> improved = search::solveAuto(*problem, error, local);
    ASSERT_TRUE(improved) << error;
    search::Solution drec = search::solveDRec(*problem);
    EXPECT_NEAR(drec.seconds, search::evaluate(*problem, drec.choice), tolerance);
    EXPECT_GE(drec.seconds, exact->seconds - tolerance);
    EXPECT_GE(improved->seconds, exact->seconds - tolerance);
    EXPECT_LE(improved->seconds, drec.seconds + tolerance);
    localBeatsDRec += improved->seconds < drec.seconds - tolerance;
  }
  // The trials must exercise both checks.
  EXPECT_GE(bruteForced, 10);
  EXPECT_GE(localBeatsDRec, 1);
}

TEST_F(ExactSearchTest, HeldSolvesFitTheBudgetAndNeverLoseToTheirPlan) {
  // A budget of 64 entries a table: too small for exact on most of these
  // graphs. Held at D-Rec's plan, the solve fits it, is never worse than
  // D-Rec (whose plan stays possible) nor better than the optimum, and
  // often improves on D-Rec; with the default budget nothing is held.
  std::mt19937 rng(20261126);
  sbprt::Mesh mesh{{"a", "b"}, {2, 2}};
  std::string error;
  Cluster cluster = *loadCluster("dgx-h100-cluster", error);
  search::ExactBudget tiny{64, 1 << 16};
  int refused = 0, held = 0, beatsPlan = 0;
  for (int trial = 0; trial < 24; ++trial) {
    std::string source = randomGraph(rng, 6 + trial % 7);
    SCOPED_TRACE(source);
    Trial built = buildTrial(source, mesh, cluster);
    ASSERT_TRUE(built.exact) << built.error;
    search::SearchProblem *problem = &*built.problem;
    const std::optional<search::Solution> &exact = built.exact;
    search::Solution drec = search::solveDRec(*problem);
    double tolerance = 1e-9 * exact->seconds;

    search::HoldAt roomy{drec.choice};
    std::optional<search::Solution> unheld =
        search::solveExact(*problem, search::ExactBudget{}, error, nullptr, &roomy);
    ASSERT_TRUE(unheld) << error;
    EXPECT_EQ(roomy.held, 0u);
    EXPECT_NEAR(unheld->seconds, exact->seconds, tolerance);

    std::string refusal;
    if (!search::solveExact(*problem, tiny, refusal)) {
      EXPECT_NE(refusal.find("exact search needs a table of"), std::string::npos) << refusal;
      ++refused;
    }
    search::HoldAt hold{drec.choice};
    std::optional<search::Solution> solution =
        search::solveExact(*problem, tiny, error, nullptr, &hold);
    ASSERT_TRUE(solution) << error;
    EXPECT_NEAR(solution->seconds, search::evaluate(*problem, solution->choice), tolerance);
    EXPECT_LE(solution->seconds, drec.seconds + tolerance);
    EXPECT_GE(solution->seconds, exact->seconds - tolerance);
    held += hold.held > 0;
    beatsPlan += solution->seconds < drec.seconds - tolerance;
  }
  // The trials must exercise the holding, and it must still optimize.
  EXPECT_GE(refused, 20);
  EXPECT_GE(held, refused);
  EXPECT_GE(beatsPlan, 3);
}

} // namespace
