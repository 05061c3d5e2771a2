// Tests the layout searches: exact against brute-force enumeration on
// models small enough to enumerate; auto against exact, and D-Rec and
// auto's local search against both, on random small graphs.
#include "compiler/Gen/ModelGen.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Search/SearchProblem.h"
#include "dialects/Graph/IR/GraphOps.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "passes/Graph/Passes.h"
#include "passes/Sbp/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
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

/// A mesh, the H100 cluster and boxing plans over them, and search problems
/// on them.
struct Plans {
  explicit Plans(sbprt::Mesh meshGiven) : mesh(std::move(meshGiven)), cluster(h100()), plans(mesh, cluster) {}
  static Cluster h100() {
    std::string error;
    return *loadCluster("dgx-h100-cluster", error);
  }
  FailureOr<search::SearchProblem> problemOf(func::FuncOp fn, bool tieMicroBatches = true) {
    return search::SearchProblem::build(fn, mesh, cluster, plans, tieMicroBatches);
  }
  sbprt::Mesh mesh;
  Cluster cluster;
  sbp::BoxingPlans plans;
};

/// A step parsed from `source`, its search problem on two devices (none
/// where it cannot be built) and its ops in program order.
struct StepOnTwoDevices {
  StepOnTwoDevices(MLIRContext &ctx, const char *source)
      : module(parseSourceString<ModuleOp>(source, &ctx)) {
    if (!module)
      return;
    fn = *module->getOps<func::FuncOp>().begin();
    if (FailureOr<search::SearchProblem> built = plans.problemOf(fn); succeeded(built))
      problem.emplace(std::move(*built));
    for (Operation &op : fn.getBody().front().without_terminator())
      ops.push_back(&op);
  }
  Plans plans{sbprt::Mesh{{"x"}, {2}}};
  OwningOpRef<ModuleOp> module;
  func::FuncOp fn;
  std::optional<search::SearchProblem> problem;
  std::vector<Operation *> ops;
};

/// Calls `visit` with every combination of the choices of `nodes` (the
/// others at their first) and how many calls it returned true on.
int forEachChoiceOf(const search::SearchProblem &problem, ArrayRef<size_t> nodes,
                    llvm::function_ref<bool(std::vector<size_t> &plan)> visit) {
  std::vector<size_t> plan(problem.nodes().size(), 0);
  int accepted = 0;
  while (true) {
    accepted += visit(plan);
    size_t i = 0;
    while (i < nodes.size() && ++plan[nodes[i]] == problem.nodes()[nodes[i]].numChoices())
      plan[nodes[i++]] = 0;
    if (i == nodes.size())
      return accepted;
  }
}

/// The choices of `from`'s nodes for the nodes of `to`, a problem on the
/// same function: each op node takes the choice of the node its op (or the
/// op it copies) has in `from`, each free argument that of its argument.
std::vector<size_t> carryChoices(const search::SearchProblem &from,
                                 const std::vector<size_t> &choice,
                                 const search::SearchProblem &to) {
  std::map<const void *, size_t> argumentNode;
  for (auto [n, node] : llvm::enumerate(from.nodes()))
    if (!node.op)
      argumentNode[node.argument.getAsOpaquePointer()] = n;
  std::vector<size_t> carried;
  for (const search::Node &node : to.nodes())
    carried.push_back(choice[node.op ? from.nodeOf(node.op)
                                     : argumentNode.at(node.argument.getAsOpaquePointer())]);
  return carried;
}

TEST_F(ExactSearchTest, TiedMicroBatchesCostWhatTheirCopiesDo) {
  // A step of three micro-batches (forward, loss and gradient), searched
  // with each later micro-batch's ops tied to micro-batch 0's and without.
  // The tied problem is a third the size; a tied plan, carried to every
  // copy, costs the same seconds and the same memory in the untied
  // problem (each copy paid, each copy's values live in program order),
  // but for what all copies read alike (the parameters): --sbp-insert-boxing
  // changes that once for all, and the tied problem counts it once, the
  // untied once per copy. The untied optimum can only be cheaper than the
  // carried plan, being free to differ.
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @f(%x: tensor<24x8xf32> {graph.input = "x"}, %w: tensor<8x16xf32> {graph.param = "w"},
                 %v: tensor<16x4xf32> {graph.param = "v"})
        -> (tensor<f32> {graph.output = "loss"}, tensor<8x16xf32> {graph.output = "grad.w"}) {
      %h = graph.matmul %x, %w : (tensor<24x8xf32>, tensor<8x16xf32>) -> tensor<24x16xf32>
      %a = graph.relu %h : tensor<24x16xf32>
      %y = graph.matmul %a, %v : (tensor<24x16xf32>, tensor<16x4xf32>) -> tensor<24x4xf32>
      %l = graph.reduce_sum %y dims [0, 1] : (tensor<24x4xf32>) -> tensor<f32>
      %g = graph.matmul %x, %a transpose_lhs : (tensor<24x8xf32>, tensor<24x16xf32>) -> tensor<8x16xf32>
      return %l, %g : tensor<f32>, tensor<8x16xf32>
    })",
                                                            &ctx);
  ASSERT_TRUE(module);
  PassManager pm(&ctx);
  sbp::SbpMicroBatchesOptions options;
  options.count = 3;
  pm.addPass(sbp::createSbpMicroBatches(options));
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto fn = *module->getOps<func::FuncOp>().begin();
  Plans plans({{"x"}, {2}});
  FailureOr<search::SearchProblem> tied = plans.problemOf(fn);
  FailureOr<search::SearchProblem> untied = plans.problemOf(fn, /*tieMicroBatches=*/false);
  std::string error;
  ASSERT_TRUE(succeeded(tied) && succeeded(untied));
  // Micro-batches 1 and 2: three ops slice the input, five compute.
  EXPECT_EQ(tied->tiedCopies(), 2u * 8u);
  EXPECT_EQ(untied->tiedCopies(), 0u);
  EXPECT_EQ(tied->nodes().size() + tied->tiedCopies(), untied->nodes().size());

  std::optional<search::Solution> tiedBest = search::solveExact(*tied, search::ExactBudget{}, error);
  ASSERT_TRUE(tiedBest) << error;
  std::optional<search::Solution> untiedBest =
      search::solveExact(*untied, search::ExactBudget{}, error);
  ASSERT_TRUE(untiedBest) << error;
  // Every plan of D-Rec's and the optimum, carried to the copies; and the
  // optimum with a copied op that reads a parameter in another layout.
  std::vector<size_t> moved = tiedBest->choice;
  for (auto [n, node] : llvm::enumerate(tied->nodes()))
    for (auto [k, shared] : llvm::enumerate(node.sharedInput)) {
      const search::Source &source = tied->source(n, k);
      if (shared != search::Node::kOnce || source.node < 0 || moved != tiedBest->choice)
        continue;
      int from = tied->nodes()[source.node].outputLayout(moved[source.node], source.output);
      for (size_t c = 0; c < node.numChoices() && moved == tiedBest->choice; ++c)
        if (node.inputLayout(c, k) != from)
          moved[n] = c;
    }
  ASSERT_NE(moved, tiedBest->choice);
  double againAtMost = 0;
  for (const std::vector<size_t> &plan :
       {tiedBest->choice, search::solveDRec(*tied).choice, moved}) {
    std::vector<size_t> carried = carryChoices(*tied, plan, *untied);
    double seconds = search::evaluate(*untied, carried);
    // What the untied problem pays again for each copy's shared reads.
    double again = 0;
    for (auto [n, node] : llvm::enumerate(tied->nodes()))
      for (auto [k, shared] : llvm::enumerate(node.sharedInput)) {
        if (shared != search::Node::kOnce)
          continue;
        const search::Source &source = tied->source(n, k);
        int from = source.node < 0
                       ? source.fixed
                       : tied->nodes()[source.node].outputLayout(plan[source.node], source.output);
        again += (node.weight - 1) * tied->inputSeconds(n, k, plan[n], from);
      }
    againAtMost = std::max(againAtMost, again);
    EXPECT_NEAR(search::evaluate(*tied, plan) + again, seconds, 1e-12 * seconds);
    EXPECT_DOUBLE_EQ(search::planMemory(*tied, plan), search::planMemory(*untied, carried));
    EXPECT_LE(untiedBest->seconds, seconds * (1 + 1e-12));
  }
  EXPECT_GT(againAtMost, 0.0);
  EXPECT_NEAR(tiedBest->seconds, search::evaluate(*tied, tiedBest->choice), 1e-12 * tiedBest->seconds);
}

TEST_F(ExactSearchTest, ZeroViewsCostTheSamePlans) {
  // A training step of an MLP of two layers in two micro-batches (AdamW)
  // on dp=2. Under ZeRO-3's view (setZero) each update reads a
  // micro-batch's gradient besides their sum and defines the parameter as
  // stored, and the forward's and backward's reads of the parameter come
  // from there; the choices stay the same, and going back to stage 0
  // costs every plan as a fresh problem does.
  MlpOptions mlp;
  mlp.batch = 8;
  mlp.inputs = 8;
  mlp.hidden = 16;
  mlp.outputs = 4;
  mlp.loss = true;
  std::string error;
  GeneratedModel generated = buildMlp(&ctx, mlp, error);
  ASSERT_TRUE(generated.module) << error;
  OwningOpRef<ModuleOp> module = std::move(generated.module);
  PassManager pm(&ctx);
  pm.addPass(graph::createGraphAutodiff());
  sbp::SbpMicroBatchesOptions micro;
  micro.count = 2;
  pm.addPass(sbp::createSbpMicroBatches(micro));
  pm.addPass(graph::createGraphOptimizer());
  ASSERT_TRUE(succeeded(pm.run(*module)));
  auto fn = *module->getOps<func::FuncOp>().begin();
  Plans plans({{"dp"}, {2}});
  FailureOr<search::SearchProblem> problem = plans.problemOf(fn);
  FailureOr<search::SearchProblem> fresh = plans.problemOf(fn);
  ASSERT_TRUE(succeeded(problem) && succeeded(fresh));
  std::optional<search::Solution> plain =
      search::solveExact(*problem, search::ExactBudget{}, error);
  ASSERT_TRUE(plain) << error;
  std::vector<std::vector<size_t>> plans3 = {plain->choice, search::solveDRec(*problem).choice};

  problem->setZero(3, {0});
  size_t updates = 0;
  for (auto [n, node] : llvm::enumerate(problem->nodes())) {
    if (!node.op || !sbp::updateStateOperands(node.op))
      continue;
    ++updates;
    // The sum of two micro-batches' gradients, and one of them.
    EXPECT_EQ(node.inputs.size(), node.op->getNumOperands() + 1);
    EXPECT_EQ(node.outputs.size(), node.op->getNumResults() + 1);
    EXPECT_EQ(node.inputs.back(), node.inputs[1].getDefiningOp()->getOperand(1));
    // The parameter's other readers read what the update defines.
    size_t stored = node.outputs.size() - 1;
    EXPECT_FALSE(problem->uses(n, stored).empty());
    for (auto [m, k] : problem->uses(n, stored))
      EXPECT_EQ(problem->nodes()[m].inputs[k], node.inputs[0]);
    // Gathered before each use where a choice stores it split.
    bool anySplit = false;
    for (size_t c = 0; c < node.numChoices(); ++c) {
      int id = node.outputLayout(c, stored);
      bool split = problem->layout(id)[0].isSplit();
      anySplit |= split;
      EXPECT_EQ(problem->gatheredAtEachUse(node.inputs[0], id), split);
    }
    EXPECT_TRUE(anySplit);
  }
  EXPECT_EQ(updates, 4u); // two weights, two biases
  std::optional<search::Solution> zero3 =
      search::solveExact(*problem, search::ExactBudget{}, error);
  ASSERT_TRUE(zero3) << error;
  EXPECT_NEAR(zero3->seconds, search::evaluate(*problem, zero3->choice), 1e-12 * zero3->seconds);
  plans3.push_back(zero3->choice);

  problem->setZero(0, {});
  for (const std::vector<size_t> &plan : plans3) {
    EXPECT_DOUBLE_EQ(search::evaluate(*problem, plan), search::evaluate(*fresh, plan));
    EXPECT_DOUBLE_EQ(search::planMemory(*problem, plan), search::planMemory(*fresh, plan));
  }
  for (auto [node, base] : llvm::zip(problem->nodes(), fresh->nodes())) {
    EXPECT_EQ(node.inputs.size(), base.inputs.size());
    EXPECT_EQ(node.outputs.size(), base.outputs.size());
  }
}

TEST_F(ExactSearchTest, MicroBatchCopiesThatReadOtherwiseStayFree) {
  // Marked by hand: %a1 and %b1 copy %a0 and %b0 (%b1 reads its own %a1
  // and the same %x), but %c1 reads its micro-batch's values in the other
  // order than %c0 does, and so is a node of its own.
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"(
    func.func @f(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
      %a0 = graph.relu %x {sbp.micro_batch = 0 : i64} : tensor<8x8xf32>
      %b0 = graph.add %a0, %x {sbp.micro_batch = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %c0 = graph.matmul %a0, %b0 {sbp.micro_batch = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %a1 = graph.relu %x {sbp.micro_batch = 1 : i64} : tensor<8x8xf32>
      %b1 = graph.add %a1, %x {sbp.micro_batch = 1 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %c1 = graph.matmul %b1, %a1 {sbp.micro_batch = 1 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      return %c0, %c1 : tensor<8x8xf32>, tensor<8x8xf32>
    })",
                                                            &ctx);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  Plans plans({{"x"}, {2}});
  FailureOr<search::SearchProblem> problem = plans.problemOf(fn);
  ASSERT_TRUE(succeeded(problem));
  EXPECT_EQ(problem->tiedCopies(), 2u);
  std::vector<Operation *> ops;
  for (Operation &op : fn.getBody().front().without_terminator())
    ops.push_back(&op);
  EXPECT_EQ(problem->nodeOf(ops[3]), problem->nodeOf(ops[0]));
  EXPECT_EQ(problem->nodeOf(ops[4]), problem->nodeOf(ops[1]));
  EXPECT_NE(problem->nodeOf(ops[5]), problem->nodeOf(ops[2]));
  EXPECT_EQ(problem->nodes()[problem->nodeOf(ops[0])].weight, 2.0);
  EXPECT_EQ(problem->nodes()[problem->nodeOf(ops[2])].weight, 1.0);
}

/// A pipeline of `stages` whose stages hold `inFlight` micro-batches at
/// once, each one chunk (the cut's shape as a 1F1B-like schedule would
/// make it), for a device of `limit` bytes (0: cut by time).
search::PipelineShare pipelineOf(int64_t stages, std::vector<double> inFlight, double limit) {
  search::PipelineShare share;
  share.cut.stages = stages;
  share.cut.memoryLimit = limit;
  share.cut.inFlight = inFlight;
  for (double held : inFlight)
    share.cut.heldTogether.push_back({{held}});
  share.inFlight = std::move(inFlight);
  return share;
}

/// Micro-batch 0's forward leaves %h0 and %y0 for its backward (%g0).
constexpr const char *kForwardAndBackward = R"(
    func.func @f(%x: tensor<64x64xf32> {graph.input = "x"},
                 %w: tensor<64x64xf32> {graph.param = "w"}) -> tensor<64x64xf32> {
      %h0 = graph.matmul %x, %w {sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %y0 = graph.relu %h0 {sbp.micro_batch = 0 : i64} : tensor<64x64xf32>
      %g0 = graph.mul %y0, %h0 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      return %g0 : tensor<64x64xf32>
    }
  )";

/// planMemory on a pipeline of `stages` (pipelineOf).
/// planMemory of a pipeline's shape; `stretch`, the last call's.
struct PipelineMemory {
  std::function<double(int64_t, std::vector<double>, double, double *)> of;
  mutable double stretch = 1;
  double operator()(int64_t stages, std::vector<double> inFlight, double limit) const {
    return of(stages, std::move(inFlight), limit, &stretch);
  }
};
/// Calls `check` with the PipelineMemory of the step `source`, each node
/// laid out by its first choice on one device.
void withPipelineMemory(MLIRContext &ctx, const char *source,
                        llvm::function_ref<void(const PipelineMemory &)> check) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  Plans plans({{"x"}, {1}});
  FailureOr<search::SearchProblem> problem = plans.problemOf(fn);
  ASSERT_TRUE(succeeded(problem));
  std::vector<size_t> plan(problem->nodes().size(), 0);
  check(PipelineMemory{
      [&](int64_t stages, std::vector<double> inFlight, double limit, double *stretch) {
        return search::planMemory(*problem, plan, pipelineOf(stages, std::move(inFlight), limit),
                                  stretch);
      }});
}

TEST_F(ExactSearchTest, PipelineMemoryFollowsTheCut) {
  withPipelineMemory(ctx, kForwardAndBackward, [&](const PipelineMemory &memory) {
    // Its two blocks (each op its own) are fewer than the stages: shares of
    // the model. What each stage of an even cut holds: shared / N +
    // working, and the stash once more for each further micro-batch in
    // flight.
    double three = memory(3, {1, 1, 1}, 0), four = memory(4, {1, 1, 1, 1}, 0);
    double shared = 12 * (three - four), working = three - shared / 3;
    double stash = 4 * (memory(4, {2, 2, 2, 2}, 0) - four);
    ASSERT_GT(stash, 0);
    ASSERT_GT(shared, 0);
    // 1F1B on 4 stages: cut by time, the first stage (4 in flight) is the
    // fullest, where it fits.
    std::vector<double> oneF1B = {4, 3, 2, 1};
    double byTime = memory(4, oneF1B, 0);
    EXPECT_NEAR(byTime, (shared + 3 * stash) / 4 + working, 1e-9 * byTime);
    EXPECT_DOUBLE_EQ(memory(4, oneF1B, 2 * byTime), byTime);
    // Where it does not, the cut balances memory: shares inversely
    // proportional to what a whole model would hold on each stage.
    double inverse = 0;
    for (double held : oneF1B)
      inverse += 1 / (shared + (held - 1) * stash);
    double balanced = memory(4, oneF1B, byTime / 2);
    EXPECT_NEAR(balanced, 1 / inverse + working, 1e-9 * balanced);
    // The last stage, the leanest in flight, takes the largest share of
    // the compute: N times it, against 1/N each by time.
    EXPECT_NEAR(memory.stretch, 4 / (shared * inverse), 1e-9);
    EXPECT_LT(balanced, byTime);
    EXPECT_GT(balanced, four);
    // Equal stages in flight: nothing to balance.
    EXPECT_NEAR(memory(4, {2, 2, 2, 2}, 1), memory(4, {2, 2, 2, 2}, 0), 1e-9 * four);
  });
}

/// Three blocks of different sizes, each leaving its product for the
/// backward: %a0 16 KiB, %a1 32 KiB, %a2 24 KiB (kept on its own block's
/// stage: no other block's forward reads it; the GELU of it that the next
/// block reads, the backward does not). Their products' compute is in the
/// ratio 1 : 2 : 3.
constexpr const char *kThreeBlocks = R"(
    func.func @f(%x: tensor<64x64xf32> {graph.input = "x"},
                 %w0: tensor<64x64xf32> {graph.param = "w0"},
                 %w1: tensor<64x128xf32> {graph.param = "w1"},
                 %w2: tensor<128x96xf32> {graph.param = "w2"})
        -> (tensor<64x64xf32>, tensor<64x128xf32>, tensor<64x96xf32>) {
      %a0 = graph.matmul %x, %w0 {graph.region = "l0", sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %h0 = graph.gelu %a0 {graph.region = "l0", sbp.micro_batch = 0 : i64} : tensor<64x64xf32>
      %a1 = graph.matmul %h0, %w1 {graph.region = "l1", sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      %h1 = graph.gelu %a1 {graph.region = "l1", sbp.micro_batch = 0 : i64} : tensor<64x128xf32>
      %a2 = graph.matmul %h1, %w2 {graph.region = "l2", sbp.micro_batch = 0 : i64} : (tensor<64x128xf32>, tensor<128x96xf32>) -> tensor<64x96xf32>
      %g2 = graph.mul %a2, %a2 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x96xf32>, tensor<64x96xf32>) -> tensor<64x96xf32>
      %g1 = graph.mul %a1, %a1 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>
      %g0 = graph.mul %a0, %a0 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      return %g0, %g1, %g2 : tensor<64x64xf32>, tensor<64x128xf32>, tensor<64x96xf32>
    }
  )";

TEST_F(ExactSearchTest, PipelineMemoryOfWholeBlocks) {
  withPipelineMemory(ctx, kThreeBlocks, [&](const PipelineMemory &memory) {
    // Three stages, a block each: one more micro-batch in flight on the
    // first stage (where it holds enough to be the fullest) costs its own
    // block's stash, not a third of the model's (which would be 24 KiB).
    EXPECT_DOUBLE_EQ(memory(3, {4, 1, 1}, 0) - memory(3, {3, 1, 1}, 0), 16384);
    // (The last stage, where it holds enough to be the fullest.)
    EXPECT_DOUBLE_EQ(memory(3, {1, 1, 10}, 0) - memory(3, {1, 1, 9}, 0), 24576);
    // Two stages: by time, the first takes l0 and l1 (3 against 3; l0
    // alone, 1 against 5), and holds their stashes twice; for a device of
    // less, the cut gives it l0 alone, the leaner (by 20 KiB: the second
    // stage, now the fullest, holds a1 once where the first held a0 and
    // a1 twice, and l1's share of the rest).
    double byTime = memory(2, {2, 1}, 0);
    EXPECT_EQ(memory.stretch, 1);
    double byMemory = memory(2, {2, 1}, byTime - 1);
    EXPECT_LT(byMemory, byTime - 16384);
    // That cut's slowest chunk (l1 and l2) is slower than the time cut's
    // (l0 and l1): the search prices the plan so much slower.
    EXPECT_GT(memory.stretch, 1.05);
    EXPECT_DOUBLE_EQ(memory(2, {2, 1}, byTime), byTime);
    // A device smaller than any cut: the leanest, still.
    EXPECT_DOUBLE_EQ(memory(2, {2, 1}, 1), byMemory);
  });
}

TEST_F(ExactSearchTest, PipelineStashIsKeptWhereTheForwardReadsIt) {
  // l1 reads %h0 (16 KiB), which the backward reads too: the stage of l1
  // receives it and keeps it for the backward, once per micro-batch in
  // flight; l0's stage sends it on and keeps nothing.
  withPipelineMemory(ctx, R"(
    func.func @f(%x: tensor<64x64xf32> {graph.input = "x"},
                 %w0: tensor<64x64xf32> {graph.param = "w0"},
                 %w1: tensor<64x64xf32> {graph.param = "w1"})
        -> (tensor<64x64xf32>, tensor<64x64xf32>) {
      %h0 = graph.matmul %x, %w0 {graph.region = "l0", sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %h1 = graph.matmul %h0, %w1 {graph.region = "l1", sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %g0 = graph.mul %h0, %h0 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      return %h1, %g0 : tensor<64x64xf32>, tensor<64x64xf32>
    }
  )",
                     [&](const PipelineMemory &memory) {
                       EXPECT_DOUBLE_EQ(memory(2, {1, 10}, 0) - memory(2, {1, 9}, 0), 16384);
                       EXPECT_DOUBLE_EQ(memory(2, {10, 1}, 0), memory(2, {9, 1}, 0));
                     });
}

TEST_F(ExactSearchTest, PipelineStashHoldsCopiesTheBackwardReads) {
  // Plans where the matmul stores %h0 in one layout and the relu (of the
  // forward) and the mul (of the backward) read it in another: under a
  // pipeline the copy waits for the backward with %h0 and %y0, once per
  // micro-batch in flight (as a layer's input gathered for the forward
  // and kept for the recomputation).
  StepOnTwoDevices step(ctx, kForwardAndBackward);
  ASSERT_TRUE(step.problem);
  search::SearchProblem *problem = &*step.problem;
  const std::vector<Operation *> &ops = step.ops;
  size_t matmul = problem->nodeOf(ops[0]), relu = problem->nodeOf(ops[1]),
         mul = problem->nodeOf(ops[2]);
  const auto &nodes = problem->nodes();
  int found =
      forEachChoiceOf(*problem, {matmul, relu, mul}, [&](std::vector<size_t> &plan) {
        size_t m = plan[matmul], r = plan[relu], g = plan[mul];
        int stored = nodes[matmul].outputLayout(m, 0), copy = nodes[relu].inputLayout(r, 0);
        if (stored == copy || nodes[mul].inputLayout(g, 1) != copy ||
            nodes[mul].inputLayout(g, 0) != nodes[relu].outputLayout(r, 0))
          return false;
        double stash = 4 * (search::planMemory(*problem, plan, pipelineOf(4, {2, 2, 2, 2}, 0)) -
                            search::planMemory(*problem, plan, pipelineOf(4, {1, 1, 1, 1}, 0)));
        double kept = problem->localBytes(ops[0]->getResult(0), stored) +
                      problem->localBytes(ops[0]->getResult(0), copy) +
                      problem->localBytes(ops[1]->getResult(0), nodes[relu].outputLayout(r, 0));
        EXPECT_NEAR(stash, kept, 1e-9 * kept)
            << sbprt::toString(problem->layout(stored)) << " read as "
            << sbprt::toString(problem->layout(copy));
        return true;
      });
  EXPECT_GT(found, 0);
}

TEST_F(ExactSearchTest, PipelineWorkingSetHoldsCopiesTheBackwardMakes) {
  // Plans where the relu reads %h0 as the first matmul stores it and the
  // backward's matmul reads it in another layout, split or whole: that
  // copy is made in the backward, of the working set every stage has whole
  // (as ZeRO-3's gathered weights of a layer's recomputed forward and
  // backward are), not of the rest each stage has a share of.
  StepOnTwoDevices step(ctx, R"(
    func.func @f(%x: tensor<64x64xf32> {graph.input = "x"},
                 %w: tensor<64x64xf32> {graph.param = "w"}) -> tensor<64x64xf32> {
      %h0 = graph.matmul %x, %w {sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %y0 = graph.relu %h0 {sbp.micro_batch = 0 : i64} : tensor<64x64xf32>
      %g0 = graph.matmul %h0, %y0 {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %r0 = graph.relu %g0 {graph.backward, sbp.micro_batch = 0 : i64} : tensor<64x64xf32>
      return %r0 : tensor<64x64xf32>
    }
  )");
  ASSERT_TRUE(step.problem);
  search::SearchProblem *problem = &*step.problem;
  const std::vector<Operation *> &ops = step.ops;
  size_t matmul = problem->nodeOf(ops[0]), relu = problem->nodeOf(ops[1]),
         mul = problem->nodeOf(ops[2]), last = problem->nodeOf(ops[3]);
  const auto &nodes = problem->nodes();
  int found = forEachChoiceOf(*problem, {matmul, relu, mul}, [&](std::vector<size_t> &plan) {
    size_t m = plan[matmul], r = plan[relu], g = plan[mul];
    int stored = nodes[matmul].outputLayout(m, 0), copy = nodes[mul].inputLayout(g, 0);
    if (stored == copy || problem->layout(copy)[0].isPartial() ||
        nodes[relu].inputLayout(r, 0) != stored ||
        nodes[mul].inputLayout(g, 1) != nodes[relu].outputLayout(r, 0))
      return false;
    // The last relu reads %g0 as it is made (so that the peak stays at
    // %g0).
    size_t &l = plan[last];
    for (l = 0; l < nodes[last].numChoices() &&
                nodes[last].inputLayout(l, 0) != nodes[mul].outputLayout(g, 0);
         ++l)
      ;
    if (l == nodes[last].numChoices()) {
      l = 0;
      return false;
    }
    // Shares of the model (as PipelineMemoryFollowsTheCut): each
    // stage holds shared / N + working, what the backward has live at
    // %g0 (the peak).
    double three = search::planMemory(*problem, plan, pipelineOf(3, {1, 1, 1}, 0)),
           four = search::planMemory(*problem, plan, pipelineOf(4, {1, 1, 1, 1}, 0));
    double working = three - 12 * (three - four) / 3;
    double made = problem->localBytes(ops[0]->getResult(0), copy) +
                  problem->localBytes(ops[2]->getResult(0), nodes[mul].outputLayout(g, 0));
    EXPECT_NEAR(working, made, 1e-9 * made)
        << sbprt::toString(problem->layout(stored)) << " read as "
        << sbprt::toString(problem->layout(copy));
    l = 0;
    return true;
  });
  EXPECT_GT(found, 0);
}

TEST_F(ExactSearchTest, PipelineStashLeavesOutCopiesOfParameters) {
  // Both micro-batches' forwards and backwards read %w: where they read
  // it in another layout than it is stored in, one copy serves the whole
  // step, held once, not once per micro-batch in flight. The stash is
  // micro-batch 0's %h0 alone.
  StepOnTwoDevices step(ctx, R"(
    func.func @f(%x: tensor<64x64xf32> {graph.input = "x"},
                 %w: tensor<64x64xf32> {graph.param = "w"}) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
      %h0 = graph.matmul %x, %w {sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %g0 = graph.matmul %h0, %w {graph.backward, sbp.micro_batch = 0 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %h1 = graph.matmul %x, %w {sbp.micro_batch = 1 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      %g1 = graph.matmul %h1, %w {graph.backward, sbp.micro_batch = 1 : i64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
      return %g0, %g1 : tensor<64x64xf32>, tensor<64x64xf32>
    }
  )");
  ASSERT_TRUE(step.problem);
  search::SearchProblem *problem = &*step.problem;
  const std::vector<Operation *> &ops = step.ops;
  const auto &nodes = problem->nodes();
  size_t forward = problem->nodeOf(ops[0]), backward = problem->nodeOf(ops[1]);
  ASSERT_EQ(problem->nodeOf(ops[2]), forward); // micro-batch 1's, tied to 0's
  size_t weight = nodes.size();
  for (auto [n, node] : llvm::enumerate(nodes))
    if (!node.op && node.argument == step.fn.getArgument(1))
      weight = n;
  ASSERT_LT(weight, nodes.size());
  int found =
      forEachChoiceOf(*problem, {weight, forward, backward}, [&](std::vector<size_t> &plan) {
        size_t c = plan[weight], f = plan[forward], b = plan[backward];
        int stored = nodes[weight].outputLayout(c, 0), read = nodes[forward].inputLayout(f, 1);
        if (stored == read || nodes[backward].inputLayout(b, 1) != read ||
            nodes[backward].inputLayout(b, 0) != nodes[forward].outputLayout(f, 0))
          return false;
        double stash = 4 * (search::planMemory(*problem, plan, pipelineOf(4, {2, 2, 2, 2}, 0)) -
                            search::planMemory(*problem, plan, pipelineOf(4, {1, 1, 1, 1}, 0)));
        double kept = problem->localBytes(ops[0]->getResult(0), nodes[forward].outputLayout(f, 0));
        EXPECT_NEAR(stash, kept, 1e-9 * kept)
            << sbprt::toString(problem->layout(stored)) << " read as "
            << sbprt::toString(problem->layout(read));
        return true;
      });
  EXPECT_GT(found, 0);
}

} // namespace
