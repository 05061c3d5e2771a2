// The rank driver: command line, arena, shards in and out, clean failure.
#include "runtime/rank/Rank.h"

#include "runtime/io/Npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unistd.h>

namespace sbprt::rank {

namespace {

/// What a crash reports: kept in static storage, written by the handler
/// with write(2) only.
char crashPrefix[64] = "rank ? failed in ";
char currentOp[512] = "startup";
/// Guards currentOp between the rank and its watchdog (not the crash handler,
/// which only reads it on the way out).
std::mutex currentOpMutex;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void onCrash(int signal) {
  const char *name = signal == SIGSEGV   ? "segmentation fault"
                     : signal == SIGBUS  ? "bus error"
                     : signal == SIGFPE  ? "arithmetic exception"
                     : signal == SIGILL  ? "illegal instruction"
                                         : "abort";
  // Composed first and written at once, so that lines do not interleave.
  char line[sizeof crashPrefix + sizeof currentOp + 64];
  size_t used = 0;
  for (const char *part : {static_cast<const char *>(crashPrefix),
                           static_cast<const char *>(currentOp), ": crashed (", name, ")\n"})
    for (; *part && used < sizeof line; ++part)
      line[used++] = *part;
  ssize_t ignored = ::write(STDERR_FILENO, line, used);
  (void)ignored;
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

/// The block `dim` of a row-major tensor of `shape` is split into `parts`
/// along: [outer, parts * inner] rows and the inner bytes of one part.
struct Segments {
  int64_t outer = 1;
  size_t partBytes = 0;
};
Segments segmentsOf(const std::vector<int64_t> &partShape, int64_t dim, size_t elementBytes) {
  Segments s;
  int64_t inner = 1;
  for (size_t d = 0; d < partShape.size(); ++d)
    if (static_cast<int64_t>(d) < dim)
      s.outer *= partShape[d];
    else
      inner *= partShape[d];
  s.partBytes = static_cast<size_t>(inner) * elementBytes;
  return s;
}

/// CPU programs: the arena is host memory.
class HostBackend final : public Backend {
public:
  void *allocate(uint64_t bytes, std::string &error) override {
    uint64_t rounded = (bytes + 63) / 64 * 64;
    void *arena = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!arena)
      error = "out of memory: cannot allocate the arena of " + std::to_string(bytes) + " bytes";
    return arena;
  }
  void release(void *arena) override { std::free(arena); }
  bool upload(void *dst, const void *src, size_t bytes, std::string &) override {
    std::memmove(dst, src, bytes);
    return true;
  }
  bool download(void *dst, const void *src, size_t bytes, std::string &) override {
    std::memmove(dst, src, bytes);
    return true;
  }
  bool copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                size_t rows, std::string &) override {
    for (size_t row = 0; row < rows; ++row)
      std::memmove(static_cast<char *>(dst) + row * dstPitch,
                   static_cast<const char *>(src) + row * srcPitch, width);
    return true;
  }
  bool fill(void *dst, int64_t n, float value, size_t elementBytes, std::string &) override {
    if (elementBytes == sizeof(sbprt::bf16))
      std::fill_n(static_cast<sbprt::bf16 *>(dst), n, sbprt::bf16(value));
    else
      std::fill_n(static_cast<float *>(dst), n, value);
    return true;
  }
};

HostBackend hostBackend;
Rank *activeRank = nullptr;

} // namespace

Backend::~Backend() = default;

void failActive(const std::string &message) {
  if (activeRank)
    activeRank->fail(message);
  std::string line = "rank ? failed in " + std::string(currentOp) + ": " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  std::exit(1);
}

Rank::Rank(int argc, char **argv, const ProgramInfo &info)
    : info_(info), backend_(info.backend ? info.backend : &hostBackend),
      start_(std::chrono::steady_clock::now()) {
  activeRank = this;
  std::string error;
  comm_ = comm::createMpiCommunicator(&argc, &argv, info.mesh, error);
  if (!comm_) {
    std::string line = "rank ? failed in startup: " + error + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    comm::finalizeMpi();
    std::exit(1);
  }
  rank_ = comm_->rank();
  std::snprintf(crashPrefix, sizeof crashPrefix, "rank %lld failed in ",
                static_cast<long long>(rank_));
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    std::signal(sig, onCrash);
  if (const char *crash = std::getenv("SBPRT_CRASH_RANK"))
    crashRank_ = std::atoll(crash);
  if (const char *hang = std::getenv("SBPRT_HANG_RANK"))
    hangRank_ = std::atoll(hang);
  if (const char *where = std::getenv("SBPRT_FAULT_IN"))
    faultIn_ = where;
  op("reading the command line");
  // A whole number from 1, of `what`.
  auto positive = [&](const std::string &flag, const std::string &value, const char *what) {
    char *end = nullptr;
    long long count = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end || count < 1)
      fail(flag + " expects a positive number of " + what + ", got '" + value + "'");
    return static_cast<int64_t>(count);
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc)
      fail("option " + flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--params") {
      paramsPath_ = value;
    } else if (flag == "--output-dir") {
      outputDir_ = value;
    } else if (flag == "--input") {
      size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0)
        fail("--input expects NAME=FILE.npy, got '" + value + "'");
      inputs_[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (flag == "--timeout") {
      char *end = nullptr;
      timeout_ = std::strtod(value.c_str(), &end);
      // Up to 1e6 s: the watchdog counts in int64 nanoseconds.
      if (value.empty() || *end || !(timeout_ > 0 && timeout_ <= 1e6))
        fail("--timeout expects a number of seconds in (0, 1000000], got '" + value + "'");
    } else if (flag == "--repeat") {
      repeats_ = positive(flag, value, "runs");
    } else if (flag == "--steps") {
      steps_ = positive(flag, value, "steps");
    } else if (flag == "--save-every") {
      saveEvery_ = positive(flag, value, "steps");
    } else if (flag == "--step-outputs") {
      for (size_t from = 0; from <= value.size();) {
        size_t comma = std::min(value.find(',', from), value.size());
        if (comma > from)
          stepOutputs_.insert(value.substr(from, comma - from));
        from = comma + 1;
      }
    } else if (flag == "--profile") {
      if (value != "ops")
        fail("--profile expects ops (time every op), got '" + value + "'");
      profileOps_ = true;
    } else if (flag == "--memory-limit") {
      char *end = nullptr;
      memoryLimit_ = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || *end)
        fail("--memory-limit expects a number of bytes, got '" + value + "'");
    } else {
      fail("unknown option '" + flag + "'");
    }
  }
  if (outputDir_.empty())
    fail("--output-dir is required");
  if (steps_ > 0 && repeats_ > 1)
    fail("--repeat and --steps exclude each other (each step is timed)");
  if ((!stepOutputs_.empty() || saveEvery_) && steps_ == 0)
    fail(std::string(saveEvery_ ? "--save-every" : "--step-outputs") + " needs --steps");
  // A stage may load a tied parameter that another stage updates.
  if (steps_ > 0 && info_.mesh.isPipelineAxis(0))
    fail("--steps: a pipeline's stages run one step a launch (a stage may load a parameter "
         "another updates)");
  if (steps_ > 0)
    repeats_ = steps_;
  std::error_code ec;
  std::filesystem::create_directories(outputDir_ + "/.shards", ec);
  if (ec)
    fail(outputDir_ + "/.shards: cannot create: " + ec.message());
  if (timeout_ > 0) {
    lastProgressNs_ = nowNs();
    watchdog_ = std::thread([this] { watch(); });
  }
  // The backend joins the job's GPUs (NCCL's setup waits for every rank of
  // a group): under the watchdog, as a rank that never comes would hang it.
  op("startup");
  comm_ = backend_->attach(std::move(comm_), error);
  if (!comm_) {
    std::string line = "rank " + std::to_string(rank_) + " failed in startup: " + error + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    // Not MPI_Finalize, which would wait for ranks that may be waiting for
    // this one (in NCCL's setup): a rank that exits without finalizing
    // makes mpirun stop every other rank.
    std::_Exit(1);
  }
  op("allocating the arena");
  if (memoryLimit_ && info.arenaBytes > memoryLimit_)
    fail("out of memory: the arena needs " + std::to_string(info.arenaBytes) +
         " bytes, more than the limit of " + std::to_string(memoryLimit_));
  arena_ = static_cast<unsigned char *>(backend_->allocate(info.arenaBytes, error));
  if (!arena_)
    fail(error);
}

Rank::~Rank() {
  finished_ = true;
  if (watchdog_.joinable())
    watchdog_.join();
  if (arena_)
    backend_->release(arena_);
  if (activeRank == this)
    activeRank = nullptr;
}

void Rank::watch() {
  int64_t limitNs = static_cast<int64_t>(timeout_ * 1e9);
  while (!finished_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (nowNs() - lastProgressNs_ <= limitNs)
      continue;
    std::string line;
    {
      std::lock_guard<std::mutex> lock(currentOpMutex);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_);
      line = "rank " + std::to_string(rank_) + " failed in " + currentOp + ": no progress for " +
             seconds + " s (a rank it waits for may have stopped)\n";
    }
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    // Not MPI_Abort, which only the main thread may call: a rank that exits
    // without finalizing makes mpirun stop every other rank.
    std::_Exit(1);
  }
}

void Rank::op(const char *description, const char *shapes) {
  {
    std::lock_guard<std::mutex> lock(currentOpMutex);
    std::strncpy(currentOp, description, sizeof currentOp - 1);
    currentOp[sizeof currentOp - 1] = '\0';
  }
  lastProgressNs_ = nowNs();
  if (comm_)
    comm_->progress(); // sends still going out (pipeline stages)
  if (profileOps_ && inRun_)
    markOp(description, shapes);
  if ((crashRank_ == rank_ || hangRank_ == rank_) &&
      std::strncmp(description, faultIn_.c_str(), faultIn_.size()) == 0) {
    if (crashRank_ == rank_)
      std::raise(SIGSEGV); // as a kernel bug would
    while (hangRank_ == rank_)
      std::this_thread::sleep_for(std::chrono::seconds(1)); // as a deadlock would
  }
}

void Rank::fail(const std::string &message) {
  // One write, so that lines of ranks failing together do not interleave.
  std::string line =
      "rank " + std::to_string(rank_) + " failed in " + currentOp + ": " + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  if (comm_)
    comm_->abort(1);
  std::exit(1);
}

void *Rank::reserve(uint64_t offset, uint64_t bytes) {
  if (offset + bytes > info_.arenaBytes)
    fail("bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
         ") are outside the planned arena of " + std::to_string(info_.arenaBytes));
  arenaPeak_ = std::max(arenaPeak_, offset + bytes);
  return arena_ + offset;
}

/// Adds the time from its construction to its destruction to ioSeconds_,
/// after waiting for the work queued before it (which is compute); the
/// device's clock stops at its construction and goes on at its destruction.
class Rank::IoTimer {
public:
  explicit IoTimer(Rank &rank) : rank_(rank) {
    std::string error;
    rank_.check(rank_.backend_->markCompute(false, error), error);
    rank_.check(rank_.backend_->synchronize(error), error);
    start_ = std::chrono::steady_clock::now();
  }
  ~IoTimer() {
    rank_.ioSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string error;
    rank_.check(rank_.backend_->markCompute(true, error), error);
  }

private:
  Rank &rank_;
  std::chrono::steady_clock::time_point start_;
};

void Rank::beginRepeat() {
  step_ = static_cast<int64_t>(repeatSeconds_.size());
  piecesStored_.clear();
  std::string error;
  check(backend_->synchronize(error), error);
  ioSeconds_ = 0;
  backend_->takeComputeSeconds(); // from zero: what ran before this run is not its
  repeatStart_ = std::chrono::steady_clock::now();
  check(backend_->markCompute(true, error), error);
  inRun_ = true;
}

void Rank::endRepeat() {
  std::string error;
  if (profileOps_)
    markOp(nullptr); // where the last op ends
  inRun_ = false;
  check(backend_->markCompute(false, error), error);
  check(backend_->synchronize(error), error);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - repeatStart_).count();
  repeatSeconds_.push_back(
      {seconds, std::max(0.0, seconds - ioSeconds_), backend_->takeComputeSeconds()});
  if (profileOps_)
    closeOps();
  if (!lastStep()) {
    // What this step wrote is complete.
    std::error_code ec;
    std::filesystem::create_directories(stepDir(), ec);
    std::string path = stepDir() + "/rank" + std::to_string(rank_) + ".done";
    std::ofstream done(path);
    done << seconds << "\n";
    done.close();
    if (!done)
      fail(path + ": cannot write");
  }
}

std::string Rank::stepDir() const { return outputDir_ + "/.steps/" + std::to_string(step_ + 1); }

void Rank::markOp(const char *description, const char *shapes) {
  std::string error;
  int64_t mark = backend_->markOp(error);
  check(error.empty(), error);
  opsOnDevice_ = mark >= 0;
  opStarts_.push_back(
      {description ? description : "", shapes ? shapes : "", mark, std::chrono::steady_clock::now()});
}

/// Adds the run's op times to the totals (once the work is done): every run
/// when there is one, else those after the first.
void Rank::closeOps() {
  // (closeOps comes after endRepeat's count: the run is repeatSeconds_'s last.)
  bool counted = repeats_ == 1 || repeatSeconds_.size() > 1;
  if (steps_ > 2 && lastStep())
    counted = false; // --steps: the last step writes every output
  for (size_t i = 0; counted && i + 1 < opStarts_.size(); ++i) {
    const OpStart &from = opStarts_[i], &to = opStarts_[i + 1];
    double seconds = std::chrono::duration<double>(to.host - from.host).count();
    if (from.mark >= 0) {
      std::string error;
      seconds = backend_->opSeconds(from.mark, to.mark, error);
      check(seconds >= 0, error);
    }
    OpTotal &total = opTotals_[{from.op, from.shapes}];
    total.seconds += seconds;
    total.calls += 1;
  }
  opStarts_.clear();
  backend_->resetOpMarks();
}

void Rank::load(bool isParam, const char *name, DType dtype, const std::vector<int64_t> &global,
                const std::vector<int64_t> &stored, const NdSbp &layout, void *dst, bool bf16,
                bool resident) {
  Block block = blockOf(info_.mesh, layout, global, rank_);
  size_t bytes = static_cast<size_t>(numElements(block.sizes)) *
                 (bf16 ? sizeof(sbprt::bf16) : dtypeSize(dtype));
  Carried *carried = nullptr;
  if (isParam && steps_ > 0) {
    // The first step learns the layout each parameter is loaded in; a later
    // one loads the update the step before stored, if any.
    carried = &carried_.try_emplace(name, Carried{layout, global, dtype}).first->second;
    if (carried->layout != layout || carried->global != global || carried->dtype != dtype)
      fail("--steps: parameter '" + std::string(name) + "' is loaded in two layouts");
    if (carried->held && carried->inArena) {
      if (!resident || carried->at != dst)
        fail("internal: --steps: the update of parameter '" + std::string(name) +
             "' was left in the arena where its load does not read");
      return; // the step before left it here (no wait for the device either)
    }
  }
  IoTimer timer(*this);
  // A partial sum is held by coordinate 0 of its axes, zeros elsewhere; a
  // partial max may be held by everyone.
  for (size_t axis = 0; axis < layout.size(); ++axis)
    if (layout[axis].isPartial() && layout[axis].reduce == Sbp::Reduce::Sum &&
        comm_->coordinate(axis) != 0) {
      std::vector<unsigned char> zeros(bytes);
      std::string error;
      check(backend_->upload(dst, zeros.data(), bytes, error), error);
      return;
    }
  const std::vector<int64_t> &fileShape = stored.empty() ? global : stored;
  std::string error;
  Tensor shard;
  std::string what = std::string(isParam ? "parameter '" : "input '") + name + "'";
  const Tensor *source = &shard;
  if (carried && carried->held) {
    source = &carried->shard;
  } else if (isParam) {
    if (paramsPath_.empty())
      fail("the program needs parameters: pass --params FILE.safetensors");
    if (!params_) {
      params_ = io::SafetensorsFile::open(paramsPath_, error);
      if (!params_)
        fail(error);
    }
    const io::SafetensorsEntry *entry = params_->find(name);
    if (!entry)
      fail(paramsPath_ + ": has no " + what);
    if (entry->dtype != dtype || entry->shape != fileShape)
      fail(paramsPath_ + ": " + what + " is " + entry->dtypeName + " " +
           shapeToString(entry->shape) + ", expected " + safetensorsName(dtype) + " " +
           shapeToString(fileShape));
    check(params_->readSlice(*entry, block.offsets, block.sizes, shard, error,
                             stored.empty() ? nullptr : &global),
          error);
  } else {
    auto file = inputs_.find(name);
    if (file == inputs_.end())
      fail("no file for " + what + ": pass --input " + std::string(name) + "=FILE.npy");
    std::vector<int64_t> offsets = block.offsets, sizes = block.sizes;
    // --steps: a file of one more leading dimension holds a batch a step,
    // step k reading batch k modulo their number.
    DType fileType;
    std::vector<int64_t> fileShape;
    if (steps_ > 0 && io::readNpyHeader(file->second, fileType, fileShape, error) &&
        isBatches(fileShape, global)) {
      offsets.insert(offsets.begin(), step_ % fileShape.front());
      sizes.insert(sizes.begin(), 1);
    }
    bool batches = offsets.size() > block.offsets.size();
    // {-1} until the file's header gives its shape ([] for a scalar).
    std::vector<int64_t> shape = {-1};
    bool ok = io::readNpySlice(file->second, offsets, sizes, shard, shape, error);
    if (shape != std::vector<int64_t>{-1} && shape != global && !batches)
      fail(file->second + ": " + what + " has shape " + shapeToString(shape) + ", expected " +
           shapeToString(global) +
           (steps_ > 0 ? " (or [S, ...] with it: S batches, a step each)" : ""));
    check(ok, error);
    if (batches && !shard.reshape(block.sizes))
      fail("internal: " + what + ": a batch of " + shapeToString(shard.shape()) + " is not " +
           shapeToString(block.sizes));
    if (shard.dtype() != dtype)
      fail(file->second + ": " + what + " has dtype " + dtypeName(shard.dtype()) +
           ", expected " + dtypeName(dtype));
  }
  if (bf16) {
    std::vector<sbprt::bf16> rounded(source->as<float>(),
                                     source->as<float>() + source->numElements());
    check(backend_->upload(dst, rounded.data(), bytes, error), error);
    return;
  }
  check(backend_->upload(dst, source->data(), bytes, error), error);
}

void Rank::fetch(Tensor &into, DType dtype, std::vector<int64_t> sizes, const void *src, bool bf16,
                 int64_t pieces) {
  if (pieces > 1)
    sizes[0] /= pieces;
  // Else reused: a step's updates fill the last step's (a default Tensor,
  // with no bytes, is no scalar).
  if (into.dtype() != dtype || into.shape() != sizes ||
      into.numBytes() != static_cast<size_t>(numElements(sizes)) * dtypeSize(dtype))
    into = Tensor(dtype, sizes);
  std::string error;
  if (bf16) {
    std::vector<sbprt::bf16> held(into.numElements());
    check(backend_->download(held.data(), src, held.size() * sizeof(sbprt::bf16), error), error);
    std::copy(held.begin(), held.end(), into.as<float>());
  } else {
    check(backend_->download(into.data(), src, into.numBytes(), error), error);
  }
}

void Rank::store(const char *name, DType dtype, const std::vector<int64_t> &global,
                 const NdSbp &layout, const void *src, bool bf16, int64_t piece, int64_t pieces,
                 bool resident) {
  Block block = blockOf(info_.mesh, layout, global, rank_);
  Tensor fetched;
  const Tensor *shard = nullptr; // the shard (or piece) at src as its file holds it
  auto found = steps_ > 0 ? carried_.find(name) : carried_.end();
  bool writes =
      lastStep() || stepOutputs_.count(name) || (saveEvery_ && (step_ + 1) % saveEvery_ == 0);
  for (size_t axis = 0; axis < layout.size(); ++axis)
    if (layout[axis].isBroadcast() && !info_.mesh.isPipelineAxis(axis) &&
        comm_->coordinate(axis) != info_.mesh.replicaWriter(name, axis))
      writes = false; // a replica that another coordinate of this axis writes
  if (found == carried_.end() && !writes)
    return; // an output an earlier step does not write, or another's replica
  // Loads and stores wait for the device's work (IoTimer); a resident
  // update left in place moves nothing and waits for nothing.
  std::optional<IoTimer> timer;
  if (writes || found == carried_.end() || !(resident && pieces == 1))
    timer.emplace(*this);
  if (found != carried_.end()) {
    // The update of a parameter, which the next step loads as it would read
    // the file: the same block of the same layout, held by this rank alone.
    Carried &carried = found->second;
    bool partial =
        std::any_of(layout.begin(), layout.end(), [](const Sbp &sbp) { return sbp.isPartial(); });
    if (carried.layout != layout || carried.global != global || carried.dtype != dtype || partial)
      fail("--steps: the update of parameter '" + std::string(name) + "' is stored as " +
           toString(layout) + " " + shapeToString(global) + ", but it is loaded as " +
           toString(carried.layout) + " " + shapeToString(carried.global) +
           " (run the steps as launches of one step each)");
    carried.inArena = resident && pieces == 1;
    if (carried.inArena) {
      carried.at = src; // where the next step's load reads it: nothing to copy
    } else if (pieces == 1) {
      fetch(carried.shard, dtype, block.sizes, src, bf16, 1);
      shard = &carried.shard;
    } else {
      fetch(fetched, dtype, block.sizes, src, bf16, pieces);
      shard = &fetched;
      if (carried.shard.dtype() != dtype || carried.shard.shape() != block.sizes ||
          carried.shard.numBytes() != fetched.numBytes() * pieces)
        carried.shard = Tensor(dtype, block.sizes);
      // Piece `piece` holds the shard's rows piece, piece + pieces, ...
      int64_t rows = fetched.shape().empty() ? 1 : fetched.shape()[0];
      size_t rowBytes = fetched.numBytes() / std::max<int64_t>(rows, 1);
      const auto *from = static_cast<const unsigned char *>(fetched.data());
      auto *to = static_cast<unsigned char *>(carried.shard.data());
      for (int64_t row = 0; row < rows; ++row)
        std::memcpy(to + (piece + row * pieces) * rowBytes, from + row * rowBytes, rowBytes);
    }
    carried.held = true;
  }
  if (!writes)
    return; // an earlier step keeps only what the next step loads
  if (!shard) {
    fetch(fetched, dtype, block.sizes, src, bf16, pieces);
    shard = &fetched;
  }
  std::string dir = outputDir_ + "/.shards";
  if (!lastStep()) {
    dir = stepDir();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      fail(dir + ": cannot create: " + ec.message());
  }
  std::string path = dir + "/" + name + ".rank" + std::to_string(rank_) + ".npy";
  std::string error;
  if (pieces > 1) {
    // The first piece this run writes makes the file.
    bool create = piecesStored_.insert(path).second;
    check(io::writeNpyRows(path, block.sizes, *shard, piece, pieces, create, error), error);
    return;
  }
  check(io::writeNpy(path, *shard, error), error);
}

void Rank::localSlice(size_t axis, int64_t dim, const void *in,
                      const std::vector<int64_t> &inShape, size_t elementBytes, void *out) {
  int64_t p = info_.mesh.shape[axis], c = comm_->coordinate(axis);
  std::vector<int64_t> part = inShape;
  part[dim] /= p;
  Segments s = segmentsOf(part, dim, elementBytes);
  std::string error;
  check(backend_->copyRows(out, s.partBytes, static_cast<const unsigned char *>(in) + c * s.partBytes,
                           p * s.partBytes, s.partBytes, s.outer, error),
        error);
}

void Rank::zeroPad(size_t axis, int64_t dim, Sbp::Reduce reduce, const void *in,
                   const std::vector<int64_t> &inShape, size_t elementBytes, void *out) {
  int64_t p = info_.mesh.shape[axis], c = comm_->coordinate(axis);
  float identity = reduce == Sbp::Reduce::Sum ? 0.0f : -std::numeric_limits<float>::infinity();
  std::string error;
  check(backend_->fill(out, numElements(inShape) * p, identity, elementBytes, error), error);
  Segments s = segmentsOf(inShape, dim, elementBytes);
  check(backend_->copyRows(reinterpret_cast<unsigned char *>(out) + c * s.partBytes,
                           p * s.partBytes, in, s.partBytes, s.partBytes, s.outer, error),
        error);
}

IndexPlace Rank::placeOf(IndexPlace place, const NdSbp &layout) const {
  Block block = blockOf(info_.mesh, layout, place.shape, rank_);
  place.block = std::move(block.sizes);
  place.offsets = std::move(block.offsets);
  return place;
}

void Rank::keepOne(size_t axis, const void *in, int64_t elements, size_t elementBytes,
                   void *out) {
  std::string error;
  size_t bytes = elements * elementBytes;
  check(comm_->coordinate(axis) == 0
            ? backend_->copyRows(out, bytes, in, bytes, bytes, 1, error)
            : backend_->fill(out, elements, 0.0f, elementBytes, error),
        error);
}

int Rank::finish() {
  op("finishing");
  std::string error;
  check(backend_->synchronize(error), error);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  nlohmann::json stats = {{"rank", rank_},
                          {"program", info_.name},
                          // Per run: every run sends the same (--repeat).
                          {"comm_bytes", comm_->bytesSent() / static_cast<uint64_t>(repeats_)},
                          {"arena_bytes", info_.arenaBytes},
                          {"arena_peak_bytes", arenaPeak_},
                          {"seconds", seconds}};
  if (!repeatSeconds_.empty()) {
    stats["repeats"] = nlohmann::json::array();
    for (const RepeatTime &t : repeatSeconds_) {
      nlohmann::json repeat = {{"seconds", t.seconds}, {"compute_seconds", t.computeSeconds}};
      if (t.deviceSeconds >= 0)
        repeat["device_compute_seconds"] = t.deviceSeconds;
      stats["repeats"].push_back(repeat);
    }
  }
  if (profileOps_) {
    std::vector<std::pair<std::pair<std::string, std::string>, OpTotal>> ops(opTotals_.begin(),
                                                                             opTotals_.end());
    std::stable_sort(ops.begin(), ops.end(), [](const auto &a, const auto &b) {
      return a.second.seconds > b.second.seconds;
    });
    stats["ops"] = nlohmann::json::array();
    for (const auto &[op, total] : ops) {
      nlohmann::json entry = {{"op", op.first}, {"seconds", total.seconds}, {"calls", total.calls}};
      if (!op.second.empty())
        entry["shapes"] = op.second;
      stats["ops"].push_back(entry);
    }
    stats["ops_clock"] = opsOnDevice_ ? "device" : "host";
  }
  std::string path = outputDir_ + "/.shards/rank" + std::to_string(rank_) + ".json";
  std::ofstream file(path);
  file << stats.dump() << "\n";
  file.close();
  if (!file)
    fail(path + ": cannot write");
  // Leaving the job (NCCL's teardown, MPI's finalize) stays under the
  // watchdog too.
  op("leaving the job");
  comm_.reset();
  comm::finalizeMpi();
  finished_ = true;
  if (watchdog_.joinable())
    watchdog_.join();
  return 0;
}

} // namespace sbprt::rank
