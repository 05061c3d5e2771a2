#include "compiler/Sbp/PipelineSchedule.h"

#include <algorithm>

namespace sbpc::sbp {

namespace {
constexpr int64_t kMostChunks = 4096;
} // namespace

bool isPipelineSchedule(const std::string &schedule) {
  return schedule == "1f1b" || schedule == "interleaved" || schedule == "gpipe" ||
         schedule == "sequential";
}

std::string pipelineScheduleError(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches) {
  if (!isPipelineSchedule(schedule))
    return "the schedule must be " + std::string(kPipelineSchedules) + ", got '" + schedule + "'";
  if (schedule != "interleaved")
    return chunks == 1 ? ""
                       : "only the interleaved schedule holds several chunks a stage, got " +
                             std::to_string(chunks) + " chunks under " + schedule;
  if (chunks < 2)
    return "the interleaved schedule holds at least 2 chunks a stage, got " +
           std::to_string(chunks);
  // (A model has fewer blocks than that: the cut refuses more chunks than
  // it has parts.)
  if (chunks > kMostChunks || stages > kMostChunks)
    return "the interleaved schedule holds at most " + std::to_string(kMostChunks) +
           " chunks a stage on at most as many stages, got " + std::to_string(chunks) + " on " +
           std::to_string(stages);
  if (microBatches % stages != 0)
    return "the interleaved schedule runs micro-batches in groups of the " +
           std::to_string(stages) + " stages: " + std::to_string(microBatches) +
           " micro-batches are not a multiple of " + std::to_string(stages);
  return "";
}

std::vector<std::vector<PipelineTask>> pipelineOrder(const std::string &schedule, int64_t stages,
                                                     int64_t chunks, int64_t microBatches) {
  std::vector<std::vector<PipelineTask>> order(stages);
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<PipelineTask> &tasks = order[s];
    // The k-th forward and backward of the stage.
    auto forward = [&](int64_t k) -> PipelineTask {
      if (schedule != "interleaved")
        return {k, s, false};
      int64_t group = k / (stages * chunks), local = (k / stages) % chunks;
      return {group * stages + k % stages, local * stages + s, false};
    };
    auto backward = [&](int64_t k) -> PipelineTask {
      PipelineTask t = forward(k);
      if (schedule == "interleaved")
        t.chunk = (chunks - 1 - t.chunk / stages) * stages + s;
      t.backward = true;
      return t;
    };
    int64_t total = microBatches * (schedule == "interleaved" ? chunks : 1);
    int64_t warmup = total;
    if (schedule == "1f1b")
      warmup = std::min(stages - s - 1, total);
    else if (schedule == "interleaved")
      warmup = std::min((stages - s - 1) * 2 + (chunks - 1) * stages, total);
    for (int64_t k = 0; k < warmup; ++k)
      tasks.push_back(forward(k));
    for (int64_t k = 0; k + warmup < total; ++k) {
      tasks.push_back(forward(k + warmup));
      tasks.push_back(backward(k));
    }
    for (int64_t k = std::max<int64_t>(0, total - warmup); k < total; ++k)
      tasks.push_back(backward(k));
  }
  return order;
}

std::optional<std::vector<std::array<double, 2>>>
pipelineStarts(const std::vector<std::vector<PipelineTask>> &order, int64_t stages, int64_t chunks,
               int64_t microBatches, const std::vector<std::array<double, 2>> *durations) {
  constexpr double kUnset = -1;
  const int64_t all = stages * chunks;
  std::vector<std::array<double, 2>> finish(microBatches * all, {kUnset, kUnset}), start = finish;
  std::vector<size_t> next(stages, 0);
  std::vector<double> free(stages, 0);
  const double forwardTime = 1.0 / static_cast<double>(chunks);
  size_t left = 0;
  for (const auto &tasks : order)
    left += tasks.size();
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s) {
      while (next[s] < order[s].size()) {
        auto [m, c, b] = order[s][next[s]];
        double ready = free[s];
        // A forward waits for the chunk before, a backward for the chunk
        // after (the last chunk's, for its own forward).
        int64_t dependency = b ? c + 1 : c - 1;
        std::optional<double> before;
        if (dependency >= 0 && dependency < all)
          before = finish[m * all + dependency][b];
        else if (b)
          before = finish[m * all + c][0];
        if (before && *before == kUnset)
          break;
        if (before)
          ready = std::max(ready, *before);
        start[m * all + c][b] = ready;
        double takes = durations ? (*durations)[c][b] : (b ? 2 : 1) * forwardTime;
        finish[m * all + c][b] = free[s] = ready + takes;
        ++next[s];
        --left;
        progress = true;
      }
    }
  }
  if (left != 0)
    return std::nullopt;
  return start;
}

std::vector<double> stageInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches) {
  if (stages <= 1 || schedule == "sequential")
    return std::vector<double>(std::max<int64_t>(1, stages), 1.0);
  std::vector<double> held;
  for (const std::vector<PipelineTask> &tasks :
       pipelineOrder(schedule, stages, chunks, microBatches)) {
    int64_t now = 0, most = 0;
    for (const PipelineTask &task : tasks) {
      now += task.backward ? -1 : 1;
      most = std::max(most, now);
    }
    held.push_back(static_cast<double>(most) / static_cast<double>(chunks));
  }
  return held;
}

double firstStageInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                          int64_t microBatches) {
  return stageInFlight(schedule, stages, chunks, microBatches).front();
}

std::vector<double> chunkInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches) {
  int64_t parts = std::max<int64_t>(1, stages * chunks);
  if (stages <= 1 || schedule == "sequential")
    return std::vector<double>(parts, 1.0);
  std::vector<int64_t> now(parts, 0), most(parts, 0);
  for (const std::vector<PipelineTask> &tasks :
       pipelineOrder(schedule, stages, chunks, microBatches))
    for (const PipelineTask &task : tasks) {
      now[task.chunk] += task.backward ? -1 : 1;
      most[task.chunk] = std::max(most[task.chunk], now[task.chunk]);
    }
  return std::vector<double>(most.begin(), most.end());
}

std::vector<std::vector<std::vector<double>>> stageHeldTogether(const std::string &schedule,
                                                                int64_t stages, int64_t chunks,
                                                                int64_t microBatches) {
  const int64_t n = std::max<int64_t>(1, stages);
  const size_t perStage = static_cast<size_t>(std::max<int64_t>(1, chunks));
  if (stages <= 1 || schedule == "sequential")
    return std::vector<std::vector<std::vector<double>>>(n, {std::vector<double>(perStage, 1.0)});
  std::vector<std::vector<std::vector<double>>> together;
  for (const std::vector<PipelineTask> &tasks :
       pipelineOrder(schedule, stages, chunks, microBatches)) {
    std::vector<double> now(perStage, 0.0);
    std::vector<std::vector<double>> moments;
    auto covers = [](const std::vector<double> &a, const std::vector<double> &b) {
      for (size_t k = 0; k < a.size(); ++k)
        if (a[k] < b[k])
          return false;
      return true;
    };
    for (const PipelineTask &task : tasks) {
      size_t k = static_cast<size_t>(task.chunk / stages);
      now[k] += task.backward ? -1 : 1;
      if (task.backward ||
          std::any_of(moments.begin(), moments.end(),
                      [&](const std::vector<double> &m) { return covers(m, now); }))
        continue;
      moments.erase(std::remove_if(moments.begin(), moments.end(),
                                   [&](const std::vector<double> &m) { return covers(now, m); }),
                    moments.end());
      moments.push_back(now);
    }
    together.push_back(std::move(moments));
  }
  return together;
}

} // namespace sbpc::sbp
