// What a generated rank program stands on: its command line, the static
// arena, sharded loading of parameters and inputs, writing output shards,
// the local layout changes, the communicator, and failing cleanly.
//
// A rank program is run as
//   rank<r> --params P.safetensors --input NAME=FILE.npy ... --output-dir D
//           [--memory-limit BYTES] [--timeout SECONDS]
// by `sbpc run` (or out/launch.sh) under mpirun. It writes D/.shards/:
// NAME.rank<r>.npy for every output shard it holds (replicas once), and
// rank<r>.json with what it measured (bytes sent, arena peak, seconds).
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
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sbprt::rank {

/// What the compiler knows about the program a rank runs.
struct ProgramInfo {
  const char *name; // "program0"
  Mesh mesh;
  uint64_t arenaBytes;
};

class Rank {
public:
  /// Parses the command line, joins the job and allocates the arena; any
  /// problem ends the job with a message.
  Rank(int argc, char **argv, const ProgramInfo &info);
  ~Rank();

  int64_t rank() const { return rank_; }
  comm::Communicator &comm() { return *comm_; }

  /// Names the op that runs next, for messages about failures (and crashes).
  void op(const char *description);

  /// `bytes` of the arena from `offset`, checked against the planned size;
  /// records the highest byte used.
  template <typename T> T *at(uint64_t offset, uint64_t bytes) {
    return static_cast<T *>(reserve(offset, bytes));
  }

  /// Reads this rank's shard of parameter (`isParam`) or input `name`, of
  /// `global` shape and `dtype` laid out as `layout`, into `dst`. `stored`
  /// is the shape in the file when it differs (same elements), else empty.
  void load(bool isParam, const char *name, DType dtype, const std::vector<int64_t> &global,
            const std::vector<int64_t> &stored, const NdSbp &layout, void *dst);
  /// Writes this rank's shard of output `name` unless another rank holds
  /// the same replica.
  void store(const char *name, DType dtype, const std::vector<int64_t> &global,
             const NdSbp &layout, const void *src);

  /// B -> S(dim) on `axis`: the block at this rank's coordinate.
  void localSlice(size_t axis, int64_t dim, const void *in, const std::vector<int64_t> &inShape,
                  size_t elementBytes, void *out);
  /// S(dim) -> P on `axis`: `in` at this rank's coordinate of a tensor that
  /// holds the identity of `reduce` elsewhere.
  void zeroPad(size_t axis, int64_t dim, Sbp::Reduce reduce, const float *in,
               const std::vector<int64_t> &inShape, float *out);
  /// B -> P(sum) on `axis`: coordinate 0 keeps `in`, the others hold zeros.
  void keepOne(size_t axis, const float *in, int64_t elements, float *out);

  /// Ends the whole job: prints "rank R failed in OP: message".
  [[noreturn]] void fail(const std::string &message);
  void check(bool ok, const std::string &error) {
    if (!ok)
      fail(error);
  }

  /// Writes the measurements and leaves the job; main returns this.
  int finish();

private:
  void *reserve(uint64_t offset, uint64_t bytes);
  /// Ends the job when no op starts for timeout_ seconds.
  void watch();

  ProgramInfo info_;
  int64_t rank_ = 0;
  std::unique_ptr<comm::Communicator> comm_;
  std::string paramsPath_, outputDir_;
  std::map<std::string, std::string> inputs_;
  std::optional<io::SafetensorsFile> params_;
  uint64_t memoryLimit_ = 0;
  // Fault injection for the tests of failure handling: SBPRT_CRASH_RANK=R
  // and SBPRT_HANG_RANK=R make rank R crash or hang at its first graph op.
  int64_t crashRank_ = -1, hangRank_ = -1;
  double timeout_ = 0;
  std::atomic<int64_t> lastProgressNs_{0};
  std::atomic<bool> finished_{false};
  std::thread watchdog_;
  unsigned char *arena_ = nullptr;
  uint64_t arenaPeak_ = 0;
  std::chrono::steady_clock::time_point start_;
};

} // namespace sbprt::rank
