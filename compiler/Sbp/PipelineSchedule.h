// Pipeline schedules: the order in which each stage runs its micro-batches'
// forwards and backwards, and when each starts in a simulation of the
// pipeline. Plain C++: --sbp-pipeline orders the ops by it, --sbp-search
// counts what the first stage holds under it, the unit tests check it.
//
// The model is cut into stages x chunks contiguous chunks; chunk c runs on
// stage c % stages (one chunk per stage but under `interleaved`). A
// micro-batch's forward goes through the chunks in order and its backward
// back, so a chunk's forward waits for the chunk before and its backward
// for the chunk after.
//
// - 1f1b (PipeDream-Flush, as Megatron-LM): stage s runs S - s - 1
//   forwards to fill the pipeline, then a forward and a backward in turn,
//   then the backwards left.
// - interleaved (Megatron-LM's interleaved 1F1B): each stage holds V
//   chunks (s, s + S, ...); forwards go in groups of S micro-batches
//   through its first chunk, then its second, ..., backwards the other
//   way; (S - s - 1) * 2 + (V - 1) * S forwards fill the pipeline. The
//   bubble is V times smaller than 1F1B's; the micro-batches must come in
//   groups of S.
// - gpipe: every forward, then every backward.
// - sequential: one micro-batch after another (not simulated: the stages
//   wait for each other).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sbpc::sbp {

/// The schedules a pipeline runs, as messages name them, and whether
/// `schedule` is one.
constexpr const char *kPipelineSchedules = "1f1b, interleaved, gpipe or sequential";
bool isPipelineSchedule(const std::string &schedule);

/// A task of a stage: one chunk's forward or backward of one micro-batch.
struct PipelineTask {
  int64_t microBatch;
  int64_t chunk; // from 0 to stages * chunks - 1, on stage chunk % stages
  bool backward;
};

/// Why `stages`, `chunks` and `microBatches` cannot run under `schedule`
/// (a message naming the flag's value), or "" where they can.
std::string pipelineScheduleError(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches);

/// Each stage's tasks in the order it runs them (checked beforehand with
/// pipelineScheduleError; `sequential` is ordered as gpipe).
std::vector<std::vector<PipelineTask>> pipelineOrder(const std::string &schedule, int64_t stages,
                                                     int64_t chunks, int64_t microBatches);

/// When each task starts (index microBatch * stages * chunks + chunk; [0]
/// the forward, [1] the backward), each waiting for its stage and for the
/// chunk before (forward) or after (backward), when chunk c's forward and
/// backward take `durations[c]` (without durations, a forward takes
/// 1 / chunks and a backward 2 / chunks); nullopt where the order would
/// wait forever.
std::optional<std::vector<std::array<double, 2>>>
pipelineStarts(const std::vector<std::vector<PipelineTask>> &order, int64_t stages, int64_t chunks,
               int64_t microBatches, const std::vector<std::array<double, 2>> *durations = nullptr);

/// Per stage, the most micro-batches' activations it holds at once (a
/// chunk's forward adds 1 / chunks until its backward): under 1F1B stage
/// s holds min(S - s, M), under GPipe M, sequential 1.
std::vector<double> stageInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches);
/// The first stage's (stageInFlight), the fullest.
double firstStageInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                          int64_t microBatches);
/// Per chunk (0 to stages * chunks - 1), the most micro-batches whose
/// forward through it has run and whose backward has not, at once: what
/// the chunk's ops leave for their backward is held that many times.
std::vector<double> chunkInFlight(const std::string &schedule, int64_t stages, int64_t chunks,
                                  int64_t microBatches);
/// Per stage, what its chunks hold together: at each moment after one of
/// its forwards, the micro-batches between forward and backward on each
/// of its chunks ([k] on chunk s + k * stages), the moments another holds
/// at least as much on every chunk left out. The stage's peak of what its
/// chunks stash, stash[k] per micro-batch on chunk k, is the largest sum
/// of held[k] * stash[k] over these (under 1F1B, {stageInFlight[s]}).
std::vector<std::vector<std::vector<double>>> stageHeldTogether(const std::string &schedule,
                                                                int64_t stages, int64_t chunks,
                                                                int64_t microBatches);

} // namespace sbpc::sbp
