// Tests boxing plans: the 1-D table of DESIGN.md §4, and every nd pair on a
// 2x2 mesh applied on the simulated mesh.
#include "compiler/Sbp/BoxingPlanner.h"
#include "test/unit/TensorTestUtil.h"

#include <gtest/gtest.h>

#include <random>

using namespace sbpc;
using namespace sbprt;
using sbprt::testing::dyadicTensor;
using sbprt::testing::expectSame;

namespace {

std::vector<Sbp> allSbps() {
  return {Sbp::broadcast(), Sbp::split(0), Sbp::split(1), Sbp::partial(Sbp::Reduce::Sum),
          Sbp::partial(Sbp::Reduce::Max)};
}

Cluster cluster() {
  std::string error;
  return *loadCluster("dgx-h100-cluster", error);
}

/// Runs `plan` on shards of `global` laid out as `from` and checks the result
/// holds `global` laid out as `to`; every step must be a direct hop.
void expectPlanPreservesValue(const Mesh &mesh, const NdSbp &from, const NdSbp &to,
                              const BoxingPlan &plan, const Tensor &global) {
  sim::Shards shards = sim::distribute(global, mesh, from, 17);
  NdSbp current = from;
  for (const BoxingStep &step : plan.steps) {
    ASSERT_TRUE(sim::isDirectHop(current, step.hop)) << toString(current);
    ASSERT_EQ(current[step.hop.axis], step.hop.from);
    sim::applyHop(shards, mesh, step.hop);
    current[step.hop.axis] = step.hop.to;
  }
  EXPECT_EQ(toString(to), toString(current));
  expectSame(global, sim::assemble(shards, mesh, to));
}

TEST(BoxingPlannerTest, OneDimensionalPairsFollowTheTable) {
  Mesh mesh{{"x"}, {4}};
  Tensor global = dyadicTensor({8, 8}, 1);
  const double t = 8 * 8 * 4; // bytes of the global tensor
  for (const Sbp &from : allSbps())
    for (const Sbp &to : allSbps()) {
      SCOPED_TRACE(from.str() + " -> " + to.str());
      std::string error;
      std::optional<BoxingPlan> plan =
          planBoxing(mesh, {from}, {to}, global.shape(), 4, cluster(), error);
      ASSERT_TRUE(plan) << error;
      ASSERT_EQ(from == to ? 0u : 1u, plan->steps.size());
      expectPlanPreservesValue(mesh, {from}, {to}, *plan, global);
      if (from == to)
        continue;
      const std::string &c = plan->steps[0].collective;
      double expected = c == "all-gather" || c == "reduce-scatter" ? 3 * t / 4
                        : c == "all-reduce"                        ? 2 * 3 * t / 4
                        : c == "all-to-all"                        ? 3 * t / 16
                                                                   : 0.0;
      EXPECT_DOUBLE_EQ(expected, plan->bytesPerRank) << c;
      // Local changes send nothing but copy: a slice writes a quarter, a
      // zero-pad or keep-one the whole tensor, read and written.
      if (expected == 0) {
        double written = c == "local-slice" ? t / 4 : t;
        EXPECT_DOUBLE_EQ(2 * written / cluster().memoryBandwidth, plan->seconds) << c;
      } else {
        EXPECT_GT(plan->seconds, 2 * t / cluster().memoryBandwidth) << c;
      }
    }
}

TEST(BoxingPlannerTest, TheTableNamesTheCollectives) {
  EXPECT_STREQ("all-gather", sim::collectiveOf(Sbp::split(0), Sbp::broadcast()));
  EXPECT_STREQ("all-to-all", sim::collectiveOf(Sbp::split(0), Sbp::split(1)));
  EXPECT_STREQ("all-reduce", sim::collectiveOf(Sbp::partial(), Sbp::broadcast()));
  EXPECT_STREQ("reduce-scatter", sim::collectiveOf(Sbp::partial(), Sbp::split(1)));
  EXPECT_STREQ("local-slice", sim::collectiveOf(Sbp::broadcast(), Sbp::split(0)));
  EXPECT_STREQ("local-keep-one", sim::collectiveOf(Sbp::broadcast(), Sbp::partial()));
  EXPECT_STREQ("local-zero-pad", sim::collectiveOf(Sbp::split(1), Sbp::partial()));
}

TEST(BoxingPlannerTest, EveryPairOnATwoByTwoMeshPreservesTheValue) {
  Mesh mesh{{"a", "b"}, {2, 2}};
  Tensor global = dyadicTensor({4, 4}, 2);
  std::vector<NdSbp> layouts;
  for (const Sbp &x : allSbps())
    for (const Sbp &y : allSbps())
      if (checkLayout(mesh, {x, y}, global.shape()).empty())
        layouts.push_back({x, y});
  ASSERT_EQ(23u, layouts.size()); // 25 less the two that mix P(sum) and P(max)
  for (const NdSbp &from : layouts)
    for (const NdSbp &to : layouts) {
      SCOPED_TRACE(toString(from) + " -> " + toString(to));
      std::string error;
      std::optional<BoxingPlan> plan =
          planBoxing(mesh, from, to, global.shape(), 4, cluster(), error);
      ASSERT_TRUE(plan) << error;
      expectPlanPreservesValue(mesh, from, to, *plan, global);
    }
}

TEST(BoxingPlannerTest, DetoursThroughBroadcastWhenAnInnerSplitBlocksTheWay) {
  // Swapping which axis splits which dimension cannot be done axis by axis
  // directly; the plan gathers one axis first.
  Mesh mesh{{"a", "b"}, {2, 2}};
  std::string error;
  NdSbp from = {Sbp::split(0), Sbp::split(1)}, to = {Sbp::split(1), Sbp::split(0)};
  std::optional<BoxingPlan> plan = planBoxing(mesh, from, to, {4, 4}, 4, cluster(), error);
  ASSERT_TRUE(plan) << error;
  EXPECT_GE(plan->steps.size(), 3u);
  expectPlanPreservesValue(mesh, from, to, *plan, dyadicTensor({4, 4}, 3));
}

TEST(BoxingPlannerTest, ReducesBeforeGatheringWhenThatMovesLess) {
  // [S(0), P(sum)] -> [B, B]: all-reducing the half tensor and then gathering
  // moves less than gathering first and all-reducing the whole tensor.
  Mesh mesh{{"dp", "tp"}, {4, 8}};
  std::string error;
  std::optional<BoxingPlan> plan =
      planBoxing(mesh, {Sbp::split(0), Sbp::partial()}, {Sbp::broadcast(), Sbp::broadcast()},
                 {64, 64}, 4, cluster(), error);
  ASSERT_TRUE(plan) << error;
  ASSERT_EQ(2u, plan->steps.size());
  EXPECT_EQ(1u, plan->steps[0].hop.axis);
  EXPECT_EQ("all-reduce", plan->steps[0].collective);
  // T on tp is the dp shard: 64*64*4/4 bytes; all-reduce moves 2*7/8 of it.
  EXPECT_DOUBLE_EQ(2.0 * 7 / 8 * 64 * 64, plan->steps[0].bytesPerRank);
  EXPECT_EQ("all-gather", plan->steps[1].collective);
  EXPECT_DOUBLE_EQ(3.0 / 4 * 64 * 64 * 4, plan->steps[1].bytesPerRank);
}

TEST(BoxingPlannerTest, RejectsInvalidLayouts) {
  Mesh mesh{{"tp"}, {3}};
  std::string error;
  EXPECT_FALSE(planBoxing(mesh, {Sbp::split(0)}, {Sbp::broadcast()}, {4, 4}, 4, cluster(), error));
  EXPECT_EQ("dimension 0 of size 4 is not divisible by mesh axis 'tp' of size 3", error);
}

} // namespace
