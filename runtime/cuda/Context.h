// Inside libsbprt_cuda: the rank's device, stream and cuBLAS handle, error
// checks that end the job naming the op, launch shapes, and the strided
// views the layout kernels walk. CUDA sources only.
#pragma once

#include "runtime/cpu/Kernels.h"
#include "runtime/rank/Rank.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sbprt::cuda {

/// The bytes of cuBLASLt workspace, allocated with the handle.
constexpr size_t kLtWorkspaceBytes = 32u << 20;

struct Context {
  int device = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  /// cuBLASLt, for GEMMs with epilogues (exec.linear and its gradients),
  /// and its workspace.
  cublasLtHandle_t lt = nullptr;
  void *ltWorkspace = nullptr;
  /// SBPRT_CUDA_SYNC=1: wait after every op.
  bool syncEachOp = false;
  /// SBPRT_CUDA_EPILOGUES=0: linear layers and their gradients as a GEMM,
  /// then their bias, GELU, GELU-gradient and column-sum kernels, never
  /// cuBLASLt's fused epilogues.
  bool epilogues = true;
  /// SBPRT_CUDA_ONE_PASS=0: the row kernels (softmax, layer norm and their
  /// gradients) always loop over their rows, never hold a row in registers.
  bool onePassRows = true;
  /// SBPRT_CUDA_ROW_WARPS=0: a one-pass row kernel holds its row in a whole
  /// block, never in a warp (Rows.cu launchOnePass).
  bool rowWarps = true;
  /// SBPRT_CUDA_ATTENTION_WIDE=0: exec.attention stages its tiles 4 bytes
  /// a load, never 16 (Attention.cu).
  bool attentionWide = true;
  /// SBPRT_CUDA_GEMM_PAD=BYTES: the most of the cuBLASLt workspace a bf16
  /// GEMM with misaligned rows uses to pad them (Gemm.cu); 0: none, the
  /// GEMM as it is.
  size_t gemmPadBytes = kLtWorkspaceBytes;
  /// SBPRT_CUDA_INITCHECK=1 (device_check.py sets it under initcheck):
  /// scratch that cuBLAS's bf16 GEMMs write and our kernels then read is
  /// zeroed first, as initcheck does not see those GEMMs' writes (Gemm.cu).
  bool initcheck = false;
  /// Kernel workspace outside the arena (per-row statistics, per-chunk
  /// column sums, staged ids), grown on demand and kept: a few bytes per
  /// row, up to 4 KiB per column.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The device's clock around the program's computing (Backend::markCompute):
  /// events recorded on the stream where it starts and stops, whether it has
  /// started, and the seconds between the marks so far.
  cudaEvent_t computeStart = nullptr, computeStop = nullptr;
  bool computing = false;
  double computeSeconds = 0;
  /// --profile ops (Backend::markOp): events recorded where ops start, the
  /// first `opMarks` of them in use.
  std::vector<cudaEvent_t> opEvents;
  size_t opMarks = 0;
};

Context &context();
inline cudaStream_t stream() { return context().stream; }

/// Elements of a tensor of `shape`.
inline int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// End the job ("rank R failed in OP: CUDA error in WHAT: ...") unless ok.
void check(cudaError_t status, const char *what);
void check(cublasStatus_t status, const char *what);
/// After a kernel launch: its launch error, and with SBPRT_CUDA_SYNC the
/// error of running it.
void launched(const char *what);
/// `rows` rows of `width` bytes within device memory, consecutive rows
/// `dstPitch` and `srcPitch` apart, on the rank's stream: one copy when the
/// rows are contiguous, cudaMemcpy2DAsync when the pitches allow it, row
/// by row beyond the device's largest pitch.
cudaError_t copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                     size_t rows);
/// `n` elements of `dst` set to `value` on the rank's stream (f32, bf16
/// or int64): the launch's status.
template <typename T> cudaError_t fillAsync(T *dst, int64_t n, T value);
/// At least `bytes` of workspace on the device.
void *workspace(size_t bytes);
/// Frees exec.linear's cached cuBLASLt plans (Gemm.cu).
void releaseLinearPlans();

constexpr int kThreads = 256;
inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 16 ? 65535 * 16 : blocks);
}

/// A walk over `shape` (row-major, up to kMaxRank dimensions) with, for each
/// of two views, the element offset of an index: start + sum(index * stride).
constexpr int kMaxRank = 8;
struct Strided {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t stride[2][kMaxRank] = {};
  int64_t start[2] = {0, 0};

  /// The offsets in both views of linear index `i` of `shape` (0 <= i <
  /// the elements): a division per dimension but the outermost, in 32 bits
  /// where the numbers fit (several times cheaper on a GPU than 64).
  __host__ __device__ void offsets(int64_t i, int64_t &first, int64_t &second) const {
    first = start[0];
    second = start[1];
    for (int d = rank - 1; d >= 0; --d) {
      int64_t index = i;
      if (d > 0 && ((i | shape[d]) >> 32) == 0) {
        uint32_t quotient = static_cast<uint32_t>(i) / static_cast<uint32_t>(shape[d]);
        index = static_cast<uint32_t>(i) - quotient * static_cast<uint32_t>(shape[d]);
        i = quotient;
      } else if (d > 0) {
        int64_t quotient = i / shape[d];
        index = i - quotient * shape[d];
        i = quotient;
      }
      first += index * stride[0][d];
      second += index * stride[1][d];
    }
  }
};

/// The same walk with fewer dimensions: those of size 1 dropped, and
/// neighbours that both views step through contiguously merged (a
/// same-shape add is one dimension, a bias add two).
Strided collapsed(const Strided &view);

/// Row-major strides of `shape`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);
/// A walk of `shape`; fails the job beyond kMaxRank dimensions.
Strided stridedOf(const std::vector<int64_t> &shape);
/// Strides of `shape` seen through the NumPy broadcast to `outShape`: 0
/// where a dimension is stretched or missing.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &outShape);

/// Grid-stride loop over [0, n).
#define SBPRT_FOR_EACH(i, n)                                                                    \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);       \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// The sum (max) of `value` over the block, in a fixed order; every thread
/// gets it. `shared` holds blockDim.x / 32 values; blockDim.x is a multiple
/// of 32.
template <typename T, typename Combine>
__device__ T blockReduce(T value, T *shared, Combine combine) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = combine(value, __shfl_xor_sync(0xffffffffu, value, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads(); // shared may still be read by a previous call
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  value = shared[0];
  for (int w = 1; w < warps; ++w)
    value = combine(value, shared[w]);
  return value;
}

/// Copies `count` ids from the arena to the host (synchronously, into
/// `host` when given) and checks each lies in [0, limit); false with
/// `error` set as the CPU kernels say it.
bool checkIds(const int64_t *ids, int64_t count, int64_t limit, const char *what,
              const char *unit, const IndexPlace &place, std::string &error,
              std::vector<int64_t> *host = nullptr);

} // namespace sbprt::cuda
