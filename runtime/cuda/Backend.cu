// The rank's GPU: device choice, stream, cuBLAS handle, device arena and
// error checks.
#include "runtime/cuda/Backend.h"
#include "runtime/Env.h"
#include "runtime/comm/GpuChoice.h"
#include "runtime/cuda/Communicators.h"
#include "runtime/cuda/Context.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace sbprt::cuda {
namespace {

int envInt(std::initializer_list<const char *> names, int fallback) {
  for (const char *name : names)
    if (auto value = envInteger(name))
      return static_cast<int>(std::clamp<long long>(*value, INT_MIN, INT_MAX));
  return fallback;
}

/// Runs `status` and sets `error` to "CUDA error in WHAT: ..." when it failed.
bool ok(cudaError_t status, const char *what, std::string &error) {
  if (status == cudaSuccess)
    return true;
  error = std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status);
  return false;
}

/// `ok` for work queued on the stream; under SBPRT_CUDA_SYNC also waits
/// for it, so that a fault is reported by the call that queued it.
bool queued(cudaError_t status, const char *what, std::string &error) {
  if (!ok(status, what, error))
    return false;
  return !context().syncEachOp || ok(cudaStreamSynchronize(context().stream), what, error);
}

} // namespace

Context &context() {
  static Context instance;
  return instance;
}

void check(cudaError_t status, const char *what) {
  std::string error;
  if (!ok(status, what, error))
    rank::failActive(error);
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    rank::failActive(std::string("cuBLAS error in ") + what + ": " +
                     cublasGetStatusString(status));
}

void launched(const char *what) {
  check(cudaGetLastError(), what);
  if (context().syncEachOp)
    check(cudaStreamSynchronize(context().stream), what);
}

cudaError_t copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                     size_t rows) {
  Context &c = context();
  if (!rows || !width)
    return cudaSuccess;
  if (rows == 1 || (dstPitch == width && srcPitch == width))
    return cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDeviceToDevice, c.stream);
  static cudaError_t pitchStatus = cudaSuccess;
  static int maxPitch = [] {
    int pitch = 0;
    pitchStatus = cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, context().device);
    return pitch;
  }();
  if (pitchStatus != cudaSuccess)
    return pitchStatus;
  if (dstPitch <= static_cast<size_t>(maxPitch) && srcPitch <= static_cast<size_t>(maxPitch))
    return cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, rows, cudaMemcpyDeviceToDevice,
                             c.stream);
  for (size_t row = 0; row < rows; ++row)
    if (cudaError_t status = cudaMemcpyAsync(static_cast<char *>(dst) + row * dstPitch,
                                             static_cast<const char *>(src) + row * srcPitch,
                                             width, cudaMemcpyDeviceToDevice, c.stream);
        status != cudaSuccess)
      return status;
  return cudaSuccess;
}

void *workspace(size_t bytes) {
  Context &c = context();
  if (bytes > c.workspaceBytes) {
    if (c.workspace) {
      check(cudaStreamSynchronize(c.stream), "growing the kernel workspace");
      check(cudaFree(c.workspace), "growing the kernel workspace");
    }
    c.workspace = nullptr;
    c.workspaceBytes = 0;
    check(cudaMalloc(&c.workspace, bytes), "allocating the kernel workspace");
    c.workspaceBytes = bytes;
  }
  return c.workspace;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

Strided stridedOf(const std::vector<int64_t> &shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank))
    rank::failActive("tensors of rank " + std::to_string(shape.size()) +
                     " are beyond the CUDA kernels' " + std::to_string(kMaxRank));
  Strided s;
  s.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    s.shape[d] = shape[d];
  return s;
}

Strided collapsed(const Strided &view) {
  Strided out;
  out.start[0] = view.start[0];
  out.start[1] = view.start[1];
  for (int d = 0; d < view.rank; ++d) {
    if (view.shape[d] == 1)
      continue;
    int last = out.rank - 1;
    if (last >= 0 && out.stride[0][last] == view.stride[0][d] * view.shape[d] &&
        out.stride[1][last] == view.stride[1][d] * view.shape[d]) {
      out.shape[last] *= view.shape[d];
      out.stride[0][last] = view.stride[0][d];
      out.stride[1][last] = view.stride[1][d];
      continue;
    }
    out.shape[out.rank] = view.shape[d];
    out.stride[0][out.rank] = view.stride[0][d];
    out.stride[1][out.rank] = view.stride[1][d];
    ++out.rank;
  }
  return out;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &outShape) {
  std::vector<int64_t> own = stridesOf(shape), result(outShape.size(), 0);
  size_t offset = outShape.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    result[offset + d] = shape[d] == 1 ? 0 : own[d];
  return result;
}

bool checkIds(const int64_t *ids, int64_t count, int64_t limit, const char *what,
              const char *unit, const IndexPlace &place, std::string &error,
              std::vector<int64_t> *kept) {
  std::vector<int64_t> local, &host = kept ? *kept : local;
  host.resize(count);
  check(cudaMemcpyAsync(host.data(), ids, count * sizeof(int64_t), cudaMemcpyDeviceToHost,
                        context().stream),
        "reading ids");
  check(cudaStreamSynchronize(context().stream), "reading ids");
  for (int64_t i = 0; i < count; ++i)
    if (host[i] < 0 || host[i] >= limit) {
      error = place.outOfRange(what, host[i], i, limit, unit);
      return false;
    }
  return true;
}

Backend::~Backend() {
  Context &c = context();
  releaseLinearPlans();
  if (c.workspace)
    cudaFree(c.workspace);
  if (c.ltWorkspace)
    cudaFree(c.ltWorkspace);
  if (c.lt)
    cublasLtDestroy(c.lt);
  if (c.blas)
    cublasDestroy(c.blas);
  for (cudaEvent_t event : c.opEvents)
    cudaEventDestroy(event);
  if (c.computeStop)
    cudaEventDestroy(c.computeStop);
  if (c.computeStart)
    cudaEventDestroy(c.computeStart);
  if (c.stream)
    cudaStreamDestroy(c.stream);
  c = Context();
}

std::unique_ptr<comm::Communicator> Backend::attach(std::unique_ptr<comm::Communicator> mpi,
                                                    std::string &error) {
  Context &c = context();
  const char *forced = std::getenv("SBPRT_COMM");
  std::string choice = forced && *forced ? forced : "";
  if (!choice.empty() && choice != "nccl" && choice != "mpi") {
    error = "SBPRT_COMM must be nccl or mpi, got '" + choice + "'";
    return nullptr;
  }
  int devices = 0;
  if (cudaError_t status = cudaGetDeviceCount(&devices); status != cudaSuccess) {
    error = std::string("no usable CUDA GPU (a --target cuda program needs one): ") +
            cudaGetErrorString(status);
    return nullptr;
  }
  if (devices == 0) {
    error = "no usable CUDA GPU (a --target cuda program needs one): none is visible";
    return nullptr;
  }
  // mpirun's local rank: the rank's index among those on its node.
  int local = envInt({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"},
                     static_cast<int>(mpi->rank()));
  c.device = local % devices;
  c.syncEachOp = envInt({"SBPRT_CUDA_SYNC"}, 0) != 0;
  c.epilogues = envInt({"SBPRT_CUDA_EPILOGUES"}, 1) != 0;
  c.onePassRows = envInt({"SBPRT_CUDA_ONE_PASS"}, 1) != 0;
  c.rowWarps = envInt({"SBPRT_CUDA_ROW_WARPS"}, 1) != 0;
  c.attentionWide = envInt({"SBPRT_CUDA_ATTENTION_WIDE"}, 1) != 0;
  c.initcheck = envInt({"SBPRT_CUDA_INITCHECK"}, 0) != 0;
  if (auto pad = envInteger("SBPRT_CUDA_GEMM_PAD"))
    c.gemmPadBytes = static_cast<size_t>(
        std::clamp<long long>(*pad, 0, static_cast<long long>(kLtWorkspaceBytes)));
  if (!ok(cudaSetDevice(c.device), "selecting the GPU", error) ||
      !ok(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "creating the stream",
          error))
    return nullptr;
  if (cublasCreate(&c.blas) != CUBLAS_STATUS_SUCCESS ||
      cublasSetStream(c.blas, c.stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(c.blas, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
    error = "cannot create the cuBLAS handle";
    return nullptr;
  }
  if (!ok(cudaEventCreate(&c.computeStart), "creating the GPU's timing events", error) ||
      !ok(cudaEventCreate(&c.computeStop), "creating the GPU's timing events", error))
    return nullptr;
  if (cublasLtCreate(&c.lt) != CUBLAS_STATUS_SUCCESS) {
    error = "cannot create the cuBLASLt handle";
    return nullptr;
  }
  if (!ok(cudaMalloc(&c.ltWorkspace, kLtWorkspaceBytes), "allocating the cuBLASLt workspace",
          error))
    return nullptr;
  // The job's choice of collectives, from what every rank has and wants
  // (comm/GpuChoice.h): ranks that share a GPU, however they were given
  // theirs (more ranks than GPUs, CUDA_VISIBLE_DEVICES), cannot use NCCL.
  comm::GpuRank me;
  me.wantsNccl = choice.empty() ? mpi->size() > 1 : choice == "nccl";
  cudaDeviceProp properties{};
  if (!ok(cudaGetDeviceProperties(&properties, c.device), "reading the GPU's properties", error))
    return nullptr;
  static const char hex[] = "0123456789abcdef";
  for (unsigned char byte : properties.uuid.bytes)
    me.gpu += {hex[byte >> 4], hex[byte & 15]};
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  me.host = host;
  std::vector<comm::GpuRank> ranks;
  for (const std::string &said : mpi->fromEveryRank(me.encode()))
    ranks.push_back(comm::GpuRank::decode(said));
  std::string conflict;
  bool nccl = comm::chooseNccl(ranks, conflict);
  if (choice == "nccl" && !nccl) {
    error = "SBPRT_COMM=nccl here, but " + conflict;
    return nullptr;
  }
  if (nccl)
    return createNcclCommunicator(std::move(mpi), c.stream, error);
  return createStagedCommunicator(std::move(mpi), c.stream, error);
}

void *Backend::allocate(uint64_t bytes, std::string &error) {
  void *arena = nullptr;
  if (!ok(cudaMalloc(&arena, bytes ? bytes : 64), "allocating the arena", error))
    error = "out of GPU memory: cannot allocate the arena of " + std::to_string(bytes) +
            " bytes (" + error + ")";
  return arena;
}

void Backend::release(void *arena) {
  cudaStreamSynchronize(context().stream);
  cudaFree(arena);
}

bool Backend::upload(void *dst, const void *src, size_t bytes, std::string &error) {
  // Synchronous: `src` is the caller's host buffer, gone when we return.
  return ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, context().stream),
            "copying to the GPU", error) &&
         ok(cudaStreamSynchronize(context().stream), "copying to the GPU", error);
}

bool Backend::download(void *dst, const void *src, size_t bytes, std::string &error) {
  return ok(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, context().stream),
            "copying from the GPU", error) &&
         ok(cudaStreamSynchronize(context().stream), "copying from the GPU", error);
}

bool Backend::copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                       size_t width, size_t rows, std::string &error) {
  return queued(cuda::copyRows(dst, dstPitch, src, srcPitch, width, rows), "copying rows",
                error);
}

bool Backend::fill(void *dst, int64_t n, float value, size_t elementBytes,
                   std::string &error) {
  if (elementBytes == sizeof(bf16))
    return queued(fillAsync(static_cast<bf16 *>(dst), n, bf16(value)), "filling", error);
  return queued(fillAsync(static_cast<float *>(dst), n, value), "filling", error);
}

bool Backend::synchronize(std::string &error) {
  return ok(cudaStreamSynchronize(context().stream), "the queued GPU work", error);
}

bool Backend::markCompute(bool begin, std::string &error) {
  Context &c = context();
  if (!c.computeStart || begin == c.computing)
    return true;
  c.computing = begin;
  if (begin)
    return ok(cudaEventRecord(c.computeStart, c.stream), "timing the GPU", error);
  float ms = 0;
  if (!ok(cudaEventRecord(c.computeStop, c.stream), "timing the GPU", error) ||
      !ok(cudaEventSynchronize(c.computeStop), "the queued GPU work", error) ||
      !ok(cudaEventElapsedTime(&ms, c.computeStart, c.computeStop), "timing the GPU", error))
    return false;
  c.computeSeconds += ms / 1e3;
  return true;
}

double Backend::takeComputeSeconds() {
  Context &c = context();
  if (!c.computeStart)
    return -1;
  double seconds = c.computeSeconds;
  c.computeSeconds = 0;
  return seconds;
}

int64_t Backend::markOp(std::string &error) {
  Context &c = context();
  if (!c.stream)
    return -1;
  if (c.opMarks == c.opEvents.size()) {
    cudaEvent_t event = nullptr;
    if (!ok(cudaEventCreate(&event), "creating an op's timing event", error))
      return -1;
    c.opEvents.push_back(event);
  }
  if (!ok(cudaEventRecord(c.opEvents[c.opMarks], c.stream), "timing an op", error))
    return -1;
  return static_cast<int64_t>(c.opMarks++);
}

double Backend::opSeconds(int64_t from, int64_t to, std::string &error) {
  Context &c = context();
  float ms = 0;
  if (!ok(cudaEventElapsedTime(&ms, c.opEvents[from], c.opEvents[to]), "timing an op", error))
    return -1;
  return ms / 1e3;
}

void Backend::resetOpMarks() { context().opMarks = 0; }

} // namespace sbprt::cuda
