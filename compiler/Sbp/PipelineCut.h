// Cutting a model into pipeline chunks: which of its units (whole blocks of
// micro-batch 0's forward, in order) each chunk takes, by time or, where
// the fastest cut would not fit the device, by memory. Plain C++:
// --sbp-pipeline places the ops by it, --sbp-search estimates the fullest
// stage of the cut --sbp-pipeline will make by it, the unit tests check it.
//
// The model is cut into stages x chunks contiguous chunks, chunk c on stage
// c % stages (PipelineSchedule.h). A stage holds, per rank, the step's
// share of each of its chunks (parameters, states, gradient sums), what
// each chunk's forward leaves for its backward once for each micro-batch
// the chunk holds at that moment, and one working set (one backward runs at
// a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sbpc::sbp {

/// What a unit, or a chunk of units, makes its stage hold, per rank.
struct CutMemory {
  /// The whole step: the parameters its ops read, their optimizer states
  /// and gradient sums, and copies of them more than one micro-batch reads.
  double step = 0;
  /// Once per micro-batch in flight: what its forward leaves for the
  /// backward.
  double stash = 0;
  /// What its ops have live at once beside the stash (the largest of its
  /// units').
  double working = 0;

  CutMemory &operator+=(const CutMemory &other);
};

/// The pipeline a cut is for.
struct CutShape {
  int64_t stages = 1;
  /// Model chunks per stage (the interleaved schedule's V; 1 otherwise).
  int64_t chunks = 1;
  /// Per chunk, the most micro-batches it holds at once (chunkInFlight),
  /// and per stage what its chunks hold together (stageHeldTogether);
  /// where either is short, a chunk holds one.
  std::vector<double> inFlight;
  std::vector<std::vector<std::vector<double>>> heldTogether;
  /// Device memory per rank each stage must fit (0: cut by time alone).
  double memoryLimit = 0;

  /// The shape of `schedule` on `stages` with `chunks` each, for
  /// `microBatches` (0: a step that is not micro-batched, every chunk
  /// holding one).
  static CutShape of(const std::string &schedule, int64_t stages, int64_t chunks,
                     int64_t microBatches, double memoryLimit);
  int64_t parts() const { return stages * chunks; }
};

/// A cut of the units into the shape's chunks.
struct PipelineCut {
  /// Per unit, its chunk.
  std::vector<int64_t> chunkOf;
  /// Per chunk, its units' seconds and memory.
  std::vector<double> seconds;
  std::vector<CutMemory> memory;
  /// "time", "memory" (a cut by time would not fit) or "hand".
  std::string by;
  /// Where the cut was chosen (by time or memory): the fastest cut's
  /// fullest stage's bytes and slowest chunk's seconds.
  std::optional<std::pair<double, double>> timeCut;

  /// Per stage, what it holds (the top of this file).
  std::vector<double> stageBytes(const CutShape &shape) const;
  double fullestBytes(const CutShape &shape) const;
  double slowestSeconds() const;
};

/// The cut --sbp-pipeline makes of units taking `seconds` and `memory`:
/// the contiguous split into the chunks, none empty, whose slowest chunk
/// is fastest; where its fullest stage exceeds the shape's memory limit,
/// the fastest cut whose every stage fits, or where none does the leanest
/// found. Each chunk is then bounded by a scale of 1/chunks of the device;
/// the chunks fill from the last (which holds the fewest micro-batches at
/// once), so with one chunk a stage the leanest scale is the leanest cut.
/// With fewer units than chunks, some chunks are left empty.
PipelineCut cutPipeline(const CutShape &shape, const std::vector<double> &seconds,
                        const std::vector<CutMemory> &memory);

/// Per unit, its chunk in a cut by hand: chunk g + 1 begins with the
/// first unit after chunk g's beginning whose block is named `starts[g]`
/// (`blocks`: each unit's block, "" for a unit outside blocks; the first
/// unit begins chunk 0 whatever its name). `matched`: how many of
/// `starts` were found, in order (all of them where the cut is whole).
std::vector<int64_t> handCutChunks(const std::vector<std::string> &blocks,
                                   const std::vector<std::string> &starts, size_t &matched);

/// Why `starts` make no cut by hand of units in blocks `blocks`
/// (handCutChunks): the first unit named (it would leave `part` 0, "stage"
/// or "chunk", nothing) or a start not found after the one before; "" where
/// they make one.
std::string handCutError(const std::vector<std::string> &blocks,
                         const std::vector<std::string> &starts, const std::string &part);

/// The cut that puts unit u on chunk `chunkOf[u]` (by hand).
PipelineCut cutAt(const CutShape &shape, const std::vector<double> &seconds,
                  const std::vector<CutMemory> &memory, std::vector<int64_t> chunkOf);

} // namespace sbpc::sbp
