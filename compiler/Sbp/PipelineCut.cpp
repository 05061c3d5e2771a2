#include "compiler/Sbp/PipelineCut.h"
#include "compiler/Sbp/PipelineSchedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace sbpc::sbp {

CutMemory &CutMemory::operator+=(const CutMemory &other) {
  step += other.step;
  stash += other.stash;
  working = std::max(working, other.working);
  return *this;
}

CutShape CutShape::of(const std::string &schedule, int64_t stages, int64_t chunks,
                      int64_t microBatches, double memoryLimit) {
  CutShape shape;
  shape.stages = std::max<int64_t>(1, stages);
  shape.chunks = std::max<int64_t>(1, chunks);
  shape.memoryLimit = memoryLimit;
  if (microBatches <= 0) {
    shape.inFlight.assign(shape.parts(), 1.0);
    shape.heldTogether.assign(shape.stages, {std::vector<double>(shape.chunks, 1.0)});
  } else {
    shape.inFlight = chunkInFlight(schedule, shape.stages, shape.chunks, microBatches);
    shape.heldTogether = stageHeldTogether(schedule, shape.stages, shape.chunks, microBatches);
  }
  return shape;
}

std::vector<double> PipelineCut::stageBytes(const CutShape &shape) const {
  std::vector<double> onStage(shape.stages, 0.0);
  const std::vector<std::vector<double>> once = {std::vector<double>(shape.chunks, 1.0)};
  for (int64_t s = 0; s < shape.stages; ++s) {
    double stash = 0, working = 0;
    for (const std::vector<double> &held :
         s < static_cast<int64_t>(shape.heldTogether.size()) ? shape.heldTogether[s] : once) {
      double together = 0;
      for (int64_t k = 0; k < shape.chunks; ++k)
        together += (k < static_cast<int64_t>(held.size()) ? held[k] : 1.0) *
                    memory[s + k * shape.stages].stash;
      stash = std::max(stash, together);
    }
    for (int64_t g = s; g < shape.parts(); g += shape.stages) {
      onStage[s] += memory[g].step;
      working = std::max(working, memory[g].working);
    }
    onStage[s] += stash + working;
  }
  return onStage;
}

double PipelineCut::fullestBytes(const CutShape &shape) const {
  std::vector<double> onStage = stageBytes(shape);
  return *std::max_element(onStage.begin(), onStage.end());
}

double PipelineCut::slowestSeconds() const {
  return *std::max_element(seconds.begin(), seconds.end());
}

namespace {

/// Places units into chunks under a time bound and, optionally, a memory
/// bound per chunk.
class Placer {
public:
  Placer(const CutShape &shape, const std::vector<double> &seconds,
         const std::vector<CutMemory> &memory)
      : shape_(shape), seconds_(seconds), memory_(memory),
        chunkLimit_(shape.memoryLimit / static_cast<double>(shape.chunks)) {
    cut_.seconds.assign(shape.parts(), 0.0);
    cut_.memory.assign(shape.parts(), {});
    cut_.chunkOf.assign(seconds.size(), 0);
    for (double t : seconds) {
      total_ += t;
      longest_ = std::max(longest_, t);
    }
  }

  /// A chunk's memory for the bound: its step, its stash as often as the
  /// chunk holds micro-batches, its working set.
  double chunkBytes(const CutMemory &sum, int64_t g) const {
    double held = g < static_cast<int64_t>(shape_.inFlight.size()) ? shape_.inFlight[g] : 1.0;
    return sum.step + held * sum.stash + sum.working;
  }

  /// Fills each chunk up to `bound` seconds (leaving a unit for every
  /// chunk still to fill; units of no time go with the work being
  /// filled) and, where `memoryScale` > 0, to `memoryScale` times its
  /// share of the device, the chunks from the last (a later chunk holds
  /// no more micro-batches at once than an earlier one, so its bound is
  /// the looser, and filling each from the back as far as both bounds
  /// allow places the units whenever any split does: a unit a split gives
  /// an earlier chunk fits a later one alone); without, from the first.
  /// False where a chunk ends over a bound. The placement is cut_'s.
  bool place(double bound, double memoryScale) {
    const bool fromLast = memoryScale > 0;
    const size_t n = seconds_.size();
    const int64_t parts = shape_.parts();
    int64_t k = 0; // chunks filled before the one being filled
    double load = 0;
    CutMemory sum;
    size_t inChunk = 0;
    std::fill(cut_.seconds.begin(), cut_.seconds.end(), 0.0);
    std::fill(cut_.memory.begin(), cut_.memory.end(), CutMemory());
    bool within = true;
    for (size_t i = 0; i < n; ++i) {
      size_t u = fromLast ? n - 1 - i : i;
      size_t left = n - i;           // this unit and those still to place
      int64_t after = parts - 1 - k; // chunks still to fill after this one
      int64_t g = fromLast ? parts - 1 - k : k;
      bool full = load + seconds_[u] > bound && seconds_[u] > 0;
      CutMemory with = sum;
      with += memory_[u];
      bool over = fromLast && chunkBytes(with, g) > memoryScale * chunkLimit_;
      if (inChunk > 0 && after > 0 && (full || over || left <= static_cast<size_t>(after))) {
        ++k;
        g = fromLast ? parts - 1 - k : k;
        load = 0;
        sum = {};
        inChunk = 0;
      }
      load += seconds_[u];
      sum += memory_[u];
      ++inChunk;
      cut_.seconds[g] = load;
      cut_.memory[g] = sum;
      cut_.chunkOf[u] = g;
      if (load > bound || (fromLast && chunkBytes(sum, g) > memoryScale * chunkLimit_))
        within = false;
    }
    return within;
  }

  /// The least time bound at which place() succeeds under `memoryScale`
  /// (by bisection).
  double fastest(double memoryScale) {
    double low = longest_, high = std::max(total_, longest_);
    for (int i = 0; i < 60 && high - low > 1e-12 * std::max(1.0, high); ++i) {
      double mid = (low + high) / 2;
      (place(mid, memoryScale) ? high : low) = mid;
    }
    return high;
  }

  /// The fastest cut under `memoryScale`, placed.
  void placeFastest(double memoryScale) { place(fastest(memoryScale), memoryScale); }

  const PipelineCut &cut() const { return cut_; }
  double chunkLimit() const { return chunkLimit_; }

private:
  const CutShape &shape_;
  const std::vector<double> &seconds_;
  const std::vector<CutMemory> &memory_;
  const double chunkLimit_;
  double total_ = 0, longest_ = 0;
  PipelineCut cut_;
};

} // namespace

PipelineCut cutPipeline(const CutShape &shape, const std::vector<double> &seconds,
                        const std::vector<CutMemory> &memory) {
  Placer placer(shape, seconds, memory);
  // By time alone, unless a stage of that cut would not fit: then the
  // fastest cut that fits, or where none does the leanest.
  placer.placeFastest(0);
  PipelineCut timeCut = placer.cut();
  const std::pair<double, double> timeCutMeasures = {timeCut.fullestBytes(shape),
                                                     timeCut.slowestSeconds()};
  timeCut.by = "time";
  timeCut.timeCut = timeCutMeasures;
  if (shape.memoryLimit <= 0 || timeCutMeasures.first <= shape.memoryLimit)
    return timeCut;
  // The bound of each chunk at which the time cut's fullest chunk fits.
  double timeCutScale = 0;
  for (int64_t g = 0; g < shape.parts(); ++g)
    timeCutScale =
        std::max(timeCutScale, placer.chunkBytes(timeCut.memory[g], g) / placer.chunkLimit());
  // Each chunk is bounded by `scale` times its share of the device (the
  // device's, one chunk a stage). The tightest bound some split meets
  // (none below 1 is sought: a chunk within its share fits):
  const double unbounded = std::numeric_limits<double>::infinity();
  double least = 1, low = 0;
  for (int i = 0; i < 60 && !placer.place(unbounded, least); ++i)
    low = least, least *= 2;
  if (low > 0)
    for (int i = 0; i < 40 && least - low > 1e-6 * least; ++i) {
      double mid = (low + least) / 2;
      (placer.place(unbounded, mid) ? least : low) = mid;
    }
  // Bounds from there up to where the time cut is within them, the fastest
  // cut under each (a stage's chunks are not all at their fullest at once,
  // so a bound looser than each chunk's share may still fit the stage):
  // the fastest whose every stage fits, or where none does the leanest.
  std::optional<std::pair<double, double>> best; // (its slowest seconds, scale)
  std::pair<double, double> leanest = {std::numeric_limits<double>::infinity(), least};
  auto tryScale = [&](double scale) {
    placer.placeFastest(scale);
    double bytes = placer.cut().fullestBytes(shape), slowest = placer.cut().slowestSeconds();
    if (bytes <= shape.memoryLimit && (!best || slowest < best->first))
      best = std::pair(slowest, scale);
    if (bytes < leanest.first)
      leanest = std::pair(bytes, scale);
    return bytes <= shape.memoryLimit;
  };
  // One chunk a stage: its share bound is the device's, which the stage
  // fits exactly when the chunk does. Nor is there anything between where
  // the time cut is already within the tightest bound.
  const double loosest = std::max(least, timeCutScale);
  if (shape.chunks == 1 || loosest <= least) {
    tryScale(least);
  } else {
    // Samples spaced evenly in ratio, then bisection from the loosest that
    // fits towards the next.
    const int samples = 16;
    std::vector<double> scales;
    std::vector<bool> fits;
    for (int i = 0; i <= samples; ++i) {
      scales.push_back(least * std::pow(loosest / least, static_cast<double>(i) / samples));
      fits.push_back(tryScale(scales.back()));
    }
    for (int i = samples - 1; i >= 0; --i) {
      if (!fits[i] || fits[i + 1])
        continue;
      double low = scales[i], high = scales[i + 1];
      for (int k = 0; k < 20 && high - low > 1e-3 * high; ++k) {
        double mid = (low + high) / 2;
        (tryScale(mid) ? low : high) = mid;
      }
      break;
    }
  }
  placer.placeFastest(best ? best->second : leanest.second);
  PipelineCut byMemory = placer.cut();
  // (Bisection's bounds are a hair apart: the time cut stays where the
  // balanced one is no leaner.)
  if (byMemory.fullestBytes(shape) >= timeCutMeasures.first)
    return timeCut;
  byMemory.by = "memory";
  byMemory.timeCut = timeCutMeasures;
  return byMemory;
}

std::vector<int64_t> handCutChunks(const std::vector<std::string> &blocks,
                                   const std::vector<std::string> &starts, size_t &matched) {
  std::vector<int64_t> chunkOf;
  matched = 0;
  for (size_t u = 0; u < blocks.size(); ++u) {
    if (u > 0 && matched < starts.size() && !blocks[u].empty() && blocks[u] == starts[matched])
      ++matched;
    chunkOf.push_back(static_cast<int64_t>(matched));
  }
  return chunkOf;
}

std::string handCutError(const std::vector<std::string> &blocks,
                         const std::vector<std::string> &starts, const std::string &part) {
  if (starts.empty())
    return "";
  if (!blocks.empty() && !blocks[0].empty() && blocks[0] == starts[0])
    return "cannot begin pipeline " + part + " 1 with block '" + starts[0] +
           "': it begins the forward, which would leave " + part + " 0 nothing";
  size_t matched = 0;
  handCutChunks(blocks, starts, matched);
  if (matched == starts.size())
    return "";
  std::string named;
  for (const std::string &block : blocks)
    if (!block.empty())
      named += (named.empty() ? "" : ", ") + block;
  return "has no block '" + starts[matched] + "' after " +
         (matched == 0 ? std::string("its start") : "'" + starts[matched - 1] + "'") +
         " to begin pipeline " + part + " " + std::to_string(matched + 1) +
         " (its forward's blocks, in order: " + (named.empty() ? std::string("none") : named) + ")";
}

PipelineCut cutAt(const CutShape &shape, const std::vector<double> &seconds,
                  const std::vector<CutMemory> &memory, std::vector<int64_t> chunkOf) {
  PipelineCut cut;
  cut.by = "hand";
  cut.seconds.assign(shape.parts(), 0.0);
  cut.memory.assign(shape.parts(), {});
  for (size_t u = 0; u < chunkOf.size(); ++u) {
    cut.seconds[chunkOf[u]] += seconds[u];
    cut.memory[chunkOf[u]] += memory[u];
  }
  cut.chunkOf = std::move(chunkOf);
  return cut;
}

} // namespace sbpc::sbp
