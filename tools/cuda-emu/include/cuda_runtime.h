// The CUDA emulator's cuda_runtime.h: CUDA's keywords, built-in variables
// and intrinsics, kernel launches and the runtime API that libsbprt_cuda and
// generated programs use, on the host. tools/cuda-emu/README.md says what it
// checks and what it cannot.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#define __CUDA_EMU__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Blocks run one after another, so a function's one static copy serves as
// each block's shared memory in turn; cu2cpp.py follows each declaration
// with a call to sbpc_emu::sharedDeclared, which makes it fresh (NaN) for
// each block.
#define __shared__ static

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// Set by the emulator for the thread it runs.
inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
constexpr int warpSize = 32;

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchFailure = 719,
} cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr { cudaDevAttrMaxPitch = 11 };

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16BF = 14,
} cudaDataType;

struct CUstream_st;
typedef CUstream_st *cudaStream_t;
constexpr unsigned cudaStreamNonBlocking = 1;
/// An event: the host's clock when it was recorded (the stream runs each
/// call when it is made).
struct CUevent_st;
typedef CUevent_st *cudaEvent_t;

struct cudaUUID_t {
  char bytes[16];
};

struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  int major, minor, multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *properties, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute, int device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaMalloc(void **pointer, size_t bytes);
cudaError_t cudaFree(void *pointer);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = nullptr);
cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes,
                            cudaStream_t stream = nullptr);
cudaError_t cudaGetLastError();
const char *cudaGetErrorString(cudaError_t error);

namespace sbpc_emu {

/// Whether [p, p + bytes) lies in one cudaMalloc allocation.
bool isDevice(const void *p, size_t bytes = 1);
/// A fault in a kernel or a call, as the GPU would have one: says `what`
/// once on stderr and makes every later call fail (CUDA's sticky errors).
void fault(const std::string &what, cudaError_t error = cudaErrorLaunchFailure);
/// Runs `thread` for every thread of every block of a launch: each block's
/// threads as fibers, switched at __syncthreads and warp shuffles.
void runGrid(const char *kernel, dim3 grid, dim3 block, size_t sharedBytes, cudaStream_t stream,
             const std::function<void()> &thread);
/// The block-wide barrier, and a warp's exchange of `value` (8 bytes at
/// most): lane l gets the value of lane `source(l)`.
void syncThreads();
/// Shared memory [p, p + bytes) declared by the running thread: filled
/// with all-ones bytes (NaN) the first time a thread of each block
/// reaches it, as a block's shared memory starts uninitialized.
void sharedDeclared(void *p, size_t bytes);
uint64_t shuffle(unsigned mask, uint64_t value, const std::function<int(int)> &source);

/// The launch `kernel<<<grid, block, shared, stream>>>(args...)`, as
/// tools/cuda-emu/cu2cpp.py rewrites it.
class Launch {
public:
  template <typename G, typename B>
  Launch(const char *kernel, G grid, B block, size_t sharedBytes = 0,
         cudaStream_t stream = nullptr)
      : kernel_(kernel), grid_(dims(grid, "grid")), block_(dims(block, "block")),
        sharedBytes_(sharedBytes), stream_(stream) {}

  /// `kernel` calls the kernel with the launch's arguments (so that, as
  /// in CUDA, a template kernel's arguments are deduced from them).
  template <typename F, typename... A> void operator()(F kernel, A &&...args) {
    // A launch copies its arguments; each thread gets them as parameters.
    std::tuple<std::decay_t<A>...> copied(std::forward<A>(args)...);
    if (!valid_)
      return;
    int index = 0;
    bool devicePointers = true;
    std::apply([&](const auto &...arg) { ((devicePointers &= checkArgument(arg, index++)), ...); },
               copied);
    if (!devicePointers)
      return;
    runGrid(kernel_, grid_, block_, sharedBytes_, stream_,
            [&] { std::apply([&](auto &...arg) { kernel(arg...); }, copied); });
  }

private:
  /// An integer grid or block size must fit dim3's unsigned x (nvcc
  /// truncates it silently).
  template <typename D> dim3 dims(D value, const char *what) {
    if constexpr (std::is_integral_v<D>) {
      if (value < 1 || static_cast<unsigned long long>(value) > 0x7fffffffull) {
        rejected(what, static_cast<long long>(value));
        return dim3(0);
      }
      return dim3(static_cast<unsigned>(value));
    } else {
      return dim3(value);
    }
  }
  void rejected(const char *what, long long value);
  template <typename T> bool checkArgument(const T &arg, int index) {
    if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>) {
      if (arg && !isDevice(arg))
        return hostPointer(index);
    }
    return true;
  }
  bool hostPointer(int index);

  bool valid_ = true; // first: dims() clears it while the others are set
  const char *kernel_;
  dim3 grid_, block_;
  size_t sharedBytes_;
  cudaStream_t stream_;
};

} // namespace sbpc_emu

inline void __syncthreads() { sbpc_emu::syncThreads(); }

namespace sbpc_emu {
template <typename T> T shuffled(unsigned mask, T value, const std::function<int(int)> &source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "a shuffle moves 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof value);
  bits = shuffle(mask, bits, source);
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
} // namespace sbpc_emu

// Lane l of a segment of `width` lanes reads lane l ^ laneMask, or keeps its
// own value where that lane is in a later segment.
template <typename T> T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  return sbpc_emu::shuffled(mask, value, [=](int lane) {
    int source = lane ^ laneMask;
    return source / width > lane / width ? lane : source;
  });
}
template <typename T> T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  return sbpc_emu::shuffled(mask, value, [=](int lane) {
    int source = lane + static_cast<int>(delta);
    return source / width != lane / width ? lane : source;
  });
}
template <typename T> T __shfl_sync(unsigned mask, T value, int sourceLane, int width = 32) {
  return sbpc_emu::shuffled(mask, value,
                            [=](int lane) { return lane / width * width + sourceLane % width; });
}
