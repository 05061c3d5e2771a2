// Checks the MPI communicator against the simulated mesh (runtime/sim): every
// collective on every axis of the mesh named on the command line, on fresh
// random data, with the bytes each rank sends and the scratch it may touch,
// and what every rank says of itself at startup (fromEveryRank).
// Run under mpirun with one rank per device (test/runtime/mpi-collectives.test):
//   sbprt-comm-test MESH [SEED]      MESH like 4, 2,2 or 2,2,2
#include "runtime/Layout.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/sim/SimulatedMesh.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace sbprt;

namespace {

/// Dyadic values (multiples of 1/8 in [-32, 32]) that are never zero: the
/// partial shares sim::distribute makes of them sum exactly in any order.
Tensor randomTensor(const std::vector<int64_t> &shape, uint64_t seed) {
  Tensor t(DType::F32, shape);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    int eighths = static_cast<int>(rng() % 256) + 1;
    t.as<float>()[i] = static_cast<float>(rng() % 2 ? eighths : -eighths) / 8.0f;
  }
  return t;
}

/// A buffer with guard bytes on both sides, to catch a collective writing
/// beyond its output or beyond the scratch its scratchBytes promised.
class GuardedBuffer {
public:
  explicit GuardedBuffer(size_t bytes)
      : bytes_(bytes), storage_(bytes + 2 * kGuard, std::byte{kPattern}) {}
  void *data() { return storage_.data() + kGuard; }
  bool guardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i)
      if (storage_[i] != std::byte{kPattern} ||
          storage_[kGuard + bytes_ + i] != std::byte{kPattern})
        return false;
    return true;
  }

private:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;
  size_t bytes_;
  std::vector<std::byte> storage_;
};

/// One collective to check: a hop on `hop.axis` of a tensor of
/// `globalShape` laid out as `layout`, or, when `root` is set, a broadcast
/// from coordinate `root` of the shards of `layout`.
struct Case {
  std::vector<int64_t> globalShape;
  NdSbp layout;
  Hop hop;
  int64_t root = -1;
};

class CommChecker {
public:
  CommChecker(comm::Communicator &comm, uint64_t seed) : comm_(comm), seed_(seed) {}

  int64_t checks() const { return checks_; }

  /// Runs `c` on this rank (every rank runs every case, in the same order).
  void run(const Case &c) {
    current_ = &c;
    uint64_t caseSeed = seed_ + 1000003 * ++cases_;
    const Mesh &mesh = comm_.mesh();
    size_t axis = c.hop.axis;
    sim::Shards shards =
        sim::distribute(randomTensor(c.globalShape, caseSeed), mesh, c.layout, caseSeed + 1);
    const Tensor &input = shards[comm_.rank()];
    Tensor expected;
    if (c.root >= 0) {
      expected = shards[mesh.group(comm_.rank(), axis)[c.root]];
    } else {
      sim::Shards after = shards;
      sim::applyHop(after, mesh, c.hop);
      expected = after[comm_.rank()];
    }

    comm::Local in{input.shape(), sizeof(float)};
    int64_t p = mesh.shape[axis], position = comm_.coordinate(axis);
    comm::Kind kind = kindOf(c);
    int64_t dim = kind == comm::Kind::AllGather                                     ? c.hop.from.dim
                  : kind == comm::Kind::ReduceScatter || kind == comm::Kind::AllToAll ? c.hop.to.dim
                                                                                      : 0;
    GuardedBuffer scratch(comm::scratchBytes(kind, in, p, dim));
    GuardedBuffer output(expected.numBytes());
    Tensor pristine = input;
    std::vector<int64_t> outShape = input.shape();
    const Sbp &from = c.hop.from, &to = c.hop.to;
    uint64_t sentBefore = comm_.bytesSent();
    switch (kind) {
    case comm::Kind::AllReduce:
    case comm::Kind::Broadcast:
      std::memcpy(output.data(), input.data(), input.numBytes());
      if (kind == comm::Kind::AllReduce)
        comm_.allReduce(axis, static_cast<float *>(output.data()), in, reduceOf(from),
                        scratch.data());
      else
        comm_.broadcast(axis, output.data(), in, c.root, scratch.data());
      break;
    case comm::Kind::AllGather:
      outShape[from.dim] *= p;
      comm_.allGather(axis, input.data(), in, from.dim, output.data(), scratch.data());
      break;
    case comm::Kind::ReduceScatter:
      outShape[to.dim] /= p;
      comm_.reduceScatter(axis, input.as<float>(), in, to.dim, reduceOf(from),
                          static_cast<float *>(output.data()), scratch.data());
      break;
    case comm::Kind::AllToAll:
      outShape[to.dim] /= p;
      outShape[from.dim] *= p;
      comm_.allToAll(axis, input.data(), in, to.dim, from.dim, output.data(), scratch.data());
      break;
    }
    uint64_t sent = comm_.bytesSent() - sentBefore;

    if (outShape != expected.shape())
      fail("the output should have shape " + shapeToString(expected.shape()) + ", not " +
           shapeToString(outShape));
    uint64_t planned = comm::ringBytesSent(kind, in, p, position, std::max<int64_t>(c.root, 0));
    if (sent != planned)
      fail("sent " + std::to_string(sent) + " bytes, ringBytesSent says " +
           std::to_string(planned));
    if (!scratch.guardsIntact())
      fail("wrote outside its " + std::to_string(comm::scratchBytes(kind, in, p, dim)) +
           " scratch bytes");
    if (!output.guardsIntact())
      fail("wrote outside its output");
    if (std::memcmp(pristine.data(), input.data(), input.numBytes()) != 0)
      fail("changed its input");
    bool reduces = kind == comm::Kind::AllReduce || kind == comm::Kind::ReduceScatter;
    const float *got = static_cast<const float *>(output.data());
    for (int64_t i = 0; i < expected.numElements(); ++i) {
      float want = expected.as<float>()[i];
      bool close = got[i] == want || (reduces && std::abs(got[i] - want) <= 1e-6f * std::abs(want));
      if (!close) {
        std::ostringstream os;
        os << "element " << i << " is " << got[i] << ", expected " << want;
        fail(os.str());
      }
    }
    ++checks_;
  }

  /// Every even rank sends to the odd rank after it, which sends back.
  void checkPointToPoint() {
    int64_t rank = comm_.rank(), peer = rank % 2 ? rank - 1 : rank + 1;
    if (peer >= comm_.size())
      return;
    Tensor message = randomTensor({1000 + std::min(rank, peer)}, seed_ + 17);
    Tensor received(DType::F32, message.shape());
    uint64_t sentBefore = comm_.bytesSent();
    for (int turn = 0; turn < 2; ++turn) {
      if ((rank + turn) % 2 == 0)
        comm_.send(peer, message.data(), message.numBytes(), 7 + turn);
      else
        comm_.recv(peer, received.data(), received.numBytes(), 7 + turn);
    }
    std::string what = "send/recv with rank " + std::to_string(peer);
    if (comm_.bytesSent() - sentBefore != message.numBytes())
      failWith(what, "sent " + std::to_string(comm_.bytesSent() - sentBefore) + " bytes, not " +
                         std::to_string(message.numBytes()));
    if (std::memcmp(message.data(), received.data(), message.numBytes()) != 0)
      failWith(what, "received other bytes than were sent");
    ++checks_;
  }

  /// Sends do not wait for their receivers: both ranks of a pair send a
  /// message too large for MPI's eager protocol (4 MiB) before either
  /// receives, which a blocking send would deadlock, then overwrite what
  /// they sent; a second message of the same tag arrives after the first.
  void checkSendsDoNotWait() {
    int64_t rank = comm_.rank(), peer = rank % 2 ? rank - 1 : rank + 1;
    if (peer >= comm_.size())
      return;
    Tensor first = randomTensor({1 << 20}, seed_ + 29 + static_cast<uint64_t>(rank));
    Tensor second = randomTensor({1 << 10}, seed_ + 31 + static_cast<uint64_t>(rank));
    Tensor expectFirst = randomTensor({1 << 20}, seed_ + 29 + static_cast<uint64_t>(peer));
    Tensor expectSecond = randomTensor({1 << 10}, seed_ + 31 + static_cast<uint64_t>(peer));
    comm_.send(peer, first.data(), first.numBytes(), 11);
    comm_.send(peer, second.data(), second.numBytes(), 11);
    std::memset(first.data(), 0, first.numBytes());
    std::memset(second.data(), 0, second.numBytes());
    comm_.recv(peer, first.data(), first.numBytes(), 11);
    comm_.recv(peer, second.data(), second.numBytes(), 11);
    std::string what = "sends before receives with rank " + std::to_string(peer);
    if (std::memcmp(first.data(), expectFirst.data(), first.numBytes()) != 0 ||
        std::memcmp(second.data(), expectSecond.data(), second.numBytes()) != 0)
      failWith(what, "received other bytes than were sent");
    ++checks_;
  }

  /// fromEveryRank: every rank's own text (of a different length each,
  /// one empty), in rank order, on every rank; sending nothing the plan
  /// would count.
  void checkFromEveryRank() {
    auto textOf = [](int64_t r) { return std::string(r * 3, static_cast<char>('a' + r % 26)); };
    uint64_t sentBefore = comm_.bytesSent();
    std::vector<std::string> all = comm_.fromEveryRank(textOf(comm_.rank()));
    if (static_cast<int64_t>(all.size()) != comm_.size())
      failWith("fromEveryRank", std::to_string(all.size()) + " texts for " +
                                    std::to_string(comm_.size()) + " ranks");
    for (int64_t r = 0; r < comm_.size(); ++r)
      if (all[r] != textOf(r))
        failWith("fromEveryRank", "rank " + std::to_string(r) + "'s text is '" + all[r] + "'");
    if (comm_.bytesSent() != sentBefore)
      failWith("fromEveryRank", "counted " + std::to_string(comm_.bytesSent() - sentBefore) +
                                    " bytes sent");
    ++checks_;
  }

private:
  static comm::Kind kindOf(const Case &c) {
    if (c.root >= 0)
      return comm::Kind::Broadcast;
    switch (collectiveOf(c.hop.from, c.hop.to)) {
    case Collective::AllGather:
      return comm::Kind::AllGather;
    case Collective::AllToAll:
      return comm::Kind::AllToAll;
    case Collective::ReduceScatter:
      return comm::Kind::ReduceScatter;
    default:
      return comm::Kind::AllReduce;
    }
  }

  static comm::Reduce reduceOf(const Sbp &partial) {
    return partial.reduce == Sbp::Reduce::Sum ? comm::Reduce::Sum : comm::Reduce::Max;
  }

  void fail(const std::string &problem) {
    const Case &c = *current_;
    std::string what = c.root >= 0 ? "broadcast from coordinate " + std::to_string(c.root)
                                   : collectiveName(collectiveOf(c.hop.from, c.hop.to));
    failWith(what + " on axis " + std::to_string(c.hop.axis) + " (layout " + toString(c.layout) +
                 (c.root >= 0 ? "" : ", hop " + c.hop.from.str() + " -> " + c.hop.to.str()) +
                 ", global shape " + shapeToString(c.globalShape) + ", local shape " +
                 shapeToString(blockOf(comm_.mesh(), c.layout, c.globalShape, comm_.rank()).sizes) +
                 ")",
             problem);
  }

  void failWith(const std::string &what, const std::string &problem) {
    std::cerr << "comm-test: rank " << comm_.rank() << ": " << what << ", seed " << seed_ << ": "
              << problem << std::endl;
    comm_.abort(1);
  }

  comm::Communicator &comm_;
  uint64_t seed_;
  int64_t checks_ = 0;
  uint64_t cases_ = 0; // the same on every rank, unlike checks_
  const Case *current_ = nullptr;
};

/// The hops (and broadcasts) to check on `axis` for a tensor of `shape`,
/// each under a few layouts of the other axes: all broadcast, split along a
/// dimension the hop leaves alone, or partial; those the sim cannot run
/// directly or the shape does not fit are left out.
std::vector<Case> casesFor(const Mesh &mesh, size_t axis, const std::vector<int64_t> &shape) {
  int64_t rank = static_cast<int64_t>(shape.size());
  struct Step {
    Sbp from, to;
    int64_t root = -1;
  };
  std::vector<Step> steps;
  for (Sbp::Reduce r : {Sbp::Reduce::Sum, Sbp::Reduce::Max}) {
    steps.push_back({Sbp::partial(r), Sbp::broadcast()});
    for (int64_t d = 0; d < rank; ++d)
      steps.push_back({Sbp::partial(r), Sbp::split(d)});
  }
  for (int64_t d = 0; d < rank; ++d) {
    steps.push_back({Sbp::split(d), Sbp::broadcast()});
    for (int64_t e = 0; e < rank; ++e)
      if (e != d)
        steps.push_back({Sbp::split(d), Sbp::split(e)});
  }
  // Broadcasts of distinct shards, from the first and the last coordinate.
  steps.push_back({Sbp::partial(), Sbp::partial(), 0});
  if (mesh.shape[axis] > 1)
    steps.push_back({Sbp::partial(), Sbp::partial(), mesh.shape[axis] - 1});

  std::vector<Case> cases;
  for (const auto &[from, to, root] : steps) {
    // A dimension no split of the hop touches, for the other axes to split.
    int64_t untouched = -1;
    for (int64_t d = rank - 1; d >= 0 && untouched < 0; --d)
      if (!(from.isSplit() && from.dim == d) && !(to.isSplit() && to.dim == d))
        untouched = d;
    Sbp partial = from.isPartial() ? from : Sbp::partial();
    std::vector<Sbp> others = {Sbp::broadcast(), partial};
    if (untouched >= 0)
      others.push_back(Sbp::split(untouched));
    for (const Sbp &other : others) {
      NdSbp layout(mesh.shape.size(), other);
      layout[axis] = from;
      NdSbp target = layout;
      target[axis] = to;
      Hop hop{axis, from, to};
      if (!layoutFits(mesh, layout, shape) || !layoutFits(mesh, target, shape) ||
          !isDirectHop(layout, hop))
        continue;
      cases.push_back({shape, layout, hop, root});
      if (mesh.shape.size() == 1)
        break; // no other axes to vary
    }
  }
  return cases;
}

/// "2,2" -> {2, 2}; empty when malformed.
std::vector<int64_t> parseMeshShape(const std::string &text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string size;
  while (std::getline(in, size, ',')) {
    if (size.empty() || size.find_first_not_of("0123456789") != std::string::npos ||
        size.size() > 8)
      return {};
    shape.push_back(std::stoll(size));
  }
  return shape;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: sbprt-comm-test MESH [SEED]   (MESH like 4, 2,2 or 2,2,2)\n";
    return 2;
  }
  std::string meshText = argv[1];
  Mesh mesh;
  mesh.shape = parseMeshShape(meshText);
  for (size_t i = 0; i < mesh.shape.size(); ++i)
    mesh.axes.push_back("a" + std::to_string(i));
  if (std::string problem = checkMesh(mesh); !problem.empty() || mesh.shape.empty()) {
    std::cerr << "sbprt-comm-test: mesh '" << meshText << "' "
              << (problem.empty() ? "is not a list of sizes" : problem) << "\n";
    return 2;
  }
  uint64_t seed = argc == 3 ? std::stoull(argv[2]) : std::random_device{}();

  std::string error;
  std::unique_ptr<comm::Communicator> comm = comm::createMpiCommunicator(&argc, &argv, mesh, error);
  if (!comm) {
    std::cerr << "sbprt-comm-test: " << error << "\n";
    comm::finalizeMpi();
    return 1;
  }
  // Every rank must draw the same data: rank 0's seed is the job's.
  if (comm->rank() == 0)
    for (int64_t r = 1; r < comm->size(); ++r)
      comm->send(r, &seed, sizeof seed, 1);
  else
    comm->recv(0, &seed, sizeof seed, 1);

  CommChecker checker(*comm, seed);
  checker.checkPointToPoint();
  checker.checkSendsDoNotWait();
  checker.checkFromEveryRank();
  for (size_t axis = 0; axis < mesh.shape.size(); ++axis)
    for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{
             {}, {1}, {5}, {7, 3}, {24}, {12, 24}, {24, 12, 8}, {6, 8, 12}})
      for (const Case &c : casesFor(mesh, axis, shape))
        checker.run(c);

  // Success only once every rank has passed every check.
  int64_t total = checker.checks();
  if (comm->rank() == 0) {
    for (int64_t r = 1; r < comm->size(); ++r) {
      int64_t theirs = 0;
      comm->recv(r, &theirs, sizeof theirs, 2);
      total += theirs;
    }
    std::cout << "comm-test: " << total << " checks passed on mesh " << meshText << " (seed "
              << seed << ")" << std::endl;
  } else {
    comm->send(0, &total, sizeof total, 2);
  }
  comm.reset();
  comm::finalizeMpi();
  return 0;
}
