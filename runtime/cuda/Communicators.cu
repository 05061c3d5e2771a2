// NCCL on the rank's stream, and MPI through host buffers.
#include "runtime/cuda/Communicators.h"
#include "runtime/cuda/Context.h"

#include <nccl.h>

#include <cstdlib>
#include <vector>

namespace sbprt::cuda {
namespace {

using comm::Kind;
using comm::Local;
using comm::Reduce;
using cuda::check;

void check(ncclResult_t status, const char *what) {
  if (status != ncclSuccess)
    rank::failActive(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(status));
}

/// Declared first in a collective: when it returns (all of it queued, any
/// NCCL group ended), with SBPRT_CUDA_SYNC, waits for it, so that one
/// failing on the device is reported as itself, like a kernel
/// (cuda::launched).
class Queued {
public:
  explicit Queued(const char *what) : what_(what) {}
  ~Queued() {
    if (context().syncEachOp)
      cuda::check(cudaStreamSynchronize(context().stream), what_);
  }

private:
  const char *what_;
};

using comm::outerOf;

/// Waits for the work queued on `stream`, moving MPI's messages along
/// meanwhile: a background send (a pipeline stage's value to the next)
/// leaves while this rank's GPU computes, not only when its host next
/// reaches MPI.
void waitMovingMessages(cudaStream_t stream, comm::Communicator &mpi, const char *what) {
  for (;;) {
    cudaError_t state = cudaStreamQuery(stream);
    if (state != cudaErrorNotReady)
      return check(state, what);
    mpi.progress();
  }
}

/// Moves the p parts of dimension `dim` of `in` (row-major, `outer` rows of
/// p parts of `partBytes`) into p consecutive blocks of `dst`; or back, the
/// other way round, when `unpack`; on the rank's stream.
void regroup(char *dst, const char *src, int64_t outer, int64_t p, size_t partBytes,
             bool unpack) {
  for (int64_t j = 0; j < p; ++j) {
    size_t block = j * outer * partBytes, part = j * partBytes;
    if (unpack)
      check(copyRows(dst + part, p * partBytes, src + block, partBytes, partBytes, outer),
            "interleaving blocks");
    else
      check(copyRows(dst + block, partBytes, src + part, p * partBytes, partBytes, outer),
            "packing blocks");
  }
}

class NcclCommunicator final : public comm::Communicator {
public:
  NcclCommunicator(std::unique_ptr<comm::Communicator> mpi, cudaStream_t stream)
      : Communicator(mpi->mesh()), mpi_(std::move(mpi)), stream_(stream) {}
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    for (ncclComm_t c : comms_)
      if (c)
        ncclCommDestroy(c);
  }

  /// Gives up the communicators joined so far after a failed init: an
  /// abort, unlike a destroy, does not wait for peers still joining, so the
  /// rank gets to report its error and end the job.
  void abandon() {
    for (ncclComm_t c : comms_)
      if (c)
        ncclCommAbort(c);
    comms_.clear();
  }

  bool init(std::string &error) {
    for (size_t axis = 0; axis < mesh_.shape.size(); ++axis) {
      int p = static_cast<int>(mesh_.shape[axis]);
      if (p == 1) {
        comms_.push_back(nullptr);
        continue;
      }
      ncclUniqueId id{};
      int c = static_cast<int>(coordinate(axis));
      if (c == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
        error = "cannot make an NCCL id";
        abandon();
        return false;
      }
      mpi_->broadcast(axis, &id, Local{{static_cast<int64_t>(sizeof id)}, 1}, 0, nullptr);
      ncclComm_t comm = nullptr;
      if (ncclResult_t status = ncclCommInitRank(&comm, p, id, c); status != ncclSuccess) {
        error = "cannot join NCCL on mesh axis '" + mesh_.axes[axis] +
                "': " + ncclGetErrorString(status);
        abandon();
        return false;
      }
      comms_.push_back(comm);
    }
    return true;
  }

  int64_t rank() const override { return mpi_->rank(); }
  int64_t size() const override { return mpi_->size(); }

  void allReduce(size_t axis, void *data, const Local &in, Reduce op, void *) override {
    Queued done("all-reduce");
    if (!count(Kind::AllReduce, axis, in))
      return;
    check(ncclAllReduce(data, data, in.elements(), ncclType(in), ncclOp(op), comms_[axis],
                        stream_),
          "all-reduce");
  }

  void allGather(size_t axis, const void *in, const Local &inShape, int64_t dim, void *out,
                 void *scratch) override {
    Queued done("all-gather");
    int64_t p = mesh_.shape[axis], outer = outerOf(inShape.shape, dim);
    if (!count(Kind::AllGather, axis, inShape)) {
      check(cudaMemcpyAsync(out, in, inShape.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "all-gather");
      return;
    }
    void *gathered = outer == 1 ? out : scratch;
    check(ncclAllGather(in, gathered, inShape.bytes(), ncclUint8, comms_[axis], stream_),
          "all-gather");
    if (outer > 1)
      regroup(static_cast<char *>(out), static_cast<const char *>(scratch), outer, p,
              inShape.bytes() / outer, /*unpack=*/true);
  }

  void reduceScatter(size_t axis, const void *in, const Local &inShape, int64_t dim, Reduce op,
                     void *out, void *scratch) override {
    Queued done("reduce-scatter");
    int64_t p = mesh_.shape[axis], outer = outerOf(inShape.shape, dim);
    if (!count(Kind::ReduceScatter, axis, inShape)) {
      check(cudaMemcpyAsync(out, in, inShape.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "reduce-scatter");
      return;
    }
    const void *blocks = in;
    if (outer > 1) {
      regroup(static_cast<char *>(scratch), static_cast<const char *>(in), outer, p,
              inShape.bytes() / outer / p, /*unpack=*/false);
      blocks = scratch;
    }
    check(ncclReduceScatter(blocks, out, inShape.elements() / p, ncclType(inShape), ncclOp(op),
                            comms_[axis], stream_),
          "reduce-scatter");
  }

  void allToAll(size_t axis, const void *in, const Local &inShape, int64_t splitDim,
                int64_t concatDim, void *out, void *scratch) override {
    Queued done("all-to-all");
    int64_t p = mesh_.shape[axis];
    if (!count(Kind::AllToAll, axis, inShape)) {
      check(cudaMemcpyAsync(out, in, inShape.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "all-to-all");
      return;
    }
    size_t blockBytes = inShape.bytes() / p;
    int64_t splitOuter = outerOf(inShape.shape, splitDim);
    std::vector<int64_t> blockShape = inShape.shape;
    blockShape[splitDim] /= p;
    int64_t concatOuter = outerOf(blockShape, concatDim);
    const char *send = static_cast<const char *>(in);
    if (splitOuter > 1) {
      regroup(static_cast<char *>(scratch), send, splitOuter, p, blockBytes / splitOuter,
              /*unpack=*/false);
      send = static_cast<const char *>(scratch);
    }
    // Received blocks land in `out` unless they must be interleaved and the
    // scratch is free to hold them.
    bool receiveInScratch = concatOuter > 1 && splitOuter == 1;
    char *receive = static_cast<char *>(receiveInScratch ? scratch : out);
    check(ncclGroupStart(), "all-to-all");
    for (int64_t j = 0; j < p; ++j) {
      check(ncclSend(send + j * blockBytes, blockBytes, ncclUint8, static_cast<int>(j),
                     comms_[axis], stream_),
            "all-to-all");
      check(ncclRecv(receive + j * blockBytes, blockBytes, ncclUint8, static_cast<int>(j),
                     comms_[axis], stream_),
            "all-to-all");
    }
    check(ncclGroupEnd(), "all-to-all");
    if (concatOuter == 1)
      return;
    if (!receiveInScratch) // the sends are done with the scratch by now (stream order)
      check(cudaMemcpyAsync(scratch, out, inShape.bytes(), cudaMemcpyDeviceToDevice, stream_),
            "all-to-all");
    regroup(static_cast<char *>(out), static_cast<const char *>(scratch), concatOuter, p,
            blockBytes / concatOuter, /*unpack=*/true);
  }

  void broadcast(size_t axis, void *data, const Local &in, int64_t root, void *) override {
    Queued done("broadcast");
    if (!count(Kind::Broadcast, axis, in, root))
      return;
    check(ncclBroadcast(data, data, in.bytes(), ncclUint8, static_cast<int>(root), comms_[axis],
                        stream_),
          "broadcast");
  }

  // Pipeline boundaries: through the host, over MPI.
  void send(int64_t peer, const void *data, size_t bytes, int tag) override {
    staging_.resize(bytes);
    check(cudaMemcpyAsync(staging_.data(), data, bytes, cudaMemcpyDeviceToHost, stream_), "send");
    waitMovingMessages(stream_, *mpi_, "send");
    mpi_->send(peer, staging_.data(), bytes, tag);
    bytesSent_ += bytes;
  }
  void progress() override { mpi_->progress(); }
  void recv(int64_t peer, void *data, size_t bytes, int tag) override {
    staging_.resize(bytes);
    mpi_->recv(peer, staging_.data(), bytes, tag);
    check(cudaMemcpyAsync(data, staging_.data(), bytes, cudaMemcpyHostToDevice, stream_), "recv");
    check(cudaStreamSynchronize(stream_), "recv");
  }

  std::vector<std::string> fromEveryRank(const std::string &mine) override {
    return mpi_->fromEveryRank(mine);
  }

  [[noreturn]] void abort(int code) override {
    mpi_->abort(code);
    std::_Exit(code); // not reached
  }

private:
  static ncclRedOp_t ncclOp(Reduce op) { return op == Reduce::Sum ? ncclSum : ncclMax; }
  /// Reduced elements are f32 or bf16 (Communicator.h).
  static ncclDataType_t ncclType(const Local &in) {
    return in.elementBytes == sizeof(bf16) ? ncclBfloat16 : ncclFloat;
  }

  /// Adds what the ring algorithm sends; false when the group is one rank.
  bool count(Kind kind, size_t axis, const Local &in, int64_t root = 0) {
    int64_t p = mesh_.shape[axis];
    bytesSent_ += comm::ringBytesSent(kind, in, p, coordinate(axis), root);
    return p > 1;
  }

  std::unique_ptr<comm::Communicator> mpi_;
  cudaStream_t stream_;
  std::vector<ncclComm_t> comms_;
  std::vector<char> staging_;
};

/// MPI's ring collectives on host copies of the device buffers.
class StagedCommunicator final : public comm::Communicator {
public:
  StagedCommunicator(std::unique_ptr<comm::Communicator> mpi, cudaStream_t stream)
      : Communicator(mpi->mesh()), mpi_(std::move(mpi)), stream_(stream) {}

  int64_t rank() const override { return mpi_->rank(); }
  int64_t size() const override { return mpi_->size(); }

  void allReduce(size_t axis, void *data, const Local &in, Reduce op, void *) override {
    void *host = toHost(in_, data, in.bytes());
    mpi_->allReduce(axis, host, in, op, scratch(Kind::AllReduce, axis, in, 0));
    toDevice(data, host, in.bytes());
  }
  void allGather(size_t axis, const void *in, const Local &inShape, int64_t dim, void *out,
                 void *) override {
    size_t outBytes = inShape.bytes() * mesh_.shape[axis];
    void *host = toHost(in_, in, inShape.bytes());
    out_.resize(outBytes);
    mpi_->allGather(axis, host, inShape, dim, out_.data(), scratch(Kind::AllGather, axis, inShape, dim));
    toDevice(out, out_.data(), outBytes);
  }
  void reduceScatter(size_t axis, const void *in, const Local &inShape, int64_t dim, Reduce op,
                     void *out, void *) override {
    size_t outBytes = inShape.bytes() / mesh_.shape[axis];
    void *host = toHost(in_, in, inShape.bytes());
    out_.resize(outBytes);
    mpi_->reduceScatter(axis, host, inShape, dim, op, out_.data(),
                        scratch(Kind::ReduceScatter, axis, inShape, dim));
    toDevice(out, out_.data(), outBytes);
  }
  void allToAll(size_t axis, const void *in, const Local &inShape, int64_t splitDim,
                int64_t concatDim, void *out, void *) override {
    void *host = toHost(in_, in, inShape.bytes());
    out_.resize(inShape.bytes());
    mpi_->allToAll(axis, host, inShape, splitDim, concatDim, out_.data(),
                   scratch(Kind::AllToAll, axis, inShape, splitDim));
    toDevice(out, out_.data(), inShape.bytes());
  }
  void broadcast(size_t axis, void *data, const Local &in, int64_t root, void *) override {
    void *host = toHost(in_, data, in.bytes());
    mpi_->broadcast(axis, host, in, root, scratch(Kind::Broadcast, axis, in, 0));
    toDevice(data, host, in.bytes());
  }
  void send(int64_t peer, const void *data, size_t bytes, int tag) override {
    mpi_->send(peer, toHost(in_, data, bytes), bytes, tag);
    bytesSent_ = mpi_->bytesSent();
  }
  void progress() override { mpi_->progress(); }
  void recv(int64_t peer, void *data, size_t bytes, int tag) override {
    in_.resize(bytes);
    mpi_->recv(peer, in_.data(), bytes, tag);
    toDevice(data, in_.data(), bytes);
  }
  std::vector<std::string> fromEveryRank(const std::string &mine) override {
    return mpi_->fromEveryRank(mine);
  }

  [[noreturn]] void abort(int code) override {
    mpi_->abort(code);
    std::_Exit(code); // not reached
  }

private:
  void *toHost(std::vector<char> &host, const void *device, size_t bytes) {
    host.resize(bytes);
    check(cudaMemcpyAsync(host.data(), device, bytes, cudaMemcpyDeviceToHost, stream_),
          "copying to the host for MPI");
    waitMovingMessages(stream_, *mpi_, "copying to the host for MPI");
    return host.data();
  }
  void toDevice(void *device, const void *host, size_t bytes) {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
          "copying from the host after MPI");
    check(cudaStreamSynchronize(stream_), "copying from the host after MPI");
    bytesSent_ = mpi_->bytesSent();
  }
  void *scratch(Kind kind, size_t axis, const Local &in, int64_t dim) {
    scratch_.resize(comm::scratchBytes(kind, in, mesh_.shape[axis], dim));
    return scratch_.data();
  }

  std::unique_ptr<comm::Communicator> mpi_;
  cudaStream_t stream_;
  std::vector<char> in_, out_, scratch_;
};

} // namespace

std::unique_ptr<comm::Communicator> createNcclCommunicator(std::unique_ptr<comm::Communicator> mpi,
                                                           cudaStream_t stream, std::string &error) {
  auto nccl = std::make_unique<NcclCommunicator>(std::move(mpi), stream);
  if (!nccl->init(error))
    return nullptr;
  return nccl;
}

std::unique_ptr<comm::Communicator>
createStagedCommunicator(std::unique_ptr<comm::Communicator> mpi, cudaStream_t stream,
                         std::string &) {
  return std::make_unique<StagedCommunicator>(std::move(mpi), stream);
}

} // namespace sbprt::cuda
