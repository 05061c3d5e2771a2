// What a generated rank program stands on: its command line, the static
// arena, sharded loading of parameters and inputs, writing output shards,
// the local layout changes, the communicator, and failing cleanly.
//
// A rank program is run as
//   rank<r> --params P.safetensors --input NAME=FILE.npy ... --output-dir D
//           [--memory-limit BYTES] [--timeout SECONDS] [--repeat N | --steps N
//           [--step-outputs NAME,...] [--save-every K]] [--profile ops]
// by `sbpc run` (or out/launch.sh) under mpirun. It writes D/.shards/:
// NAME.rank<r>.npy for every output shard it holds (replicas once, by the
// coordinate Mesh::replicaWriter picks), and
// rank<r>.json with what it measured (bytes sent, arena peak, seconds).
// --repeat N runs the whole program N times in the one process (the
// outputs are the same each time), timing each run: `repeats` in
// rank<r>.json has each run's seconds and its compute seconds (without
// the time spent loading and storing shards), for benchmarks; bytes sent
// are those of one run. --steps N instead runs N training steps: each
// output named like a parameter this rank loads (its update) is the next
// step's value of that parameter, in place of the file's: left where it
// is when the memory plan gave it the parameter's place (a resident load
// and store), else kept in host memory. Only the last step writes them.
// An input file of one more leading dimension holds S batches, step k
// reading batch k mod S. An earlier step K (from 1) writes no outputs but
// those --step-outputs names (every output where K is a multiple of
// --save-every), as D/.steps/K/NAME.rank<r>.npy, and then
// D/.steps/K/rank<r>.done, so that `sbpc run --steps` can show each step's
// loss while the job goes on; `repeats` has each step's seconds. A
// pipeline refuses --steps (a stage may load a tied parameter that another
// stage updates): its steps run a launch each.
// --profile ops also times every op (from its start to the next op's, on
// the device's clock where the backend keeps one, else the host's) and
// writes `ops` in rank<r>.json: each op's location, its seconds summed
// over the runs (those after the first when there are several, the first
// paying one-time costs; with --steps N above 2, those between the first
// and the last, which writes every output), and how
// often it ran. A load's
// or store's time includes the host's reading or writing of its file.
// Any error prints one line "rank R failed in OP: MESSAGE" and ends the
// whole job; so does an op that makes no progress for --timeout seconds
// (a rank it waits for has stopped), so that no job hangs.
#pragma once

#include "runtime/Layout.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/Ops.h"
#include "runtime/io/Safetensors.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace sbprt::rank {

/// Where a program's arena lives and how bytes move in and out of it: host
/// memory for CPU programs (the default), a GPU's memory for CUDA programs
/// (runtime/cuda/Cuda.h). Failures come back as false with `error` set.
class Backend {
public:
  virtual ~Backend();
  /// Called once the job is joined (`mpi` up): may pick a device and put
  /// another communicator in MPI's place; null with `error` set on failure.
  virtual std::unique_ptr<comm::Communicator>
  attach(std::unique_ptr<comm::Communicator> mpi, std::string &error) {
    return mpi;
  }
  virtual void *allocate(uint64_t bytes, std::string &error) = 0;
  virtual void release(void *arena) = 0;
  /// `bytes` from host memory into the arena, and back.
  virtual bool upload(void *dst, const void *src, size_t bytes, std::string &error) = 0;
  virtual bool download(void *dst, const void *src, size_t bytes, std::string &error) = 0;
  /// Within the arena: `rows` rows of `width` bytes, consecutive rows
  /// `dstPitch` and `srcPitch` bytes apart.
  virtual bool copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                        size_t width, size_t rows, std::string &error) = 0;
  /// `n` elements of the arena set to `value`: f32 (`elementBytes` 4) or
  /// bf16 (2).
  virtual bool fill(void *dst, int64_t n, float value, size_t elementBytes,
                    std::string &error) = 0;
  /// Waits for the work queued so far; reports what failed in it.
  virtual bool synchronize(std::string &error) { return true; }
  /// Marks where the program's computing begins and ends (between loads and
  /// stores) on the device's own clock, which takeComputeSeconds() reads:
  /// the device's time between the marks since it was last called, without
  /// the host's waits for it; negative where the backend keeps no such
  /// clock (the host's programs, whose computing is the host's time).
  virtual bool markCompute(bool begin, std::string &error) { return true; }
  virtual double takeComputeSeconds() { return -1; }
  /// --profile ops: a mark on the device's clock where the next op starts
  /// (its index, from 0 after each resetOpMarks), or -1 where the backend
  /// keeps no clock of its own (the host's is taken).
  virtual int64_t markOp(std::string &error) { return -1; }
  /// The seconds between marks `from` and `to`, once the work before `to`
  /// is done (after synchronize); negative on failure, with `error` set.
  virtual double opSeconds(int64_t from, int64_t to, std::string &error) { return -1; }
  virtual void resetOpMarks() {}
};

/// What the compiler knows about the program a rank runs.
struct ProgramInfo {
  const char *name; // "program0"
  Mesh mesh;
  uint64_t arenaBytes;
  Backend *backend = nullptr; // null: the host
};

/// Ends the job from code that has no Rank at hand (a GPU kernel's error
/// check): "rank R failed in OP: message", as Rank::fail.
[[noreturn]] void failActive(const std::string &message);

class Rank {
public:
  /// Parses the command line, joins the job and allocates the arena; any
  /// problem ends the job with a message.
  Rank(int argc, char **argv, const ProgramInfo &info);
  ~Rank();

  int64_t rank() const { return rank_; }
  comm::Communicator &comm() { return *comm_; }

  /// Names the op that runs next, for messages about failures (and crashes);
  /// `shapes`, its operands' and results' types, tells apart in --profile
  /// ops the ops at one location (a forward op and its gradients).
  void op(const char *description, const char *shapes = "");

  /// `bytes` of the arena from `offset`, checked against the planned size;
  /// records the highest byte used.
  template <typename T> T *at(uint64_t offset, uint64_t bytes) {
    return static_cast<T *>(reserve(offset, bytes));
  }

  /// Reads this rank's shard of parameter (`isParam`) or input `name`, of
  /// `global` shape and `dtype` laid out as `layout`, into `dst`. `stored`
  /// is the shape in the file when it differs (same elements), else empty.
  /// `bf16`: the file holds f32 (`dtype`), the arena bf16, rounded to
  /// nearest even on the way in. `resident`: the store of the parameter's
  /// update has the same place, which nothing else takes (exec.resident),
  /// so that a step after the first (--steps) finds the value there.
  void load(bool isParam, const char *name, DType dtype, const std::vector<int64_t> &global,
            const std::vector<int64_t> &stored, const NdSbp &layout, void *dst, bool bf16 = false,
            bool resident = false);
  /// Writes this rank's shard of output `name` unless another rank holds
  /// the same replica. `bf16`: the arena holds bf16, written as f32. With
  /// `pieces` > 1, `src` is piece `piece` of the shard: its rows piece,
  /// piece + pieces, ... (exec.store rows), written into the shard's file.
  /// `resident`: a parameter's update where its load is (see load).
  void store(const char *name, DType dtype, const std::vector<int64_t> &global, const NdSbp &layout,
             const void *src, bool bf16 = false, int64_t piece = 0, int64_t pieces = 1,
             bool resident = false);

  /// B -> S(dim) on `axis`: the block at this rank's coordinate.
  void localSlice(size_t axis, int64_t dim, const void *in, const std::vector<int64_t> &inShape,
                  size_t elementBytes, void *out);
  /// S(dim) -> P on `axis`: `in` at this rank's coordinate of a tensor that
  /// holds the identity of `reduce` elsewhere.
  /// Elements are f32 (`elementBytes` 4) or bf16 (2).
  void zeroPad(size_t axis, int64_t dim, Sbp::Reduce reduce, const void *in,
               const std::vector<int64_t> &inShape, size_t elementBytes, void *out);
  /// B -> P(sum) on `axis`: coordinate 0 keeps `in`, the others hold zeros.
  void keepOne(size_t axis, const void *in, int64_t elements, size_t elementBytes, void *out);

  /// `place`, of ids laid out as `layout`, with this rank's block of them
  /// (its shape and where it starts), for a message naming a bad id.
  IndexPlace placeOf(IndexPlace place, const NdSbp &layout) const;

  /// Ends the whole job: prints "rank R failed in OP: message".
  [[noreturn]] void fail(const std::string &message);
  void check(bool ok, const std::string &error) {
    if (!ok)
      fail(error);
  }

  /// How many times main runs the program (--repeat, or --steps), and
  /// the marks around each run.
  int64_t repeats() const { return repeats_; }
  void beginRepeat();
  void endRepeat();

  /// Writes the measurements and leaves the job; main returns this.
  int finish();

private:
  void *reserve(uint64_t offset, uint64_t bytes);
  /// Time spent in loads and stores, kept out of the compute time.
  class IoTimer;
  /// Ends the job when no op starts for timeout_ seconds.
  void watch();

  ProgramInfo info_;
  Backend *backend_;
  int64_t rank_ = 0;
  std::unique_ptr<comm::Communicator> comm_;
  std::string paramsPath_, outputDir_;
  /// Files of outputs stored in pieces (exec.store rows) this run made.
  std::set<std::string> piecesStored_;
  /// --steps: how many (0 without), the one running (from 0), the outputs
  /// an earlier step writes, and each parameter this rank loads: its
  /// layout, and once a step has stored its update, where that is: left
  /// in its place in the arena (`inArena`, a resident store), else copied
  /// into `shard` as its file would hold it.
  int64_t steps_ = 0, step_ = 0, saveEvery_ = 0;
  std::set<std::string> stepOutputs_;
  struct Carried {
    NdSbp layout;
    std::vector<int64_t> global;
    DType dtype;
    Tensor shard;
    bool held = false, inArena = false;
    const void *at = nullptr;
  };
  std::map<std::string, Carried> carried_;
  bool lastStep() const { return steps_ == 0 || step_ + 1 == steps_; }
  /// Where an earlier step writes (--steps): D/.steps/K.
  std::string stepDir() const;
  /// The shard of `sizes` at `src` (a piece of it where `pieces` > 1: a
  /// 1/pieces of its rows) into `into` as its file holds it (`bf16` in the
  /// arena becomes f32), reusing `into`'s memory where it fits.
  void fetch(Tensor &into, DType dtype, std::vector<int64_t> sizes, const void *src, bool bf16,
             int64_t pieces);
  std::map<std::string, std::string> inputs_;
  std::optional<io::SafetensorsFile> params_;
  uint64_t memoryLimit_ = 0;
  // Fault injection for the tests of failure handling: SBPRT_CRASH_RANK=R
  // and SBPRT_HANG_RANK=R make rank R crash or hang at its first op whose
  // name starts with SBPRT_FAULT_IN (default "graph.": its first graph op;
  // "startup" and "leaving the job" reach the watchdog's other ends).
  int64_t crashRank_ = -1, hangRank_ = -1;
  std::string faultIn_ = "graph.";
  double timeout_ = 0;
  std::atomic<int64_t> lastProgressNs_{0};
  std::atomic<bool> finished_{false};
  std::thread watchdog_;
  unsigned char *arena_ = nullptr;
  uint64_t arenaPeak_ = 0;
  std::chrono::steady_clock::time_point start_;
  int64_t repeats_ = 1;
  double ioSeconds_ = 0;
  std::chrono::steady_clock::time_point repeatStart_;
  struct RepeatTime {
    double seconds, computeSeconds;
    double deviceSeconds; // the backend's takeComputeSeconds(): negative if none
  };
  std::vector<RepeatTime> repeatSeconds_;
  /// --profile ops: this run's ops in order, each with its start (the
  /// backend's mark, else the host's clock), and the totals per op.
  bool profileOps_ = false;
  struct OpStart {
    std::string op, shapes;
    int64_t mark;
    std::chrono::steady_clock::time_point host;
  };
  std::vector<OpStart> opStarts_;
  bool inRun_ = false, opsOnDevice_ = false;
  struct OpTotal {
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::pair<std::string, std::string>, OpTotal> opTotals_; // by op and shapes
  void markOp(const char *description, const char *shapes = "");
  void closeOps();
};

} // namespace sbprt::rank
