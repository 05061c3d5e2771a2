// The communicator of the CPU rank executables: ring collectives over MPI
// point-to-point messages, one MPI communicator per mesh axis.
//
// Each collective on a group of p ranks is a ring (or, for a broadcast, a
// chain) of p - 1 steps in which every rank sends to its successor and
// receives from its predecessor, so the bytes a rank sends are fixed by the
// shapes alone (ringBytesSent in Ring.cpp) and the reduction order is fixed
// too: the same inputs give bit-identical outputs on every run. MPI
// collectives are not used for data: their algorithms, and so their bytes
// and summation orders, are the library's choice.
#include "runtime/comm/Communicator.h"

// The C API only: OpenMPI's mpi.h would otherwise declare the C++ bindings,
// which MPI::MPI_C does not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <list>
#include <utility>

// Under AddressSanitizer (make check-sanitizers), every MPI process would
// fail at exit on what OpenMPI itself never frees (its op tables, buffers of
// components it has already unloaded, so no suppression can name them).
// Leak checking is off in MPI processes; every other check stays on, and the
// compiler's own tools keep leak checking. Without ASan this is never called.
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }

namespace sbprt::comm {
namespace {

/// The largest message sent at once: MPI counts are ints, so longer buffers
/// go out as several messages.
constexpr size_t kMaxMessageBytes = size_t(1) << 30;
static_assert(kMaxMessageBytes <= INT_MAX);

/// Collectives have the axis communicators to themselves: one tag serves.
constexpr int kCollectiveTag = 0;

size_t piecesOf(size_t bytes) { return (bytes + kMaxMessageBytes - 1) / kMaxMessageBytes; }

/// Where all-reduce chunk `index` of `parts` starts in `n` elements (as in
/// Ring.cpp): floor(index * n / parts), so uneven n and n < parts work.
int64_t chunkBegin(int64_t n, int64_t index, int64_t parts) {
  return index * (n / parts) + index * (n % parts) / parts;
}

/// acc[i] = acc[i] (op) x[i], in f32 (bf16 elements rounded once per step).
template <typename T> void combine(T *acc, const T *x, int64_t n, Reduce op) {
  if (op == Reduce::Sum)
    for (int64_t i = 0; i < n; ++i)
      acc[i] = static_cast<float>(acc[i]) + static_cast<float>(x[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      acc[i] = std::max(static_cast<float>(acc[i]), static_cast<float>(x[i]));
}

/// Block `index` of `parts` equal blocks along `dim` of a row-major tensor:
/// `rows` runs of `run` bytes, `stride` bytes apart, the first at `offset`.
struct BlockRuns {
  int64_t rows;
  size_t run, stride, offset;
};

BlockRuns blockRuns(const std::vector<int64_t> &shape, size_t elementBytes, int64_t dim,
                    int64_t parts, int64_t index) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  size_t run = static_cast<size_t>(shape[dim] / parts * inner) * elementBytes;
  return {outer, run, run * parts, run * index};
}

/// Copies `rows` runs of `run` bytes from `src` to `dst`, each side with its
/// own stride: packs a block (dst contiguous) or unpacks one (src contiguous).
void copyRuns(const char *src, size_t srcStride, char *dst, size_t dstStride, int64_t rows,
              size_t run) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * dstStride, src + r * srcStride, run);
}

/// Copies block `index` of `parts` along `dim` of `whole` into `block`.
void packBlock(const void *whole, const std::vector<int64_t> &shape, size_t elementBytes,
               int64_t dim, int64_t parts, int64_t index, void *block) {
  BlockRuns b = blockRuns(shape, elementBytes, dim, parts, index);
  copyRuns(static_cast<const char *>(whole) + b.offset, b.stride, static_cast<char *>(block), b.run,
           b.rows, b.run);
}

/// Copies `block` into block `index` of `parts` along `dim` of `whole`.
void unpackBlock(const void *block, const std::vector<int64_t> &shape, size_t elementBytes,
                 int64_t dim, int64_t parts, int64_t index, void *whole) {
  BlockRuns b = blockRuns(shape, elementBytes, dim, parts, index);
  copyRuns(static_cast<const char *>(block), b.run, static_cast<char *>(whole) + b.offset, b.stride,
           b.rows, b.run);
}

/// This rank's place in the group of one mesh axis.
struct Ring {
  MPI_Comm comm;
  int64_t p, position;
  /// The group rank `offset` places further along the ring.
  int at(int64_t offset) const { return static_cast<int>(((position + offset) % p + p) % p); }
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(const Mesh &mesh, int64_t rank, int64_t size, std::vector<MPI_Comm> axisComms)
      : Communicator(mesh), rank_(rank), size_(size), coordinates_(mesh.coordinates(rank)),
        axisComms_(std::move(axisComms)) {}

  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    completeSends(/*wait=*/true);
    for (MPI_Comm &comm : axisComms_)
      MPI_Comm_free(&comm);
  }

  int64_t rank() const override { return rank_; }
  int64_t size() const override { return size_; }

  void allReduce(size_t axis, void *data, const Local &in, Reduce op, void *scratch) override {
    if (in.elementBytes == sizeof(bf16))
      ringAllReduce(axis, static_cast<bf16 *>(data), in, op, scratch);
    else
      ringAllReduce(axis, static_cast<float *>(data), in, op, scratch);
  }
  void allGather(size_t axis, const void *in, const Local &inShape, int64_t dim, void *out,
                 void *scratch) override;
  void reduceScatter(size_t axis, const void *in, const Local &inShape, int64_t dim, Reduce op,
                     void *out, void *scratch) override {
    if (inShape.elementBytes == sizeof(bf16))
      ringReduceScatter(axis, static_cast<const bf16 *>(in), inShape, dim, op,
                        static_cast<bf16 *>(out), scratch);
    else
      ringReduceScatter(axis, static_cast<const float *>(in), inShape, dim, op,
                        static_cast<float *>(out), scratch);
  }
  void allToAll(size_t axis, const void *in, const Local &inShape, int64_t splitDim,
                int64_t concatDim, void *out, void *scratch) override;
  void broadcast(size_t axis, void *data, const Local &in, int64_t root, void *scratch) override;

  /// A send does not wait for the receiver: a blocking send of a large
  /// message would hold a pipeline stage until the next reached its
  /// receive, where it may be busy with another micro-batch. The bytes are
  /// copied (the caller reuses them at once) and the copy freed once sent.
  /// Pieces of one send go in order, as exchange's receive expects them.
  void send(int64_t peer, const void *data, size_t bytes, int tag) override {
    completeSends(/*wait=*/false);
    PendingSend &pending = pendingSends_.emplace_back();
    const char *from = static_cast<const char *>(data);
    pending.bytes.assign(from, from + bytes);
    pending.requests.resize(piecesOf(bytes));
    for (size_t i = 0; i < pending.requests.size(); ++i) {
      size_t offset = i * kMaxMessageBytes;
      MPI_Isend(pending.bytes.data() + offset,
                static_cast<int>(std::min(kMaxMessageBytes, bytes - offset)), MPI_BYTE,
                static_cast<int>(peer), tag, MPI_COMM_WORLD, &pending.requests[i]);
    }
    bytesSent_ += bytes;
  }
  void progress() override {
    if (!pendingSends_.empty())
      completeSends(/*wait=*/false);
  }
  void recv(int64_t peer, void *data, size_t bytes, int tag) override {
    exchange(MPI_COMM_WORLD, tag, MPI_PROC_NULL, nullptr, 0, static_cast<int>(peer), data, bytes);
  }

  std::vector<std::string> fromEveryRank(const std::string &mine) override {
    int length = static_cast<int>(mine.size());
    std::vector<int> lengths(size_), starts(size_);
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int64_t r = 0; r < size_; ++r) {
      starts[r] = total;
      total += lengths[r];
    }
    std::string all(total, '\0');
    MPI_Allgatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), starts.data(),
                   MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> each;
    for (int64_t r = 0; r < size_; ++r)
      each.push_back(all.substr(starts[r], lengths[r]));
    return each;
  }

  [[noreturn]] void abort(int code) override {
    // Not MPI_Abort: when several ranks fail at once (a bad input every
    // rank reads), their aborts race in mpirun, which now and then crashed
    // on them (a segmentation fault in its show_help). A rank that exits
    // without finalizing makes mpirun stop every other rank, as the
    // watchdog's does.
    std::fflush(stderr);
    std::_Exit(code);
  }

private:
  template <typename T>
  void ringAllReduce(size_t axis, T *data, const Local &in, Reduce op, void *scratch);
  template <typename T>
  void ringReduceScatter(size_t axis, const T *in, const Local &inShape, int64_t dim, Reduce op,
                         T *out, void *scratch);
  Ring ringOf(size_t axis) const {
    return {axisComms_[axis], mesh_.shape[axis], coordinates_[axis]};
  }

  /// Sends `sendBytes` to `dest` while receiving `recvBytes` from `source`
  /// (either side may be empty), in pieces of at most kMaxMessageBytes: piece
  /// i of both sides goes in one step, so a ring of exchanges cannot
  /// deadlock. Errors abort the job (MPI_ERRORS_ARE_FATAL, MPI's default).
  void exchange(MPI_Comm comm, int tag, int dest, const void *sendData, size_t sendBytes,
                int source, void *recvData, size_t recvBytes) {
    const char *outgoing = static_cast<const char *>(sendData);
    char *incoming = static_cast<char *>(recvData);
    size_t pieces = std::max(piecesOf(sendBytes), piecesOf(recvBytes));
    for (size_t i = 0; i < pieces; ++i) {
      size_t offset = i * kMaxMessageBytes;
      auto countAt = [&](size_t total) {
        return static_cast<int>(offset < total ? std::min(kMaxMessageBytes, total - offset) : 0);
      };
      int sendCount = countAt(sendBytes), recvCount = countAt(recvBytes);
      if (sendCount && recvCount)
        MPI_Sendrecv(outgoing + offset, sendCount, MPI_BYTE, dest, tag, incoming + offset,
                     recvCount, MPI_BYTE, source, tag, comm, MPI_STATUS_IGNORE);
      else if (sendCount)
        MPI_Send(outgoing + offset, sendCount, MPI_BYTE, dest, tag, comm);
      else
        MPI_Recv(incoming + offset, recvCount, MPI_BYTE, source, tag, comm, MPI_STATUS_IGNORE);
    }
    bytesSent_ += sendBytes;
  }

  /// One step of a ring: send to the successor, receive from the predecessor.
  void ringStep(const Ring &ring, const void *sendData, size_t sendBytes, void *recvData,
                size_t recvBytes) {
    exchange(ring.comm, kCollectiveTag, ring.at(1), sendData, sendBytes, ring.at(-1), recvData,
             recvBytes);
  }

  /// Frees the copies of the sends that have completed, oldest first up to
  /// the first that has not (a check per op stays cheap with thousands
  /// pending, as GPipe's first stage has); with `wait`, waits for all.
  void completeSends(bool wait) {
    while (!pendingSends_.empty()) {
      PendingSend &oldest = pendingSends_.front();
      int done = 1;
      int count = static_cast<int>(oldest.requests.size());
      if (wait)
        MPI_Waitall(count, oldest.requests.data(), MPI_STATUSES_IGNORE);
      else
        MPI_Testall(count, oldest.requests.data(), &done, MPI_STATUSES_IGNORE);
      if (!done)
        return;
      pendingSends_.pop_front();
    }
  }

  struct PendingSend {
    std::vector<char> bytes;
    std::vector<MPI_Request> requests;
  };

  int64_t rank_, size_;
  std::vector<int64_t> coordinates_;
  std::vector<MPI_Comm> axisComms_;
  std::list<PendingSend> pendingSends_;
};

// Ring all-reduce on p chunks of the flat array: a reduce-scatter, after
// which this rank holds chunk (position + 1) reduced over the group, then an
// all-gather of the reduced chunks. Each rank sends about 2 (p - 1) / p of
// the array, in 2 (p - 1) steps.
template <typename T>
void MpiCommunicator::ringAllReduce(size_t axis, T *data, const Local &in, Reduce op,
                                    void *scratch) {
  const Ring ring = ringOf(axis);
  if (ring.p == 1)
    return;
  int64_t n = in.elements(), p = ring.p;
  auto begin = [&](int64_t offset) { return chunkBegin(n, ring.at(offset), p); };
  auto bytes = [&](int64_t offset) {
    return static_cast<size_t>(chunkBegin(n, ring.at(offset) + 1, p) - begin(offset)) *
           sizeof(T);
  };
  T *received = static_cast<T *>(scratch);
  // After step s, chunk (position - s - 1) here is reduced over s + 2 ranks.
  for (int64_t s = 0; s + 1 < p; ++s) {
    ringStep(ring, data + begin(-s), bytes(-s), received, bytes(-s - 1));
    combine(data + begin(-s - 1), received, bytes(-s - 1) / sizeof(T), op);
  }
  for (int64_t s = 0; s + 1 < p; ++s)
    ringStep(ring, data + begin(1 - s), bytes(1 - s), data + begin(-s), bytes(-s));
}

// Ring all-gather of whole inputs: block c of the result comes from the rank
// at coordinate c. Along dim 0 (or any dim with only 1s before it) the blocks
// are the result; otherwise they are gathered in the scratch and interleaved.
void MpiCommunicator::allGather(size_t axis, const void *in, const Local &inShape, int64_t dim,
                                void *out, void *scratch) {
  const Ring ring = ringOf(axis);
  size_t bytes = inShape.bytes();
  if (ring.p == 1) {
    std::memcpy(out, in, bytes);
    return;
  }
  bool interleave = blockRuns(inShape.shape, inShape.elementBytes, dim, 1, 0).rows > 1;
  char *blocks = static_cast<char *>(interleave ? scratch : out);
  std::memcpy(blocks + ring.position * bytes, in, bytes);
  for (int64_t s = 0; s + 1 < ring.p; ++s)
    ringStep(ring, blocks + ring.at(-s) * bytes, bytes, blocks + ring.at(-s - 1) * bytes, bytes);
  if (!interleave)
    return;
  std::vector<int64_t> outShape = inShape.shape;
  outShape[dim] *= ring.p;
  for (int64_t c = 0; c < ring.p; ++c)
    unpackBlock(blocks + c * bytes, outShape, inShape.elementBytes, dim, ring.p, c, out);
}

// Ring reduce-scatter over p blocks: at step s this rank passes on block
// (position - s - 1), reduced over s + 1 ranks, and adds its own part to
// block (position - s - 2) as it arrives; block `position` arrives last, in
// `out`. Contiguous blocks (dim 0, or only 1s before it) are read where
// they are and the travelling sum alternates between the scratch (one
// block) and `out`; otherwise the input is first packed into the scratch.
template <typename T>
void MpiCommunicator::ringReduceScatter(size_t axis, const T *in, const Local &inShape,
                                        int64_t dim, Reduce op, T *out, void *scratch) {
  const Ring ring = ringOf(axis);
  int64_t p = ring.p, m = inShape.elements() / p;
  if (p == 1) {
    std::memcpy(out, in, inShape.bytes());
    return;
  }
  size_t bytes = static_cast<size_t>(m) * sizeof(T);
  if (outerOf(inShape.shape, dim) == 1) {
    T *sums[2] = {out, static_cast<T *>(scratch)};
    // Step s receives into sums[(first + s) % 2]; the last one into out.
    int64_t first = (p - 2) % 2;
    const T *sending = in + ring.at(-1) * m;
    for (int64_t s = 0; s + 1 < p; ++s) {
      T *arrived = sums[(first + s) % 2];
      ringStep(ring, sending, bytes, arrived, bytes);
      combine(arrived, in + ring.at(-s - 2) * m, m, op);
      sending = arrived;
    }
    return;
  }
  T *blocks = static_cast<T *>(scratch);
  for (int64_t c = 0; c < p; ++c)
    packBlock(in, inShape.shape, sizeof(T), dim, p, c, blocks + c * m);
  for (int64_t s = 0; s + 1 < p; ++s) {
    T *arrived = blocks + ring.at(-s - 2) * m;
    ringStep(ring, blocks + ring.at(-s - 1) * m, bytes, out, bytes);
    if (s + 2 < p)
      combine(arrived, out, m, op);
    else
      combine(out, arrived, m, op);
  }
}

// Pairwise exchange: at step s = 1 .. p-1 this rank sends its block for
// coordinate (position + s) and receives the block from (position - s) in
// the slot of its own block, which went straight to `out` first.
void MpiCommunicator::allToAll(size_t axis, const void *in, const Local &inShape, int64_t splitDim,
                               int64_t concatDim, void *out, void *scratch) {
  const Ring ring = ringOf(axis);
  size_t bytes = inShape.bytes();
  if (ring.p == 1) {
    std::memcpy(out, in, bytes);
    return;
  }
  int64_t p = ring.p;
  size_t blockBytes = bytes / p, elementBytes = inShape.elementBytes;
  std::vector<int64_t> outShape = inShape.shape;
  outShape[splitDim] /= p;
  outShape[concatDim] *= p;
  char *blocks = static_cast<char *>(scratch);
  for (int64_t c = 0; c < p; ++c)
    packBlock(in, inShape.shape, elementBytes, splitDim, p, c, blocks + c * blockBytes);
  char *received = blocks + ring.position * blockBytes;
  unpackBlock(received, outShape, elementBytes, concatDim, p, ring.position, out);
  for (int64_t s = 1; s < p; ++s) {
    exchange(ring.comm, kCollectiveTag, ring.at(s), blocks + ring.at(s) * blockBytes, blockBytes,
             ring.at(-s), received, blockBytes);
    unpackBlock(received, outShape, elementBytes, concatDim, p, ring.at(-s), out);
  }
}

// A chain from the root along the ring: each rank receives the whole buffer
// from its predecessor, then forwards it, except the last.
void MpiCommunicator::broadcast(size_t axis, void *data, const Local &in, int64_t root,
                                void *scratch) {
  const Ring ring = ringOf(axis);
  int64_t link = ((ring.position - root) % ring.p + ring.p) % ring.p;
  if (link > 0)
    ringStep(ring, nullptr, 0, data, in.bytes());
  if (link + 1 < ring.p)
    ringStep(ring, data, in.bytes(), nullptr, 0);
}

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv, const Mesh &mesh,
                                                    std::string &error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init(argc, argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != mesh.numDevices()) {
    error = "the job has " + std::to_string(size) + " ranks but the mesh needs " +
            std::to_string(mesh.numDevices());
    return nullptr;
  }
  // The ranks that share every other coordinate form an axis's group; keyed
  // by the axis coordinate, their ranks in it are their coordinates.
  std::vector<int64_t> coords = mesh.coordinates(rank);
  std::vector<MPI_Comm> axisComms(mesh.shape.size());
  for (size_t axis = 0; axis < mesh.shape.size(); ++axis) {
    std::vector<int64_t> groupKey = coords;
    groupKey[axis] = 0;
    MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(mesh.rankOf(groupKey)),
                   static_cast<int>(coords[axis]), &axisComms[axis]);
  }
  return std::make_unique<MpiCommunicator>(mesh, rank, size, std::move(axisComms));
}

void finalizeMpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Finalize();
}

} // namespace sbprt::comm
