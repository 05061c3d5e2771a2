// What the ring collectives cost, known before they run: the scratch each
// needs and the bytes each rank sends. MpiCommunicator.cpp runs exactly these
// algorithms; the static planner and the report rely on the two agreeing.
#include "runtime/comm/Communicator.h"

#include "runtime/Tensor.h"

namespace sbprt::comm {
namespace {

/// Where all-reduce chunk `index` of `parts` starts in `n` elements:
/// floor(index * n / parts), without overflowing for large n.
int64_t chunkBegin(int64_t n, int64_t index, int64_t parts) {
  return index * (n / parts) + index * (n % parts) / parts;
}

int64_t chunkSize(int64_t n, int64_t index, int64_t parts) {
  return chunkBegin(n, index + 1, parts) - chunkBegin(n, index, parts);
}

} // namespace

int64_t Local::elements() const { return numElements(shape); }

int64_t outerOf(const std::vector<int64_t> &shape, int64_t dim) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim && d < static_cast<int64_t>(shape.size()); ++d)
    outer *= shape[d];
  return outer;
}

size_t scratchBytes(Kind kind, const Local &in, int64_t p, int64_t dim) {
  if (p <= 1)
    return 0;
  bool contiguous = outerOf(in.shape, dim) == 1;
  switch (kind) {
  case Kind::AllReduce: // one received chunk, the largest: ceil(n / p) elements
    return static_cast<size_t>((in.elements() + p - 1) / p) * in.elementBytes;
  case Kind::AllGather: // the p gathered blocks, to interleave when not contiguous
    return contiguous ? 0 : static_cast<size_t>(p) * in.bytes();
  case Kind::ReduceScatter: // contiguous blocks: one block for the travelling sum;
                            // else the input packed as p blocks, reduced in place
    return contiguous ? in.bytes() / p : in.bytes();
  case Kind::AllToAll: // the input packed as p blocks to send
    return in.bytes();
  case Kind::Broadcast:
    return 0;
  }
  return 0;
}

uint64_t ringBytesSent(Kind kind, const Local &in, int64_t p, int64_t position, int64_t root) {
  if (p <= 1)
    return 0;
  uint64_t bytes = in.bytes();
  switch (kind) {
  case Kind::AllReduce: {
    // Reduce-scatter sends every chunk but (position + 1), all-gather every
    // chunk but (position + 2).
    int64_t n = in.elements();
    int64_t kept = chunkSize(n, (position + 1) % p, p) + chunkSize(n, (position + 2) % p, p);
    return static_cast<uint64_t>(2 * n - kept) * in.elementBytes;
  }
  case Kind::AllGather:
    return static_cast<uint64_t>(p - 1) * bytes;
  case Kind::ReduceScatter:
  case Kind::AllToAll:
    return static_cast<uint64_t>(p - 1) * (bytes / p);
  case Kind::Broadcast: // every rank of the chain but the last forwards the buffer
    return (position - root + p) % p < p - 1 ? bytes : 0;
  }
  return 0;
}

Communicator::~Communicator() = default;

int64_t Communicator::coordinate(size_t axis) const { return mesh_.coordinates(rank())[axis]; }

int64_t Communicator::rankAt(size_t axis, int64_t coordinate) const {
  std::vector<int64_t> coordinates = mesh_.coordinates(rank());
  coordinates[axis] = coordinate;
  return mesh_.rankOf(coordinates);
}

} // namespace sbprt::comm
