// graph::findFusedAttention, which the memory estimates use, against what
// --exec-fuse does: on every case of exec-fuse-attention.mlir (the fused
// and those that must stay apart) but those that start from an
// exec.attention, the cores it finds are the exec.attention and
// exec.attention_grad ops the pass makes, and the values it leaves out of
// memory are the ones the pass removes. And the search's memory of a plan,
// which counts a core's values only where the plan breaks it.
#include "compiler/Cost/CostModel.h"
#include "compiler/Sbp/Signatures.h"
#include "compiler/Search/SearchProblem.h"
#include "dialects/Exec/IR/ExecOps.h"
#include "dialects/Graph/IR/FusedAttention.h"
#include "dialects/Sbp/IR/SbpOps.h"
#include "passes/Exec/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

using namespace mlir;
using namespace sbpc;

namespace {

struct Counts {
  size_t forwards = 0, backwards = 0;
  bool operator==(const Counts &o) const {
    return forwards == o.forwards && backwards == o.backwards;
  }
};

std::ostream &operator<<(std::ostream &os, const Counts &c) {
  return os << c.forwards << " exec.attention, " << c.backwards << " exec.attention_grad";
}

/// A value as its op's location, its result number and its type.
std::string keyOf(Value v) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto result = cast<OpResult>(v);
  os << result.getOwner()->getLoc() << " #" << result.getResultNumber() << " " << v.getType();
  return text;
}

TEST(FusedAttentionTest, FindsWhatExecFuseFuses) {
  auto file = llvm::MemoryBuffer::getFile(SBPC_SOURCE_DIR "/test/Transforms/exec-fuse-attention.mlir");
  ASSERT_TRUE(file) << "cannot read exec-fuse-attention.mlir";
  DialectRegistry registry;
  registry.insert<func::FuncDialect, graph::GraphDialect, exec::ExecDialect, sbp::SbpDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  SmallVector<StringRef> chunks;
  (*file)->getBuffer().split(chunks, "// -----");
  size_t functions = 0, fusing = 0;
  for (StringRef chunk : chunks) {
    std::string text = chunk.str(); // the parser reads up to a terminating 0
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
    ASSERT_TRUE(module) << chunk.str();
    std::map<std::string, Counts> found, fused;
    // The values the analysis leaves out, and all the block's values, each
    // as where its op is, which result and its type: the pass keeps an op's
    // location on what replaces it.
    std::set<std::string> unstored, before, after;
    // A graph never holds an exec.attention: the cases that start from one
    // are the pass's alone.
    llvm::DenseSet<Operation *> skipped;
    for (auto fn : module->getOps<func::FuncOp>())
      if (fn.walk([](exec::AttentionOp) { return WalkResult::interrupt(); }).wasInterrupted())
        skipped.insert(fn);
    auto inBf16 = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getElementType().isBF16();
    };
    for (auto fn : module->getOps<func::FuncOp>()) {
      if (skipped.contains(fn))
        continue;
      graph::FusedAttention attention = graph::findFusedAttention(fn.getBody().front(), inBf16);
      found[fn.getName().str()] = {attention.forwards, attention.backwards};
      for (const graph::FusedAttention::Core &core : attention.cores) {
        for (Value v : core.unstored)
          unstored.insert(keyOf(v));
        // A backward keeps one of the values it leaves out: its forward's
        // probabilities, as their log-sum-exp.
        EXPECT_EQ(!core.logSumExp, !core.backward);
        EXPECT_TRUE(!core.logSumExp || attention.coreOf.count(core.logSumExp));
      }
      for (Operation &op : fn.getBody().front())
        for (Value v : op.getResults())
          before.insert(keyOf(v));
    }
    PassManager pm(&ctx);
    pm.addPass(exec::createExecFuse());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    for (auto fn : module->getOps<func::FuncOp>()) {
      if (skipped.contains(fn))
        continue;
      Counts &counts = fused[fn.getName().str()];
      fn.walk([&](exec::AttentionOp) { ++counts.forwards; });
      fn.walk([&](exec::AttentionGradOp) { ++counts.backwards; });
      fusing += counts.forwards > 0;
      for (Operation &op : fn.getBody().front())
        for (Value v : op.getResults())
          after.insert(keyOf(v));
    }
    EXPECT_EQ(found, fused);
    // Left out: exactly the values that are gone and have a type of those.
    std::set<std::string> gone;
    std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                        std::inserter(gone, gone.end()));
    for (const std::string &key : gone) {
      bool typeOfUnstored = llvm::any_of(unstored, [&](const std::string &u) {
        return u.substr(u.rfind(' ')) == key.substr(key.rfind(' '));
      });
      EXPECT_TRUE(!typeOfUnstored || unstored.count(key)) << key << " is gone but counted";
    }
    for (const std::string &key : unstored)
      EXPECT_TRUE(gone.count(key)) << key << " is stored but left out";
    functions += fused.size();
  }
  // The file has cases of both kinds.
  EXPECT_GE(functions, 5u);
  EXPECT_GE(fusing, 3u);
  EXPECT_LT(fusing, functions);
}

/// The search's memory of a plan counts a core's scores and probabilities
/// only where the plan changes the layout of one of its ops' inputs (the
/// program would then hold them, a collective in the core's middle).
TEST(FusedAttentionTest, PlanMemoryChecksEachCoreAgainstThePlan) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect, graph::GraphDialect, sbp::SbpDialect>();
  registerGraphSbpModels(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  const char *source = R"mlir(
    module attributes {sbp.precision = "bf16", sbp.fused_attention} {
      func.func @f(%q: tensor<4x2x8x16xf32> {graph.input = "q"},
                   %k: tensor<4x2x8x16xf32> {graph.input = "k"},
                   %v: tensor<4x2x8x16xf32> {graph.input = "v"})
          -> (tensor<4x2x8x16xf32> {graph.output = "o"}) {
        %s = graph.matmul %q, %k transpose_rhs : (tensor<4x2x8x16xf32>, tensor<4x2x8x16xf32>) -> tensor<4x2x8x8xf32>
        %p = graph.softmax %s axis = 3 : tensor<4x2x8x8xf32>
        %o = graph.matmul %p, %v : (tensor<4x2x8x8xf32>, tensor<4x2x8x16xf32>) -> tensor<4x2x8x16xf32>
        return %o : tensor<4x2x8x16xf32>
      }
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  sbprt::Mesh mesh{{"x"}, {2}};
  std::string error;
  Cluster cluster = *loadCluster("cpu", error);
  sbp::BoxingPlans plans(mesh, cluster);
  FailureOr<search::SearchProblem> problem = search::SearchProblem::build(fn, mesh, cluster, plans);
  ASSERT_TRUE(succeeded(problem));
  ASSERT_EQ(problem->coreInputs().size(), 1u);
  // Every node's signature splitting every tensor along `dim` (the
  // softmax's along `softmaxDim`).
  auto planSplitting = [&](int64_t dim, int64_t softmaxDim) {
    std::vector<size_t> choice;
    for (const search::Node &node : problem->nodes()) {
      int64_t d = node.op && isa<graph::SoftmaxOp>(node.op) ? softmaxDim : dim;
      sbprt::NdSbp split{sbprt::Sbp::split(d)};
      std::optional<size_t> found;
      for (size_t c = 0; c < node.numChoices() && !found; ++c) {
        const auto &sig = node.candidates->sigs[c];
        if (llvm::all_of(sig.operands, [&](const sbprt::NdSbp &l) { return l == split; }) &&
            llvm::all_of(sig.results, [&](const sbprt::NdSbp &l) { return l == split; }))
          found = c;
      }
      EXPECT_TRUE(found.has_value());
      choice.push_back(found.value_or(0));
    }
    return choice;
  };
  // In bf16 on two ranks: q, k and v 1024 bytes each; the output 1024, the
  // scores and the probabilities 512 each.
  EXPECT_EQ(search::planMemory(*problem, planSplitting(0, 0)), 3 * 1024 + 1024);
  // The softmax split by heads between products split by batch: the
  // scores and the probabilities are stored, the probabilities beside
  // their reshard (split by batch again) and the output at its product.
  EXPECT_EQ(search::planMemory(*problem, planSplitting(0, 1)), 3 * 1024 + 512 + 512 + 1024);
}

} // namespace
