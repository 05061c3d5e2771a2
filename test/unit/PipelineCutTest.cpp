// Tests the pipeline cut: by time, the slowest chunk as fast as any split
// of whole units makes it; by memory, with one chunk a stage, the fastest
// cut that fits where one does and otherwise the leanest (both against
// every split); under the interleaved schedule, stages that hold what
// their chunks hold together and a cut that fits where the time cut does
// not.
#include "compiler/Sbp/PipelineCut.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

using namespace sbpc::sbp;

namespace {

/// Calls `visit` with every split of `units` units into `parts` contiguous
/// non-empty chunks, as each unit's chunk.
template <typename Visit> void everySplit(size_t units, int64_t parts, Visit visit) {
  std::vector<int64_t> chunkOf(units, 0);
  std::function<void(size_t, int64_t)> from = [&](size_t u, int64_t g) {
    // Unit u begins chunk g; the chunk takes units u to end - 1.
    if (g == parts - 1) {
      std::fill(chunkOf.begin() + u, chunkOf.end(), g);
      visit(chunkOf);
      return;
    }
    for (size_t end = u + 1; end + (parts - 1 - g) <= units; ++end) {
      std::fill(chunkOf.begin() + u, chunkOf.begin() + end, g);
      from(end, g + 1);
    }
  };
  from(0, 0);
}

TEST(PipelineCut, ByTimeTheSlowestChunkIsFastest) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> time(0.1, 1.0);
  for (int round = 0; round < 50; ++round) {
    size_t units = 3 + round % 6;
    int64_t stages = 1 + round % 3;
    CutShape shape = CutShape::of("1f1b", stages, 1, 8, 0);
    std::vector<double> seconds;
    for (size_t u = 0; u < units; ++u)
      seconds.push_back(round % 5 == 0 && u == 1 ? 0.0 : time(random));
    std::vector<CutMemory> memory(units, CutMemory{1, 1, 1});
    PipelineCut cut = cutPipeline(shape, seconds, memory);
    EXPECT_EQ(cut.by, "time");
    ASSERT_EQ(cut.chunkOf.size(), units);
    EXPECT_TRUE(std::is_sorted(cut.chunkOf.begin(), cut.chunkOf.end()));
    double best = std::numeric_limits<double>::infinity();
    everySplit(units, stages, [&](const std::vector<int64_t> &chunkOf) {
      best = std::min(best, cutAt(shape, seconds, memory, chunkOf).slowestSeconds());
    });
    EXPECT_NEAR(cut.slowestSeconds(), best, 1e-9) << "round " << round;
    // What the cut reports is what its units add up to.
    PipelineCut same = cutAt(shape, seconds, memory, cut.chunkOf);
    EXPECT_EQ(same.stageBytes(shape), cut.stageBytes(shape));
    EXPECT_EQ(same.seconds, cut.seconds);
  }
}

TEST(PipelineCut, ByMemoryTheFastestThatFitsElseTheLeanest) {
  // One chunk a stage under 1F1B (stage s holds S - s micro-batches):
  // every split's fullest stage and slowest chunk against the cut's.
  std::mt19937 random(11);
  std::uniform_real_distribution<double> time(0.1, 1.0), bytes(0.0, 10.0);
  int byMemory = 0, leanest = 0;
  for (int round = 0; round < 200; ++round) {
    size_t units = 4 + round % 5;
    int64_t stages = 2 + round % 3;
    std::vector<double> seconds;
    std::vector<CutMemory> memory;
    for (size_t u = 0; u < units; ++u) {
      seconds.push_back(time(random));
      memory.push_back({bytes(random), bytes(random), bytes(random) / 4});
    }
    CutShape unlimited = CutShape::of("1f1b", stages, 1, 8, 0);
    double timeCutBytes = cutPipeline(unlimited, seconds, memory).fullestBytes(unlimited);
    double leanestBytes = std::numeric_limits<double>::infinity();
    everySplit(units, stages, [&](const std::vector<int64_t> &chunkOf) {
      leanestBytes = std::min(leanestBytes,
                              cutAt(unlimited, seconds, memory, chunkOf).fullestBytes(unlimited));
    });
    if (leanestBytes >= timeCutBytes * 0.999)
      continue; // nothing to gain by memory
    // A device between the leanest and the time cut, and one below both.
    for (double limit : {(leanestBytes + timeCutBytes) / 2, leanestBytes * 0.9}) {
      CutShape shape = CutShape::of("1f1b", stages, 1, 8, limit);
      PipelineCut cut = cutPipeline(shape, seconds, memory);
      ASSERT_EQ(cut.by, "memory") << "round " << round;
      ASSERT_TRUE(cut.timeCut);
      EXPECT_NEAR(cut.timeCut->first, timeCutBytes, 1e-9 * timeCutBytes);
      double fastestFitting = std::numeric_limits<double>::infinity();
      everySplit(units, stages, [&](const std::vector<int64_t> &chunkOf) {
        PipelineCut other = cutAt(shape, seconds, memory, chunkOf);
        if (other.fullestBytes(shape) <= limit)
          fastestFitting = std::min(fastestFitting, other.slowestSeconds());
      });
      if (fastestFitting < std::numeric_limits<double>::infinity()) {
        EXPECT_LE(cut.fullestBytes(shape), limit) << "round " << round;
        EXPECT_NEAR(cut.slowestSeconds(), fastestFitting, 1e-9) << "round " << round;
        ++byMemory;
      } else {
        EXPECT_NEAR(cut.fullestBytes(shape), leanestBytes, 1e-5 * leanestBytes)
            << "round " << round;
        ++leanest;
      }
    }
  }
  // Both kinds of case came up.
  EXPECT_GT(byMemory, 20);
  EXPECT_GT(leanest, 20);
}

TEST(PipelineCut, InterleavedStagesHoldWhatTheirChunksHoldTogether) {
  // 2 stages of 2 chunks, 4 micro-batches: chunk c on stage c % 2.
  CutShape shape = CutShape::of("interleaved", 2, 2, 4, 0);
  ASSERT_EQ(shape.inFlight.size(), 4u);
  std::vector<double> seconds(4, 1.0);
  std::vector<CutMemory> memory = {{1, 10, 0}, {2, 20, 3}, {4, 40, 0}, {8, 80, 5}};
  PipelineCut cut = cutPipeline(shape, seconds, memory);
  EXPECT_EQ(cut.chunkOf, (std::vector<int64_t>{0, 1, 2, 3}));
  std::vector<double> onStage = cut.stageBytes(shape);
  for (int64_t s = 0; s < 2; ++s) {
    double stash = 0;
    for (const std::vector<double> &held : shape.heldTogether[s])
      stash = std::max(stash, held[0] * memory[s].stash + held[1] * memory[s + 2].stash);
    double working = std::max(memory[s].working, memory[s + 2].working);
    EXPECT_DOUBLE_EQ(onStage[s], memory[s].step + memory[s + 2].step + stash + working);
    // Less than each chunk at its own most at once.
    EXPECT_LT(stash,
              shape.inFlight[s] * memory[s].stash + shape.inFlight[s + 2] * memory[s + 2].stash)
        << "stage " << s;
  }
}

TEST(PipelineCut, InterleavedCutForMemoryFits) {
  // Eight units, the first four heavy to stash: the time cut (two a
  // chunk) puts two heavy units on each of stage 0's and stage 1's first
  // chunks, which hold the most micro-batches.
  CutShape unlimited = CutShape::of("interleaved", 2, 2, 4, 0);
  std::vector<double> seconds(8, 1.0);
  std::vector<CutMemory> memory;
  for (int u = 0; u < 8; ++u)
    memory.push_back({1, u < 4 ? 10.0 : 1.0, 0});
  PipelineCut timeCut = cutPipeline(unlimited, seconds, memory);
  EXPECT_EQ(timeCut.chunkOf, (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  double timeCutBytes = timeCut.fullestBytes(unlimited);
  double leanest = std::numeric_limits<double>::infinity();
  everySplit(8, 4, [&](const std::vector<int64_t> &chunkOf) {
    leanest = std::min(leanest, cutAt(unlimited, seconds, memory, chunkOf).fullestBytes(unlimited));
  });
  ASSERT_LT(leanest, timeCutBytes);
  CutShape shape = CutShape::of("interleaved", 2, 2, 4, (leanest + timeCutBytes) / 2);
  PipelineCut cut = cutPipeline(shape, seconds, memory);
  EXPECT_EQ(cut.by, "memory");
  EXPECT_LE(cut.fullestBytes(shape), shape.memoryLimit);
  EXPECT_GT(cut.slowestSeconds(), timeCut.slowestSeconds());
  EXPECT_TRUE(std::is_sorted(cut.chunkOf.begin(), cut.chunkOf.end()));
}

TEST(PipelineCut, ByHandTheNamedBlocksBeginChunks) {
  // An embedding outside blocks, three layers, the head outside blocks.
  std::vector<std::string> blocks = {"", "h.0", "h.1", "h.2", ""};
  size_t matched = 0;
  EXPECT_EQ(handCutChunks(blocks, {"h.1"}, matched), (std::vector<int64_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(matched, 1u);
  EXPECT_EQ(handCutChunks(blocks, {"h.0", "h.2"}, matched), (std::vector<int64_t>{0, 1, 1, 2, 2}));
  EXPECT_EQ(matched, 2u);
  // Out of order, or a name no block has: the rest are not found.
  handCutChunks(blocks, {"h.2", "h.1"}, matched);
  EXPECT_EQ(matched, 1u);
  handCutChunks(blocks, {"h.9"}, matched);
  EXPECT_EQ(matched, 0u);
  // The first unit begins chunk 0 whatever its name.
  handCutChunks({"h.0", "h.1"}, {"h.0"}, matched);
  EXPECT_EQ(matched, 0u);
}

TEST(PipelineCut, FewerUnitsThanChunksLeavesChunksEmpty) {
  CutShape shape = CutShape::of("1f1b", 4, 1, 8, 0);
  PipelineCut cut = cutPipeline(shape, {1, 1}, {{1, 1, 0}, {1, 1, 0}});
  EXPECT_EQ(cut.chunkOf, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(cut.seconds, (std::vector<double>{1, 1, 0, 0}));
}

} // namespace
