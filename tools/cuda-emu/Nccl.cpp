// The CUDA emulator's NCCL over MPI. A unique id names its group by the
// world rank that made it; ncclCommInitRank splits MPI_COMM_WORLD by it
// (every rank joins its groups in the same order, as NCCL's bootstrap
// needs too). Reductions gather every rank's buffer and combine them in rank
// order, in f32, rounding bf16 once; sends and receives of a group are
// posted together when it ends, each send waiting for its receive. Buffers
// must be device memory, as NCCL requires.
#include <nccl.h>

#include "runtime/BFloat16.h"

// The C API only, as runtime/comm/MpiCommunicator.cpp.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

using sbprt::bf16;

struct ncclComm {
  MPI_Comm mpi;
  int rank, size;
};

namespace {

struct PendingTransfer {
  bool send;
  void *data;
  size_t bytes;
  int peer;
  ncclComm_t comm;
};

int groupDepth = 0;
std::vector<PendingTransfer> pending;
int idsMade = 0;

size_t sizeOf(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclBfloat16:
    return 2;
  case ncclFloat:
    return 4;
  }
  return 0;
}

bool reducible(ncclDataType_t type) { return type == ncclFloat || type == ncclBfloat16; }

bool onDevice(const void *p, size_t bytes, const char *call) {
  if (bytes == 0 || sbpc_emu::isDevice(p, bytes))
    return true;
  std::fprintf(stderr, "cuda-emu: %s: a buffer of %zu bytes outside device memory\n", call,
               bytes);
  return false;
}

float load(const void *p, ncclDataType_t type, size_t i) {
  return type == ncclBfloat16 ? static_cast<float>(static_cast<const bf16 *>(p)[i])
                              : static_cast<const float *>(p)[i];
}

void store(void *p, ncclDataType_t type, size_t i, float value) {
  if (type == ncclBfloat16)
    static_cast<bf16 *>(p)[i] = bf16(value);
  else
    static_cast<float *>(p)[i] = value;
}

float combine(ncclRedOp_t op, float a, float b) {
  switch (op) {
  case ncclSum:
    return a + b;
  case ncclProd:
    return a * b;
  case ncclMax:
    return std::fmax(a, b);
  case ncclMin:
    return std::fmin(a, b);
  }
  return a;
}

/// Every rank's `bytes` from `send`, rank after rank.
std::vector<char> gatherAll(const void *send, size_t bytes, ncclComm_t comm) {
  std::vector<char> all(bytes * comm->size);
  MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, all.data(), static_cast<int>(bytes),
                MPI_BYTE, comm->mpi);
  return all;
}

/// recv[i] = op over ranks r (in order) of rank r's element `first + i`.
void reduceInOrder(const std::vector<char> &all, size_t perRank, size_t first, size_t count,
                   ncclDataType_t type, ncclRedOp_t op, void *recv, int ranks) {
  size_t element = sizeOf(type);
  for (size_t i = 0; i < count; ++i) {
    float value = load(all.data(), type, first + i);
    for (int r = 1; r < ranks; ++r)
      value = combine(op, value, load(all.data() + r * perRank * element, type, first + i));
    store(recv, type, i, value);
  }
}

void post(const PendingTransfer &t, std::vector<MPI_Request> &requests) {
  requests.emplace_back();
  // Synchronous sends: an NCCL send completes only once its receive is
  // posted (MPI's eager sends would hide a pair of ranks that both send first).
  if (t.send)
    MPI_Issend(t.data, static_cast<int>(t.bytes), MPI_BYTE, t.peer, 0, t.comm->mpi,
              &requests.back());
  else
    MPI_Irecv(t.data, static_cast<int>(t.bytes), MPI_BYTE, t.peer, 0, t.comm->mpi,
              &requests.back());
}

ncclResult_t transfer(bool send, const void *data, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm) {
  size_t bytes = count * sizeOf(type);
  if (!comm || peer < 0 || peer >= comm->size || !sizeOf(type))
    return ncclInvalidArgument;
  if (!onDevice(data, bytes, send ? "ncclSend" : "ncclRecv"))
    return ncclInvalidArgument;
  pending.push_back({send, const_cast<void *>(data), bytes, peer, comm});
  return groupDepth ? ncclSuccess : (ncclGroupStart(), ncclGroupEnd());
}

} // namespace

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  }
  return "unknown result code";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  int world = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world);
  *id = ncclUniqueId{};
  std::snprintf(id->internal, sizeof id->internal, "sbpc-emu %d %d", world, idsMade++);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  int root = -1, serial = -1;
  if (std::sscanf(id.internal, "sbpc-emu %d %d", &root, &serial) != 2 || root < 0 ||
      rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  MPI_Comm group;
  if (MPI_Comm_split(MPI_COMM_WORLD, root, rank, &group) != MPI_SUCCESS)
    return ncclSystemError;
  int size = 0, me = 0;
  MPI_Comm_size(group, &size);
  MPI_Comm_rank(group, &me);
  if (size != nranks || me != rank) {
    MPI_Comm_free(&group);
    return ncclInvalidUsage;
  }
  *comm = new ncclComm{group, rank, size};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  size_t bytes = count * sizeOf(type);
  if (!comm || !reducible(type))
    return ncclInvalidArgument;
  if (!onDevice(send, bytes, "ncclAllReduce") || !onDevice(recv, bytes, "ncclAllReduce"))
    return ncclInvalidArgument;
  std::vector<char> all = gatherAll(send, bytes, comm);
  reduceInOrder(all, count, 0, count, type, op, recv, comm->size);
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendCount, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t) {
  size_t bytes = sendCount * sizeOf(type);
  if (!comm || !sizeOf(type))
    return ncclInvalidArgument;
  if (!onDevice(send, bytes, "ncclAllGather") ||
      !onDevice(recv, bytes * comm->size, "ncclAllGather"))
    return ncclInvalidArgument;
  std::vector<char> all = gatherAll(send, bytes, comm);
  std::memcpy(recv, all.data(), all.size());
  return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvCount,
                               ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t) {
  size_t bytes = recvCount * sizeOf(type);
  if (!comm || !reducible(type))
    return ncclInvalidArgument;
  if (!onDevice(send, bytes * comm->size, "ncclReduceScatter") ||
      !onDevice(recv, bytes, "ncclReduceScatter"))
    return ncclInvalidArgument;
  std::vector<char> all = gatherAll(send, bytes * comm->size, comm);
  reduceInOrder(all, recvCount * comm->size, recvCount * comm->rank, recvCount, type, op, recv,
                comm->size);
  return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t) {
  size_t bytes = count * sizeOf(type);
  if (!comm || !sizeOf(type) || root < 0 || root >= comm->size)
    return ncclInvalidArgument;
  if ((comm->rank == root && !onDevice(send, bytes, "ncclBroadcast")) ||
      !onDevice(recv, bytes, "ncclBroadcast"))
    return ncclInvalidArgument;
  if (comm->rank == root && send != recv)
    std::memmove(recv, send, bytes);
  MPI_Bcast(recv, static_cast<int>(bytes), MPI_BYTE, root, comm->mpi);
  return ncclSuccess;
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t) {
  return transfer(true, send, count, type, peer, comm);
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t) {
  return transfer(false, recv, count, type, peer, comm);
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return ncclInvalidUsage;
  if (--groupDepth)
    return ncclSuccess;
  // Receives first, so that a rank's send to itself finds its receive.
  std::vector<MPI_Request> requests;
  for (const PendingTransfer &t : pending)
    if (!t.send)
      post(t, requests);
  for (const PendingTransfer &t : pending)
    if (t.send)
      post(t, requests);
  pending.clear();
  if (MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE) !=
      MPI_SUCCESS)
    return ncclSystemError;
  return ncclSuccess;
}
