// Tests meshes and layouts (parsing, checks, blocks) and the simulated mesh:
// distributing and assembling every layout, and every hop's collective.
#include "runtime/Layout.h"
#include "runtime/sim/SimulatedMesh.h"
#include "test/unit/TensorTestUtil.h"

#include <gtest/gtest.h>

using namespace sbprt;
using namespace sbprt::sim;
using sbprt::testing::dyadicTensor;
using sbprt::testing::expectSame;

namespace {

/// Every 1-D SBP of a rank-`rank` tensor.
std::vector<Sbp> allSbps(int64_t rank) {
  std::vector<Sbp> all = {Sbp::broadcast(), Sbp::partial(Sbp::Reduce::Sum),
                          Sbp::partial(Sbp::Reduce::Max)};
  for (int64_t d = 0; d < rank; ++d)
    all.push_back(Sbp::split(d));
  return all;
}

/// Every valid nd-SBP on a mesh of `axes` axes for a rank-`rank` tensor.
std::vector<NdSbp> allNdSbps(const Mesh &mesh, const std::vector<int64_t> &shape) {
  size_t axes = mesh.shape.size();
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<NdSbp> layouts = {{}};
  for (size_t a = 0; a < axes; ++a) {
    std::vector<NdSbp> longer;
    for (const NdSbp &prefix : layouts)
      for (const Sbp &s : allSbps(rank)) {
        longer.push_back(prefix);
        longer.back().push_back(s);
      }
    layouts = std::move(longer);
  }
  std::vector<NdSbp> valid;
  for (const NdSbp &layout : layouts)
    if (checkLayout(mesh, layout, shape).empty())
      valid.push_back(layout);
  return valid;
}

TEST(LayoutTest, Prints) {
  EXPECT_EQ("[S(1), P(max), B, P(sum)]",
            toString({Sbp::split(1), Sbp::partial(Sbp::Reduce::Max), Sbp::broadcast(),
                      Sbp::partial(Sbp::Reduce::Sum)}));
}

// program.json stores layouts as text: parsing reverses printing, and
// anything else is refused.
TEST(LayoutTest, ParsesWhatItPrints) {
  for (const NdSbp &layout :
       std::vector<NdSbp>{{Sbp::split(12), Sbp::partial(Sbp::Reduce::Max)},
                          {Sbp::broadcast()},
                          {Sbp::partial(Sbp::Reduce::Sum), Sbp::split(0), Sbp::broadcast()}}) {
    std::optional<NdSbp> parsed = parseLayout(toString(layout));
    ASSERT_TRUE(parsed) << toString(layout);
    EXPECT_EQ(*parsed, layout);
  }
  for (const char *bad : {"", "[", "S(0)", "[S()]", "[S(x)]", "[P(min)]", "[B, Q]", "[S(-1)]"})
    EXPECT_FALSE(parseLayout(bad)) << bad;
}

TEST(LayoutTest, ChecksArityRangeAndDivisibility) {
  Mesh mesh{{"dp", "tp"}, {2, 4}};
  EXPECT_EQ("", checkLayout(mesh, {Sbp::split(0), Sbp::split(1)}, {6, 8}));
  EXPECT_EQ("1 entry for a mesh of 2 axes",
            checkLayout(mesh, {Sbp::split(0)}, {6, 8}));
  EXPECT_EQ("S(2) on mesh axis 'tp' splits dimension 2 of a rank-2 tensor",
            checkLayout(mesh, {Sbp::broadcast(), Sbp::split(2)}, {6, 8}));
  EXPECT_EQ("dimension 1 of size 6 is not divisible by mesh axis 'tp' of size 4",
            checkLayout(mesh, {Sbp::broadcast(), Sbp::split(1)}, {8, 6}));
  EXPECT_EQ("dimension 0 of size 4 is not divisible by mesh axis 'dp' x 'tp' of size 8",
            checkLayout(mesh, {Sbp::split(0), Sbp::split(0)}, {4, 6}));
  EXPECT_EQ("P(sum) and P(max) cannot be mixed",
            checkLayout(mesh, {Sbp::partial(Sbp::Reduce::Sum), Sbp::partial(Sbp::Reduce::Max)},
                        {4, 6}));
}

TEST(LayoutTest, BlocksNestOuterAxisFirst) {
  Mesh mesh{{"a", "b"}, {2, 2}};
  // Rank (1, 0) of [S(0), S(0)] on 8 rows holds quarter 2: rows 4..5.
  Block block = blockOf(mesh, {Sbp::split(0), Sbp::split(0)}, {8, 3}, mesh.rankOf({1, 0}));
  EXPECT_EQ((std::vector<int64_t>{4, 0}), block.offsets);
  EXPECT_EQ((std::vector<int64_t>{2, 3}), block.sizes);
  block = blockOf(mesh, {Sbp::partial(), Sbp::split(1)}, {8, 4}, 3);
  EXPECT_EQ((std::vector<int64_t>{0, 2}), block.offsets);
  EXPECT_EQ((std::vector<int64_t>{8, 2}), block.sizes);
}

TEST(LayoutTest, IndexPlacesNameTheInputsElement) {
  // Rank 1 of [S(0)] on dp=2 holds rows 2..3 of the 4x8 ids: its element
  // 13 is row 3, column 5.
  IndexPlace place{{2, 8}, {2, 0}, {4, 8}, {}, {}, "input 'tokens'"};
  EXPECT_EQ("[3, 5] of input 'tokens'", place.describe(13));
  EXPECT_EQ("[2, 0] of input 'tokens'", place.describe(0));
  // The same ids as micro-batch 1 of 2 of an 8x8 input: rows 1, 3, 5, 7
  // (reshaped to 4x2x8, sliced [:, 1:2, :], reshaped to 4x8). Its row 3
  // is the input's row 7.
  place.slices = {{{4, 1, 8}, {4, 2, 8}, {0, 1, 0}}};
  place.originShape = {8, 8};
  EXPECT_EQ("[7, 5] of input 'tokens'", place.describe(13));
  EXPECT_EQ("[5, 0] of input 'tokens'", place.describe(0));
  // A block that is the whole of ids the graph computed.
  EXPECT_EQ("[1, 2]", (IndexPlace{{2, 3}}.describe(5)));
  EXPECT_EQ("position 5", IndexPlace{}.describe(5));
  // A scalar input's one id.
  EXPECT_EQ("input 'step'", (IndexPlace{{}, {}, {}, {}, {}, "input 'step'"}.describe(0)));
  EXPECT_EQ("target 9 at [1] is out of range for 4 classes",
            (IndexPlace{{2}}.outOfRange("target", 9, 1, 4, "classes")));
}

TEST(LayoutTest, DistributeThenAssembleIsIdentity) {
  Tensor global = dyadicTensor({4, 8}, 7);
  for (const Mesh &mesh : {Mesh{{"x"}, {4}}, Mesh{{"a", "b"}, {2, 2}}}) {
    for (const NdSbp &layout : allNdSbps(mesh, global.shape())) {
      SCOPED_TRACE(toString(layout));
      Shards shards = distribute(global, mesh, layout, 3);
      Block block = blockOf(mesh, layout, global.shape(), 0);
      EXPECT_EQ(block.sizes, shards[0].shape());
      expectSame(global, assemble(shards, mesh, layout));
    }
  }
}

TEST(LayoutTest, PartialShardsAreNotReplicas) {
  // A consumer that treated P as B would read rank 0's shard as the value.
  Tensor global = dyadicTensor({4, 4}, 1);
  Mesh mesh{{"x"}, {2}};
  for (Sbp::Reduce kind : {Sbp::Reduce::Sum, Sbp::Reduce::Max}) {
    Shards shards = distribute(global, mesh, {Sbp::partial(kind)}, 5);
    EXPECT_NE(0, std::memcmp(shards[0].data(), global.data(), global.numBytes()));
  }
}

TEST(LayoutTest, EveryOneDimensionalHopPreservesTheValue) {
  for (int64_t p : {2, 3, 4}) {
    Mesh mesh{{"x"}, {p}};
    Tensor global = dyadicTensor({p * 2, p * 3}, static_cast<unsigned>(p));
    for (const Sbp &from : allSbps(2))
      for (const Sbp &to : allSbps(2)) {
        SCOPED_TRACE("p=" + std::to_string(p) + " " + from.str() + " -> " + to.str() + " (" +
                     collectiveName(collectiveOf(from, to)) + ")");
        Shards shards = distribute(global, mesh, {from}, 11);
        applyHop(shards, mesh, {0, from, to});
        expectSame(global, assemble(shards, mesh, {to}));
        // Splits and broadcasts are layouts of data, not just of sums: the
        // shards must be exactly the ones the target layout describes.
        if (!to.isPartial())
          for (int64_t r = 0; r < p; ++r)
            expectSame(distribute(global, mesh, {to}, 0)[r], shards[r]);
      }
  }
}

TEST(LayoutTest, EveryDirectHopOnATwoByTwoMeshPreservesTheValue) {
  Mesh mesh{{"a", "b"}, {2, 2}};
  Tensor global = dyadicTensor({4, 4}, 9);
  int checked = 0;
  for (const NdSbp &from : allNdSbps(mesh, global.shape()))
    for (size_t axis = 0; axis < 2; ++axis)
      for (const Sbp &to : allSbps(2)) {
        Hop hop{axis, from[axis], to};
        if (!isDirectHop(from, hop))
          continue;
        NdSbp target = from;
        target[axis] = to;
        if (!checkLayout(mesh, target, global.shape()).empty())
          continue;
        SCOPED_TRACE(toString(from) + " -> " + toString(target));
        Shards shards = distribute(global, mesh, from, 13);
        applyHop(shards, mesh, hop);
        expectSame(global, assemble(shards, mesh, target));
        ++checked;
      }
  // 23 layouts x 2 axes x 5 targets, less the hops an inner split forbids
  // and the targets that would mix partial kinds.
  EXPECT_GT(checked, 180);
}

TEST(LayoutTest, HopsUnderAnInnerSplitOfTheSameDimensionAreNotDirect) {
  // Gathering dimension 0 over the outer axis while the inner axis splits it
  // would interleave the blocks: it needs another order.
  EXPECT_FALSE(isDirectHop({Sbp::split(0), Sbp::split(0)}, {0, Sbp::split(0), Sbp::broadcast()}));
  EXPECT_TRUE(isDirectHop({Sbp::split(0), Sbp::split(0)}, {1, Sbp::split(0), Sbp::broadcast()}));
  EXPECT_FALSE(isDirectHop({Sbp::broadcast(), Sbp::split(1)}, {0, Sbp::broadcast(), Sbp::split(1)}));
}

} // namespace

/// The ranks of a data-parallel step share the writing of what they all
/// hold: each replica's writer is one coordinate, the same every time,
/// spread over the axis by the output's name; a pipeline's axis keeps 0.
TEST(LayoutTest, ReplicaWritersSpreadOverTheAxis) {
  std::vector<std::string> names;
  for (int layer = 0; layer < 12; ++layer)
    for (const char *p : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                          "mlp.c_proj.weight", "ln_1.weight", "ln_2.bias"})
      for (const char *state : {"", "optimizer.m.", "optimizer.v."})
        names.push_back(std::string(state) + "h." + std::to_string(layer) + "." + p);
  for (int64_t p : {2, 3, 4, 8}) {
    SCOPED_TRACE(p);
    Mesh mesh{{"pp", "dp"}, {2, p}};
    std::vector<int64_t> count(p, 0);
    for (const std::string &name : names) {
      int64_t writer = mesh.replicaWriter(name, 1);
      ASSERT_GE(writer, 0);
      ASSERT_LT(writer, p);
      EXPECT_EQ(writer, mesh.replicaWriter(name, 1));
      EXPECT_EQ(mesh.replicaWriter(name, 0), 0); // the stage's own ranks
      ++count[writer];
    }
    // Each coordinate writes at least half its even share.
    for (int64_t c = 0; c < p; ++c)
      EXPECT_GE(count[c], static_cast<int64_t>(names.size()) / p / 2) << "coordinate " << c;
  }
  EXPECT_EQ((Mesh{{"x"}, {1}}.replicaWriter("w", 0)), 0);
}
