// Collectives between the ranks of a mesh, per mesh axis: the interface a
// rank program calls, with the MPI implementation on CPUs (NCCL later on
// GPUs). Every collective the exec dialect has is here, with the meaning
// runtime/sim gives the SBP changes they implement.
//
// Collectives run ring algorithms over point-to-point messages, so the bytes
// each rank sends are known exactly in advance (ringBytesSent) and counted
// as they are sent (bytesSent): the two must agree, and both must agree with
// the report.
#pragma once

#include "runtime/BFloat16.h"
#include "runtime/Layout.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sbprt::comm {

enum class Reduce { Sum, Max };

/// The collectives, for byte and scratch accounting.
enum class Kind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast };

/// A tensor as a collective sees it: local shape and element size.
struct Local {
  std::vector<int64_t> shape;
  size_t elementBytes = 4;
  int64_t elements() const;
  size_t bytes() const { return static_cast<size_t>(elements()) * elementBytes; }
};

/// Product of the dimensions of `shape` before `dim`: 1 when the blocks
/// along `dim` are contiguous.
int64_t outerOf(const std::vector<int64_t> &shape, int64_t dim);

/// What `kind` on a group of `p` ranks needs as scratch memory, given the
/// input's local shape `in` and the dimension it gathers or scatters along
/// (all-to-all: the one it splits; all-reduce and broadcast ignore it). The
/// caller plans it in the arena and passes it in; collectives allocate
/// nothing.
size_t scratchBytes(Kind kind, const Local &in, int64_t p, int64_t dim);

/// The bytes the rank at position `position` of a group of `p` sends for
/// `kind` on input `in` (ring algorithms; a broadcast sends from the root
/// along a chain, `root` its position). Equal to what bytesSent() grows by.
uint64_t ringBytesSent(Kind kind, const Local &in, int64_t p, int64_t position, int64_t root = 0);

class Communicator {
public:
  virtual ~Communicator();

  /// This rank in the whole job, and the job's size.
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  const Mesh &mesh() const { return mesh_; }
  /// This rank's coordinate on `axis` (its position in that axis's group).
  int64_t coordinate(size_t axis) const;
  /// The rank with this rank's coordinates but `coordinate` on `axis`.
  int64_t rankAt(size_t axis, int64_t coordinate) const;

  // Every collective runs on the group of ranks that differ from this one
  // only along `axis` (Mesh::group), in coordinate order. `scratch` has at
  // least scratchBytes() bytes. Buffers must not overlap unless stated.

  /// data[i] = reduce over the group of data[i], in place. Reductions take
  /// f32 (`elementBytes` 4) or bf16 (2, summed in f32 and rounded at each
  /// step of the ring).
  virtual void allReduce(size_t axis, void *data, const Local &in, Reduce op,
                         void *scratch) = 0;
  /// out = the group's inputs concatenated along `dim` in coordinate order;
  /// `out` has `in.shape` with dimension `dim` p times larger.
  virtual void allGather(size_t axis, const void *in, const Local &inShape, int64_t dim,
                         void *out, void *scratch) = 0;
  /// The group's inputs (all of `in.shape`) reduced, then split along `dim`
  /// into p equal parts; out = the part at this rank's coordinate; f32 or
  /// bf16 as allReduce.
  virtual void reduceScatter(size_t axis, const void *in, const Local &inShape, int64_t dim,
                             Reduce op, void *out, void *scratch) = 0;
  /// S(concatDim) -> S(splitDim): each rank splits its input along
  /// `splitDim` into p parts and sends part j to the rank at coordinate j;
  /// out = the parts received, concatenated along `concatDim` in coordinate
  /// order.
  virtual void allToAll(size_t axis, const void *in, const Local &inShape, int64_t splitDim,
                        int64_t concatDim, void *out, void *scratch) = 0;
  /// data on every rank = data on the rank at coordinate `root`; in place.
  virtual void broadcast(size_t axis, void *data, const Local &in, int64_t root,
                         void *scratch) = 0;
  /// Point to point, between any two ranks of the job (pipeline stages).
  /// A send may return before the receiver has the bytes (the caller may
  /// reuse them at once); progress() between ops moves such sends along.
  virtual void send(int64_t peer, const void *data, size_t bytes, int tag) = 0;
  virtual void recv(int64_t peer, void *data, size_t bytes, int tag) = 0;
  virtual void progress() {}

  /// What every rank of the job passed, in rank order; every rank must
  /// call it. Setup traffic (which GPU each rank has, say): not counted in
  /// bytesSent.
  virtual std::vector<std::string> fromEveryRank(const std::string &mine) = 0;

  /// Bytes this rank has sent so far, over all collectives and sends.
  uint64_t bytesSent() const { return bytesSent_; }

  /// Ends the whole job now with exit code `code` (after `message` is
  /// printed by the caller): no rank is left waiting.
  [[noreturn]] virtual void abort(int code) = 0;

protected:
  explicit Communicator(Mesh mesh) : mesh_(std::move(mesh)) {}
  Mesh mesh_;
  uint64_t bytesSent_ = 0;
};

/// Initializes MPI (argc/argv as main got them) and builds the per-axis
/// groups of `mesh`. Fails with `error` set when the job's size is not the
/// mesh's.
std::unique_ptr<Communicator> createMpiCommunicator(int *argc, char ***argv, const Mesh &mesh,
                                                    std::string &error);

/// Finalizes MPI; call once, after every rank is done.
void finalizeMpi();

} // namespace sbprt::comm
