// Tests the pipeline schedules: every task once, in an order the stages can
// run without waiting forever, at the time the closed forms give, holding
// as many micro-batches as the docs say.
#include "compiler/Sbp/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

using namespace sbpc::sbp;

namespace {

/// When the last task ends: a chunk's forward takes 1 / chunks, its
/// backward 2 / chunks.
double makespan(const std::vector<std::array<double, 2>> &starts, int64_t chunks) {
  double end = 0;
  for (const auto &[forward, backward] : starts)
    end = std::max({end, forward + 1.0 / chunks, backward + 2.0 / chunks});
  return end;
}

struct Case {
  std::string schedule;
  int64_t stages, chunks, microBatches;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t stages : {2, 3, 4, 8})
    for (int64_t groups : {1, 2, 3}) {
      int64_t m = stages * groups;
      all.push_back({"1f1b", stages, 1, m});
      all.push_back({"1f1b", stages, 1, m + 1});
      all.push_back({"gpipe", stages, 1, m});
      for (int64_t chunks : {2, 3, 4})
        all.push_back({"interleaved", stages, chunks, m});
    }
  return all;
}

TEST(PipelineSchedule, EveryTaskOnceOnItsStageAfterItsForward) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.schedule + " S=" + std::to_string(c.stages) + " V=" + std::to_string(c.chunks) +
                 " M=" + std::to_string(c.microBatches));
    ASSERT_EQ(pipelineScheduleError(c.schedule, c.stages, c.chunks, c.microBatches), "");
    auto order = pipelineOrder(c.schedule, c.stages, c.chunks, c.microBatches);
    ASSERT_EQ(static_cast<int64_t>(order.size()), c.stages);
    for (int64_t s = 0; s < c.stages; ++s) {
      std::set<std::tuple<int64_t, int64_t, bool>> seen;
      for (const PipelineTask &t : order[s]) {
        EXPECT_EQ(t.chunk % c.stages, s);
        EXPECT_TRUE(seen.insert({t.microBatch, t.chunk, t.backward}).second);
        if (t.backward) {
          EXPECT_TRUE(seen.count({t.microBatch, t.chunk, false}))
              << "the backward of micro-batch " << t.microBatch << ", chunk " << t.chunk
              << " before its forward";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), 2 * c.microBatches * c.chunks);
    }
  }
}

TEST(PipelineSchedule, StartsRespectTheChunksOrder) {
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.schedule + " S=" + std::to_string(c.stages) + " V=" + std::to_string(c.chunks) +
                 " M=" + std::to_string(c.microBatches));
    auto starts = pipelineStarts(pipelineOrder(c.schedule, c.stages, c.chunks, c.microBatches),
                                 c.stages, c.chunks, c.microBatches);
    ASSERT_TRUE(starts.has_value()) << "the stages would wait for each other forever";
    const int64_t all = c.stages * c.chunks;
    const double f = 1.0 / c.chunks;
    for (int64_t m = 0; m < c.microBatches; ++m)
      for (int64_t k = 0; k < all; ++k) {
        const auto &here = (*starts)[m * all + k];
        if (k > 0) {
          EXPECT_GE(here[0], (*starts)[m * all + k - 1][0] + f - 1e-12);
        }
        if (k + 1 < all) {
          EXPECT_GE(here[1], (*starts)[m * all + k + 1][1] + 2 * f - 1e-12);
        } else {
          EXPECT_GE(here[1], here[0] + f - 1e-12);
        }
      }
  }
}

TEST(PipelineSchedule, BubbleShrinksWithChunks) {
  // On equal stages a micro-batch's work on a stage takes 3 (a forward 1, a
  // backward 2): 1F1B and GPipe take (M + S - 1) * 3, the interleaved
  // schedule (M + (S - 1) / V) * 3.
  for (int64_t stages : {2, 4, 8})
    for (int64_t m : {stages, 2 * stages, 4 * stages}) {
      for (const char *schedule : {"1f1b", "gpipe"}) {
        auto starts = pipelineStarts(pipelineOrder(schedule, stages, 1, m), stages, 1, m);
        ASSERT_TRUE(starts);
        EXPECT_NEAR(makespan(*starts, 1), (m + stages - 1) * 3.0, 1e-9) << schedule;
      }
      for (int64_t chunks : {2, 4}) {
        auto starts =
            pipelineStarts(pipelineOrder("interleaved", stages, chunks, m), stages, chunks, m);
        ASSERT_TRUE(starts);
        EXPECT_NEAR(makespan(*starts, chunks), (m + static_cast<double>(stages - 1) / chunks) * 3.0,
                    1e-9)
            << "S=" << stages << " M=" << m << " V=" << chunks;
      }
    }
}

TEST(PipelineSchedule, DurationsPerChunk) {
  // The unit times given explicitly start every task where the default
  // does; twice as long everywhere, every start twice as late; a slow
  // last stage (3 for a forward, 6 for a backward, against 1 and 2)
  // bounds the step: its M micro-batches' work and the first one's way
  // to it and back.
  for (const char *schedule : {"1f1b", "interleaved"}) {
    int64_t stages = 4, chunks = std::string(schedule) == "interleaved" ? 2 : 1, m = 8;
    auto order = pipelineOrder(schedule, stages, chunks, m);
    std::vector<std::array<double, 2>> unit(stages * chunks, {1.0 / chunks, 2.0 / chunks}),
        twice(stages * chunks, {2.0 / chunks, 4.0 / chunks});
    auto plain = pipelineStarts(order, stages, chunks, m);
    auto given = pipelineStarts(order, stages, chunks, m, &unit);
    auto doubled = pipelineStarts(order, stages, chunks, m, &twice);
    ASSERT_TRUE(plain && given && doubled);
    for (size_t i = 0; i < plain->size(); ++i)
      for (int b = 0; b < 2; ++b) {
        EXPECT_DOUBLE_EQ((*given)[i][b], (*plain)[i][b]);
        EXPECT_DOUBLE_EQ((*doubled)[i][b], 2 * (*plain)[i][b]);
      }
  }
  std::vector<std::array<double, 2>> slowLast = {{1, 2}, {1, 2}, {1, 2}, {3, 6}};
  auto starts = pipelineStarts(pipelineOrder("1f1b", 4, 1, 8), 4, 1, 8, &slowLast);
  ASSERT_TRUE(starts);
  double end = 0;
  for (int64_t m = 0; m < 8; ++m)
    end = std::max(end, (*starts)[m * 4 + 0][1] + 2);
  EXPECT_DOUBLE_EQ(end, 3 + 8 * 9 + 3 * 2);
}

TEST(PipelineSchedule, FirstStageInFlight) {
  EXPECT_EQ(firstStageInFlight("1f1b", 4, 1, 8), 4);
  EXPECT_EQ(firstStageInFlight("1f1b", 4, 1, 2), 2);
  EXPECT_EQ(firstStageInFlight("gpipe", 4, 1, 8), 8);
  EXPECT_EQ(firstStageInFlight("sequential", 4, 1, 8), 1);
  EXPECT_EQ(firstStageInFlight("1f1b", 1, 1, 8), 1);
  // Interleaved: (S - 1) * 2 + (V - 1) * S forwards of chunks, and one
  // more before the first backward, each 1/V of a micro-batch.
  EXPECT_EQ(firstStageInFlight("interleaved", 4, 2, 8), (3 * 2 + 4 + 1) / 2.0);
  EXPECT_EQ(firstStageInFlight("interleaved", 2, 3, 8), (1 * 2 + 2 * 2 + 1) / 3.0);
  // Few micro-batches: all of them, every chunk.
  EXPECT_EQ(firstStageInFlight("interleaved", 4, 2, 4), 4);
}

TEST(PipelineSchedule, StageAndChunkInFlight) {
  // 1F1B: stage s holds S - s micro-batches (all M where fewer).
  EXPECT_EQ(stageInFlight("1f1b", 4, 1, 8), (std::vector<double>{4, 3, 2, 1}));
  EXPECT_EQ(stageInFlight("1f1b", 4, 1, 2), (std::vector<double>{2, 2, 2, 1}));
  EXPECT_EQ(stageInFlight("gpipe", 3, 1, 5), (std::vector<double>{5, 5, 5}));
  EXPECT_EQ(stageInFlight("sequential", 3, 1, 5), (std::vector<double>{1, 1, 1}));
  // One chunk a stage: the chunk holds what its stage does.
  for (const char *schedule : {"1f1b", "gpipe", "sequential"})
    EXPECT_EQ(chunkInFlight(schedule, 4, 1, 8), stageInFlight(schedule, 4, 1, 8)) << schedule;
  // Interleaved: a stage's first chunk waits longest for its backward.
  // Each chunk holds at most every micro-batch, and together a stage's
  // chunks at least what the stage holds at its fullest.
  const int64_t stages = 4, chunks = 2, microBatches = 8;
  std::vector<double> chunk = chunkInFlight("interleaved", stages, chunks, microBatches);
  std::vector<double> stage = stageInFlight("interleaved", stages, chunks, microBatches);
  ASSERT_EQ(chunk.size(), static_cast<size_t>(stages * chunks));
  for (int64_t s = 0; s < stages; ++s) {
    double together = 0;
    for (int64_t c = s; c < stages * chunks; c += stages) {
      EXPECT_GE(chunk[c], 1);
      EXPECT_LE(chunk[c], microBatches);
      together += chunk[c];
    }
    EXPECT_GE(together, stage[s] * chunks) << "stage " << s;
    EXPECT_GE(chunk[s], chunk[s + stages]) << "stage " << s;
  }
  EXPECT_GT(chunk[0], chunk[stages - 1]);
  // A later chunk never holds more than an earlier one (the memory cut
  // fills chunks from the last, whose bound is the loosest, for it).
  for (const char *schedule : {"1f1b", "gpipe", "sequential", "interleaved"})
    for (auto [s, v, m] : {std::array<int64_t, 3>{4, 1, 8},
                           {8, 1, 64},
                           {2, 1, 1},
                           {4, 2, 8},
                           {8, 2, 64},
                           {2, 3, 4},
                           {3, 4, 9}})
      if (pipelineScheduleError(schedule, s, v, m).empty()) {
        std::vector<double> held = chunkInFlight(schedule, s, v, m);
        for (size_t c = 1; c < held.size(); ++c)
          EXPECT_LE(held[c], held[c - 1])
              << schedule << " S=" << s << " V=" << v << " M=" << m << " chunk " << c;
      }
}

TEST(PipelineSchedule, StageHeldTogether) {
  // One chunk a stage: one moment, the stage's most.
  using Moments = std::vector<std::vector<double>>;
  EXPECT_EQ(stageHeldTogether("1f1b", 4, 1, 8), (std::vector<Moments>{{{4}}, {{3}}, {{2}}, {{1}}}));
  EXPECT_EQ(stageHeldTogether("sequential", 2, 1, 4), (std::vector<Moments>{{{1}}, {{1}}}));
  // Interleaved: at a stage's fullest its chunks hold what stageInFlight
  // says together, each no more than its own most, and no moment's
  // chunks all hold as much as another's (else it is left out). The
  // chunks' own mosts do not come at once: summing them overcounts.
  for (auto [stages, chunks, microBatches] :
       {std::array<int64_t, 3>{4, 2, 8}, {2, 3, 4}, {2, 2, 8}, {8, 2, 64}}) {
    std::vector<Moments> together = stageHeldTogether("interleaved", stages, chunks, microBatches);
    std::vector<double> stage = stageInFlight("interleaved", stages, chunks, microBatches);
    std::vector<double> chunk = chunkInFlight("interleaved", stages, chunks, microBatches);
    ASSERT_EQ(together.size(), static_cast<size_t>(stages));
    bool overcounts = false;
    for (int64_t s = 0; s < stages; ++s) {
      double most = 0, ownMosts = 0;
      for (int64_t k = 0; k < chunks; ++k)
        ownMosts += chunk[s + k * stages];
      for (const std::vector<double> &held : together[s]) {
        ASSERT_EQ(held.size(), static_cast<size_t>(chunks));
        double sum = 0;
        for (int64_t k = 0; k < chunks; ++k) {
          EXPECT_GE(held[k], 0);
          EXPECT_LE(held[k], chunk[s + k * stages]);
          sum += held[k];
        }
        most = std::max(most, sum);
        for (const std::vector<double> &other : together[s])
          if (&other != &held) {
            EXPECT_FALSE(std::equal(held.begin(), held.end(), other.begin(),
                                    [](double a, double b) { return a <= b; }));
          }
      }
      EXPECT_EQ(most, stage[s] * chunks) << "stage " << s;
      overcounts |= ownMosts > most;
    }
    EXPECT_TRUE(overcounts) << "S=" << stages << " V=" << chunks << " M=" << microBatches;
  }
}

TEST(PipelineSchedule, Errors) {
  EXPECT_NE(pipelineScheduleError("zigzag", 2, 1, 4).find("1f1b, interleaved, gpipe or sequential"),
            std::string::npos);
  EXPECT_NE(pipelineScheduleError("1f1b", 2, 2, 4).find("only the interleaved"), std::string::npos);
  EXPECT_NE(pipelineScheduleError("interleaved", 2, 1, 4).find("at least 2"), std::string::npos);
  EXPECT_NE(pipelineScheduleError("interleaved", 4, 2, 6).find("not a multiple of 4"),
            std::string::npos);
  EXPECT_EQ(pipelineScheduleError("interleaved", 4, 2, 8), "");
  EXPECT_EQ(pipelineScheduleError("sequential", 4, 1, 3), "");
}

} // namespace
