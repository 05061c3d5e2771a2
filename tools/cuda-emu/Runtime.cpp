// The CUDA emulator's runtime: devices, "device" memory (host memory the
// emulator tracks, so that copies and kernel arguments are checked), the
// stream (every call runs when it is made, which one stream's order
// allows), sticky errors, and kernels run block by block with each thread a
// fiber that yields at __syncthreads and warp shuffles.
//
// A block runs one warp at a time, each as far as it can go: its lanes
// until each finishes or waits, a shuffle as soon as all 32 lanes offered
// their values. A barrier opens once every thread of the block waits at it.
// Threads that wait with nothing left to open them are a deadlock, on the
// GPU too, and a fault here; so are threads that exit while others wait at
// a barrier (undefined behaviour in CUDA).
#include <cuda_runtime.h>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <utility>
#include <unordered_map>
#include <mutex>
#include <vector>

// AddressSanitizer is told of every fiber switch.
#if defined(__SANITIZE_ADDRESS__)
#define SBPC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SBPC_EMU_ASAN 1
#endif
#endif
#if SBPC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(SBPC_EMU_UCONTEXT)
#define SBPC_EMU_SWITCH_STACKS 1
#endif

#if SBPC_EMU_SWITCH_STACKS
// sbpcEmuSwitchStacks(from, to): pushes rbp, rbx, r12-r15, MXCSR and the x87
// control word on the current stack, stores the stack pointer in *from,
// continues on the stack `to` (where another switch left it, or as
// prepare() lays out a new fiber's) by popping the same, and returns there.
extern "C" void sbpcEmuSwitchStacks(void **from, void *to);
asm(R"(
  .pushsection .text
  .globl sbpcEmuSwitchStacks
  .hidden sbpcEmuSwitchStacks
  .type sbpcEmuSwitchStacks, @function
sbpcEmuSwitchStacks:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size sbpcEmuSwitchStacks, .-sbpcEmuSwitchStacks
  .popsection
)");
#endif

namespace sbpc_emu {
namespace {

/// Bytes before and after every allocation, filled with a pattern that is
/// checked after each kernel and copy: a write out of bounds is a fault.
/// The pattern, 0xA5 at even addresses and 0x7F at odd ones, is NaN read
/// as f32 (0x7FA57FA5) or bf16 (0x7FA5), and differs from fresh memory's:
/// a kernel that reads past an allocation and uses what it read computes
/// NaNs, which the checks against the CPU programs see.
constexpr size_t kRedzone = 256;
unsigned char redzoneByte(const unsigned char *at) {
  return reinterpret_cast<uintptr_t>(at) % 2 ? 0x7F : 0xA5;
}
void fillRedzone(unsigned char *at) {
  for (size_t i = 0; i < kRedzone; ++i)
    at[i] = redzoneByte(at + i);
}
/// Fresh device memory is not zero on a GPU: all ones (f32 NaN, int64 -1).
constexpr unsigned char kFreshByte = 0xFF;
constexpr size_t kFiberStack = 256 << 10;

cudaError_t sticky = cudaSuccess, last = cudaSuccess;
int currentDevice = 0;
// start -> bytes. Never destroyed: memory a program does not free stays
// allocated until it exits, as on a GPU, and is not a leak to LeakSanitizer.
std::map<uintptr_t, size_t> &allocations = *new std::map<uintptr_t, size_t>;

int deviceCount() {
  const char *value = std::getenv("SBPC_CUDA_EMU_DEVICES");
  return value && *value ? std::atoi(value) : 1;
}

cudaError_t result(cudaError_t error) {
  if (error != cudaSuccess)
    last = error;
  return error;
}

/// The sticky error once a fault happened, else `error`.
cudaError_t status(cudaError_t error = cudaSuccess) {
  return result(sticky != cudaSuccess ? sticky : error);
}

bool redzonesIntact(std::string &where) {
  for (const auto &[start, bytes] : allocations) {
    auto *p = reinterpret_cast<const unsigned char *>(start);
    for (size_t i = 0; i < kRedzone; ++i)
      if (p[-1 - static_cast<ptrdiff_t>(i)] != redzoneByte(p - 1 - i) ||
          p[bytes + i] != redzoneByte(p + bytes + i)) {
        where = "an allocation of " + std::to_string(bytes) + " bytes";
        return false;
      }
  }
  return true;
}

/// After `what` ran: a write outside every allocation's bounds is its fault.
void checkRedzones(const std::string &what) {
  std::string where;
  if (sticky == cudaSuccess && !redzonesIntact(where))
    fault(what + " wrote out of the bounds of " + where, cudaErrorIllegalAddress);
}

//===----------------------------------------------------------------------===//
// Fibers
//
// On x86-64 a fiber switch is a few instructions (sbpcEmuSwitchStacks): the
// callee-saved registers and the floating-point control words pushed on
// one stack, the stack pointer swapped, the others popped. ucontext's
// swapcontext, the fallback elsewhere, makes a system call for the signal
// mask at every switch, which cost three quarters of an emulated run. Under
// AddressSanitizer every switch is announced to it, so that it knows which
// stack runs.
//===----------------------------------------------------------------------===//

enum class Wait { None, Barrier, Shuffle, Done };

struct Fiber {
#if SBPC_EMU_SWITCH_STACKS
  void *sp = nullptr; // its stack pointer while it does not run
#else
  ucontext_t context;
#endif
  void *stack = nullptr;
  uint3 index;
  Wait wait = Wait::None;
  uint64_t value = 0; // what it offers in a shuffle
  void *fakeStack = nullptr; // AddressSanitizer's, while it does not run
};

struct Block {
  const char *kernel = nullptr;
  const std::function<void()> *thread = nullptr;
  std::vector<Fiber> fibers;
  Fiber *current = nullptr;
#if SBPC_EMU_SWITCH_STACKS
  void *scheduler = nullptr;
#else
  ucontext_t scheduler;
#endif
  // The scheduler's stack, for AddressSanitizer.
  const void *schedulerStack = nullptr;
  size_t schedulerStackSize = 0;
  void *schedulerFakeStack = nullptr;
  std::string failure;
};

Block block;
std::vector<void *> stacks;
/// The blocks run so far, of every launch: the running block's number.
uint64_t blocksRun = 0;
/// Each shared variable's block number when it was last made fresh.
std::unordered_map<const void *, uint64_t> &sharedFreshIn =
    *new std::unordered_map<const void *, uint64_t>;

void *stackFor(size_t i) {
  while (stacks.size() <= i) {
    void *stack = mmap(nullptr, kFiberStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
      std::fprintf(stderr, "cuda-emu: cannot map a fiber stack\n");
      std::abort();
    }
    stacks.push_back(stack);
  }
  return stacks[i];
}

/// The scheduler runs fiber `f` until it waits or finishes.
void resume(Fiber &f) {
#if SBPC_EMU_ASAN
  __sanitizer_start_switch_fiber(&block.schedulerFakeStack, f.stack, kFiberStack);
#endif
#if SBPC_EMU_SWITCH_STACKS
  sbpcEmuSwitchStacks(&block.scheduler, f.sp);
#else
  swapcontext(&block.scheduler, &f.context);
#endif
#if SBPC_EMU_ASAN
  __sanitizer_finish_switch_fiber(block.schedulerFakeStack, nullptr, nullptr);
#endif
}

/// In a fiber that has just been resumed.
void resumed() {
#if SBPC_EMU_ASAN
  __sanitizer_finish_switch_fiber(block.current->fakeStack, &block.schedulerStack,
                                  &block.schedulerStackSize);
#endif
}

/// The current fiber goes back to the scheduler (for good when `done`).
void suspend(bool done) {
#if SBPC_EMU_ASAN
  __sanitizer_start_switch_fiber(done ? nullptr : &block.current->fakeStack,
                                 block.schedulerStack, block.schedulerStackSize);
#else
  (void)done;
#endif
#if SBPC_EMU_SWITCH_STACKS
  sbpcEmuSwitchStacks(&block.current->sp, block.scheduler);
#else
  swapcontext(&block.current->context, &block.scheduler);
#endif
}

[[noreturn]] void fiberMain() {
  resumed();
  (*block.thread)();
  block.current->wait = Wait::Done;
  suspend(true);
  std::abort(); // a finished fiber is never resumed
}

/// Makes fiber `f` start at fiberMain on its stack when first resumed.
void prepare(Fiber &f, size_t i) {
  f.stack = stackFor(i);
#if SBPC_EMU_SWITCH_STACKS
  // From the top: a slot for fiberMain's return address (it never
  // returns; the stack is 16-byte aligned at its call as the ABI wants),
  // fiberMain's address for switchStacks' ret, six registers, and the
  // control words, which the fiber starts with as the scheduler has them.
  auto *top = reinterpret_cast<uint64_t *>(static_cast<char *>(f.stack) + kFiberStack);
  uint64_t *sp = top - 9;
  uint32_t mxcsr;
  uint16_t fpuControl;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpuControl));
  sp[0] = mxcsr | uint64_t(fpuControl) << 32;
  std::fill(sp + 1, sp + 7, 0);
  sp[7] = reinterpret_cast<uint64_t>(&fiberMain);
  sp[8] = 0;
  f.sp = sp;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack;
  f.context.uc_stack.ss_size = kFiberStack;
  f.context.uc_link = nullptr;
  makecontext(&f.context, fiberMain, 0);
#endif
}

/// Back to the scheduler until a barrier or shuffle lets this fiber go on.
void yield(Wait wait) {
  if (!block.current) {
    fault("a __syncthreads or warp shuffle outside a kernel");
    return;
  }
  block.current->wait = wait;
  suspend(false);
  resumed();
}

std::string threadName(const uint3 &t) {
  return "thread (" + std::to_string(t.x) + "," + std::to_string(t.y) + "," +
         std::to_string(t.z) + ")";
}

/// Runs the lanes of warp `w` until none can go on: each lane until it
/// finishes or waits, and a shuffle as soon as all 32 lanes offered.
/// False if a call inside the kernel faulted.
bool runWarp(size_t w) {
  size_t first = w * 32, count = std::min<size_t>(32, block.fibers.size() - first);
  for (;;) {
    for (size_t l = 0; l < count; ++l) {
      Fiber &f = block.fibers[first + l];
      if (f.wait != Wait::None)
        continue;
      block.current = &f;
      threadIdx = f.index;
      resume(f);
      block.current = nullptr;
      if (sticky != cudaSuccess)
        return false;
    }
    bool all = count == 32;
    for (size_t l = 0; l < count && all; ++l)
      all = block.fibers[first + l].wait == Wait::Shuffle;
    if (!all)
      return true;
    for (size_t l = 0; l < count; ++l)
      block.fibers[first + l].wait = Wait::None;
  }
}

/// The inverse of `a` modulo `n` (coprime with it): a * inverse = 1 mod n.
uint64_t inverseModulo(uint64_t a, uint64_t n) {
  __int128 t = 0, nextT = 1, r = n, nextR = a % n;
  while (nextR != 0) {
    __int128 q = r / nextR;
    t = std::exchange(nextT, t - q * nextT);
    r = std::exchange(nextR, r - q * nextR);
  }
  return static_cast<uint64_t>(t < 0 ? t + n : t);
}

/// Why no thread of the block can go on.
std::string deadlock() {
  for (const Fiber &f : block.fibers)
    if (f.wait == Wait::Shuffle)
      return threadName(f.index) + " waits at a warp shuffle that not all 32 lanes of its warp "
                                   "reach";
  for (const Fiber &f : block.fibers)
    if (f.wait == Wait::Done)
      return threadName(f.index) +
             " exited while the others wait at __syncthreads (undefined behaviour)";
  return "threads wait at __syncthreads that others never reach";
}

/// Runs block `serial` of its grid: false with block.failure set when it
/// cannot finish (or a call inside it faulted). One warp at a time runs as
/// far as it can before the next, in an order that changes from block to
/// block, so that a warp reading shared memory that another warp has not
/// written yet, or has already overwritten, reads the wrong value (a
/// missing __syncthreads shows in the results).
bool runBlock(dim3 blockShape, uint64_t serial) {
  size_t threads = size_t(blockShape.x) * blockShape.y * blockShape.z;
  block.fibers.assign(threads, Fiber());
  for (size_t i = 0; i < threads; ++i) {
    Fiber &f = block.fibers[i];
    f.index = {static_cast<unsigned>(i % blockShape.x),
               static_cast<unsigned>(i / blockShape.x % blockShape.y),
               static_cast<unsigned>(i / (size_t(blockShape.x) * blockShape.y))};
    prepare(f, i);
  }
  size_t warps = (threads + 31) / 32;
  bool backwards = serial % 2;
  for (;;) {
    for (size_t i = 0; i < warps; ++i)
      if (!runWarp(backwards ? warps - 1 - i : (i + serial / 2) % warps))
        return false;
    size_t live = 0, atBarrier = 0;
    for (const Fiber &f : block.fibers) {
      live += f.wait != Wait::Done;
      atBarrier += f.wait == Wait::Barrier;
    }
    if (live == 0)
      return true;
    if (atBarrier != live || live != threads) {
      block.failure = deadlock();
      return false;
    }
    for (Fiber &f : block.fibers)
      f.wait = Wait::None;
  }
}

} // namespace

bool isDevice(const void *p, size_t bytes) {
  auto address = reinterpret_cast<uintptr_t>(p);
  auto after = allocations.upper_bound(address);
  if (after == allocations.begin())
    return false;
  --after;
  return address + bytes <= after->first + after->second;
}

void fault(const std::string &what, cudaError_t error) {
  if (sticky != cudaSuccess)
    return;
  sticky = error;
  std::string line = "cuda-emu: " + what + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void syncThreads() { yield(Wait::Barrier); }

void sharedDeclared(void *p, size_t bytes) {
  uint64_t &freshIn = sharedFreshIn[p];
  if (freshIn == blocksRun)
    return;
  freshIn = blocksRun;
  std::memset(p, kFreshByte, bytes);
}

uint64_t shuffle(unsigned mask, uint64_t value, const std::function<int(int)> &source) {
  if (!block.current) {
    fault("a warp shuffle outside a kernel");
    return value;
  }
  if (mask != 0xffffffffu) {
    fault(std::string(block.kernel) + ": a warp shuffle of lanes " + std::to_string(mask) +
          ", not all 32 (not emulated)");
    return value;
  }
  Fiber *me = block.current;
  size_t linear = me - block.fibers.data(), lane = linear % 32;
  // Two rounds: every lane offers its value, then every lane takes its
  // source's before any offers the next.
  me->value = value;
  yield(Wait::Shuffle);
  int from = source(static_cast<int>(lane));
  if (from < 0 || from >= 32)
    from = static_cast<int>(lane);
  uint64_t taken = block.fibers[linear - lane + from].value;
  yield(Wait::Shuffle);
  return taken;
}

void Launch::rejected(const char *what, long long value) {
  valid_ = false;
  std::fprintf(stderr, "cuda-emu: %s: a %s of %lld blocks or threads does not fit a launch\n",
               kernel_, what, value);
  result(cudaErrorInvalidConfiguration);
}

bool Launch::hostPointer(int index) {
  fault(std::string(kernel_) + ": argument " + std::to_string(index) +
            " points outside device memory (a host pointer, or past an allocation)",
        cudaErrorIllegalAddress);
  return false;
}

void runGrid(const char *kernel, dim3 grid, dim3 shape, size_t sharedBytes, cudaStream_t,
             const std::function<void()> &thread) {
  size_t threads = size_t(shape.x) * shape.y * shape.z;
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.y > 65535 || grid.z > 65535 ||
      threads < 1 || threads > 1024 || shape.x > 1024 || shape.y > 1024 || shape.z > 64 ||
      sharedBytes > 48 * 1024) {
    std::fprintf(stderr, "cuda-emu: %s: launch of (%u,%u,%u) blocks of (%u,%u,%u) threads is "
                         "invalid\n",
                 kernel, grid.x, grid.y, grid.z, shape.x, shape.y, shape.z);
    result(cudaErrorInvalidConfiguration);
    return;
  }
  if (sticky != cudaSuccess)
    return;
  block.kernel = kernel;
  block.thread = &thread;
  gridDim = grid;
  blockDim = shape;
  // The blocks in a scrambled order, as a GPU runs them in none: a block
  // that reads what another block of the launch writes reads it unwritten
  // (or overwritten) for about half of the pairs, and half of the pairs of
  // neighbours (block b reading block b - 1's). Consecutive blocks run
  // `gap` (about blocks / 2, coprime with it) places apart in the order:
  // place k runs number (k * step + blocks / 2) mod blocks, step the
  // inverse of gap.
  uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  uint64_t gap = std::max<uint64_t>(blocks / 2, 1);
  while (std::gcd(gap, blocks) != 1)
    ++gap;
  uint64_t step = inverseModulo(gap, blocks);
  for (uint64_t serial = 0; serial < blocks; ++serial) {
    uint64_t number =
        static_cast<uint64_t>(((unsigned __int128)serial * step + blocks / 2) % blocks);
    unsigned x = static_cast<unsigned>(number % grid.x),
             y = static_cast<unsigned>(number / grid.x % grid.y),
             z = static_cast<unsigned>(number / (uint64_t(grid.x) * grid.y));
    blockIdx = {x, y, z};
    block.failure.clear();
    ++blocksRun;
    if (!runBlock(shape, serial)) {
      if (!block.failure.empty())
        fault(std::string(kernel) + ": block (" + std::to_string(x) + "," + std::to_string(y) +
              "," + std::to_string(z) + "): " + block.failure);
      return;
    }
  }
  checkRedzones(kernel);
}

} // namespace sbpc_emu

using namespace sbpc_emu;

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return *count > 0 ? cudaSuccess : result(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= deviceCount())
    return result(cudaErrorInvalidDevice);
  currentDevice = device;
  return status();
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *properties, int device) {
  if (device < 0 || device >= deviceCount())
    return result(cudaErrorInvalidDevice);
  *properties = cudaDeviceProp{};
  std::snprintf(properties->name, sizeof properties->name, "sbpc CUDA emulator %d", device);
  // One GPU per emulated device: ranks given distinct devices are given
  // distinct GPUs (and choose NCCL), ranks given the same one share it.
  std::memcpy(properties->uuid.bytes, "sbpc-emu", 8);
  std::memcpy(properties->uuid.bytes + 8, &device, sizeof device);
  properties->totalGlobalMem = size_t(80) << 30;
  properties->major = 9;
  properties->multiProcessorCount = 132;
  return status();
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute, int device) {
  if (device < 0 || device >= deviceCount())
    return result(cudaErrorInvalidDevice);
  if (attribute != cudaDevAttrMaxPitch)
    return result(cudaErrorInvalidValue);
  *value = std::numeric_limits<int>::max();
  return status();
}

struct CUstream_st {
  int device;
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned) {
  *stream = new CUstream_st{currentDevice};
  return status();
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return status();
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return status(); }
// Work runs as it is queued: a stream has none left.
cudaError_t cudaStreamQuery(cudaStream_t) { return status(); }

struct CUevent_st {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  *event = new CUevent_st;
  return status();
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return status();
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (!event)
    return result(cudaErrorInvalidValue);
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return status();
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? status() : result(cudaErrorInvalidValue);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  // CUDA refuses events never recorded (cudaErrorInvalidResourceHandle).
  if (!ms || !start || !end || !start->recorded || !end->recorded)
    return result(cudaErrorInvalidValue);
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return status();
}

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
  *pointer = nullptr;
  if (sticky != cudaSuccess)
    return status();
  // cudaMalloc aligns to 256 bytes.
  size_t total = (bytes + 2 * kRedzone + 255) / 256 * 256;
  auto *raw = static_cast<unsigned char *>(std::aligned_alloc(256, total));
  if (!raw)
    return result(cudaErrorMemoryAllocation);
  unsigned char *start = raw + kRedzone;
  fillRedzone(raw);
  std::memset(start, kFreshByte, bytes);
  fillRedzone(start + bytes);
  allocations[reinterpret_cast<uintptr_t>(start)] = bytes;
  *pointer = start;
  return cudaSuccess;
}

cudaError_t cudaFree(void *pointer) {
  if (!pointer)
    return status();
  auto found = allocations.find(reinterpret_cast<uintptr_t>(pointer));
  if (found == allocations.end())
    return result(cudaErrorInvalidValue);
  checkRedzones("a kernel or copy before cudaFree");
  allocations.erase(found);
  std::free(static_cast<unsigned char *>(pointer) - kRedzone);
  return status();
}

namespace {

/// Whether each side of a copy of `kind` is where the kind says.
cudaError_t checkCopy(void *dst, size_t dstBytes, const void *src, size_t srcBytes,
                      cudaMemcpyKind kind, const char *what) {
  bool dstDevice = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  bool srcDevice = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault || kind == cudaMemcpyHostToHost)
    return cudaSuccess;
  if (isDevice(dst, dstBytes) != dstDevice || isDevice(src, srcBytes) != srcDevice) {
    fault(std::string(what) + ": a copy of kind " + std::to_string(kind) + " between " +
              (isDevice(src, srcBytes) ? "device" : "host") + " memory and " +
              (isDevice(dst, dstBytes) ? "device" : "host") +
              " memory (or past the end of an allocation)",
          cudaErrorInvalidValue);
    return sticky;
  }
  return cudaSuccess;
}

} // namespace

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  if (sticky != cudaSuccess || bytes == 0)
    return status();
  if (cudaError_t error = checkCopy(dst, bytes, src, bytes, kind, "cudaMemcpyAsync"))
    return result(error);
  std::memmove(dst, src, bytes);
  return status();
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                              size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t) {
  if (sticky != cudaSuccess || width == 0 || height == 0)
    return status();
  if (width > dstPitch || width > srcPitch)
    return result(cudaErrorInvalidValue);
  size_t dstBytes = dstPitch * (height - 1) + width, srcBytes = srcPitch * (height - 1) + width;
  if (cudaError_t error = checkCopy(dst, dstBytes, src, srcBytes, kind, "cudaMemcpy2DAsync"))
    return result(error);
  for (size_t row = 0; row < height; ++row)
    std::memmove(static_cast<char *>(dst) + row * dstPitch,
                 static_cast<const char *>(src) + row * srcPitch, width);
  return status();
}

cudaError_t cudaMemsetAsync(void *pointer, int value, size_t bytes, cudaStream_t) {
  if (sticky != cudaSuccess || bytes == 0)
    return status();
  if (!isDevice(pointer, bytes)) {
    fault("cudaMemsetAsync: not device memory (or past the end of an allocation)",
          cudaErrorInvalidValue);
    return sticky;
  }
  std::memset(pointer, value, bytes);
  return status();
}

cudaError_t cudaGetLastError() {
  cudaError_t error = sticky != cudaSuccess ? sticky : last;
  last = cudaSuccess;
  return error;
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorIllegalAddress:
    return "an illegal memory access was encountered";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  }
  return "unknown error";
}
