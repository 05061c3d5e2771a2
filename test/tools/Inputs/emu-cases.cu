// Cases for the CUDA emulator (tools/cuda-emu), one per run: `emu-cases
// NAME` runs case NAME and prints what the calls returned and computed.
// cuda-emu.test checks the results against values worked out by hand from
// CUDA's and cuBLAS's definitions, and that every fault is reported.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

float *deviceFloats(const std::vector<float> &values) {
  void *p = nullptr;
  cudaMalloc(&p, values.size() * sizeof(float));
  cudaMemcpyAsync(p, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice);
  return static_cast<float *>(p);
}

std::vector<float> hostFloats(const float *p, size_t n) {
  std::vector<float> values(n);
  cudaMemcpyAsync(values.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
  cudaStreamSynchronize(nullptr);
  return values;
}

void print(const char *name, const std::vector<float> &values) {
  std::printf("%s:", name);
  for (float v : values)
    std::printf(" %g", v);
  std::printf("\n");
}

void status(const char *what) {
  std::printf("%s: %s\n", what, cudaGetErrorString(cudaGetLastError()));
}

// Block sums: warp shuffles, then shared memory between warps.
__global__ void blockSums(const float *in, float *out) {
  __shared__ float partial[4];
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    out[blockIdx.x] = partial[0] + partial[1] + partial[2] + partial[3];
}

// Each warp writes its slot, then reads the next warp's without a barrier
// between: a race the emulator's warp-at-a-time schedule exposes.
__global__ void missingBarrier(float *out) {
  __shared__ float slot[4];
  int warp = threadIdx.x / 32;
  slot[warp] = static_cast<float>(warp + 1);
  if (threadIdx.x % 32 == 0)
    out[warp] = slot[(warp + 1) % 4];
}

// Block 0 alone writes the shared slot that every block reads: the others
// read their own shared memory, never written.
__global__ void staleShared(float *out) {
  __shared__ float slot;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    slot = 7.0f;
  __syncthreads();
  if (threadIdx.x == 0)
    out[blockIdx.x] = slot;
}

// Each block reads the element that the block before it writes.
__global__ void previousBlock(float *out, float *previous) {
  out[blockIdx.x] = static_cast<float>(blockIdx.x + 1);
  previous[blockIdx.x] = blockIdx.x ? out[blockIdx.x - 1] : 0.0f;
}

struct alignas(16) Four {
  float v[4];
};

// A vector load from x + 1 (a GPU's misaligned address).
__global__ void loadFour(const float *x, float *out) {
  Four four = *reinterpret_cast<const Four *>(x + 1);
  *out = four.v[0];
}

// The sum of x[0..n], one element past its end.
__global__ void sumThroughEnd(const float *x, int n, float *sum) {
  float total = 0.0f;
  for (int i = 0; i <= n; ++i)
    total += x[i];
  *sum = total;
}

__global__ void divergentBarrier(float *x) {
  if (threadIdx.x < 32)
    __syncthreads();
  x[threadIdx.x] = 1.0f;
}

__global__ void exitBeforeBarrier(float *x) {
  if (threadIdx.x == 5)
    return;
  __syncthreads();
  x[threadIdx.x] = 1.0f;
}

__global__ void halfWarpShuffle(float *x) {
  float v = x[threadIdx.x];
  if (threadIdx.x % 32 < 16)
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  x[threadIdx.x] = v;
}

__global__ void writeAt(float *x, long long at) { x[at] = 1.0f; }

} // namespace

int main(int argc, char **argv) {
  // Unbuffered, so that what it prints and the emulator's lines on stderr
  // come in the order they happen.
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::string name = argc > 1 ? argv[1] : "";
  if (name == "block-sums") {
    std::vector<float> in(256);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i % 7);
    float *x = deviceFloats(in), *out = deviceFloats({0, 0});
    blockSums<<<2, 128>>>(x, out);
    status("launch");
    print("sums", hostFloats(out, 2));
  } else if (name == "missing-barrier") {
    float *out = deviceFloats({0, 0, 0, 0});
    missingBarrier<<<1, 128>>>(out);
    status("launch");
    print("read", hostFloats(out, 4));
  } else if (name == "stale-shared") {
    float *out = deviceFloats({0, 0});
    staleShared<<<2, 64>>>(out);
    status("launch");
    print("read", hostFloats(out, 2));
  } else if (name == "block-order") {
    float *out = nullptr, *previous = nullptr;
    cudaMalloc(reinterpret_cast<void **>(&out), 4 * sizeof(float));
    cudaMalloc(reinterpret_cast<void **>(&previous), 4 * sizeof(float));
    previousBlock<<<4, 1>>>(out, previous);
    status("launch");
    print("out", hostFloats(out, 4));
    print("previous", hostFloats(previous, 4));
    cudaMalloc(reinterpret_cast<void **>(&out), 7 * sizeof(float));
    cudaMalloc(reinterpret_cast<void **>(&previous), 7 * sizeof(float));
    previousBlock<<<7, 1>>>(out, previous);
    print("previous of 7", hostFloats(previous, 7));
  } else if (name == "misaligned-load") {
    float *x = deviceFloats({1, 2, 3, 4, 5, 6, 7, 8}), *out = deviceFloats({0});
    loadFour<<<1, 1>>>(x, out);
    status("launch");
  } else if (name == "read-past-end") {
    float *x = deviceFloats({1, 2, 3, 4}), *sum = deviceFloats({0});
    sumThroughEnd<<<1, 1>>>(x, 3, sum);
    print("through the last", hostFloats(sum, 1));
    sumThroughEnd<<<1, 1>>>(x, 4, sum);
    status("one past");
    print("sum", hostFloats(sum, 1));
  } else if (name == "divergent-barrier" || name == "exit-before-barrier" ||
             name == "half-warp-shuffle") {
    float *x = deviceFloats(std::vector<float>(64, 1.0f));
    if (name == "divergent-barrier")
      divergentBarrier<<<1, 64>>>(x);
    else if (name == "exit-before-barrier")
      exitBeforeBarrier<<<1, 64>>>(x);
    else
      halfWarpShuffle<<<1, 64>>>(x);
    status("launch");
    status("after");
  } else if (name == "write-past-end") {
    float *x = deviceFloats({0, 0, 0, 0});
    writeAt<<<1, 1>>>(x, 4);
    status("launch");
  } else if (name == "host-pointer") {
    float host[4] = {};
    writeAt<<<1, 1>>>(host, 0);
    status("launch");
  } else if (name == "bad-launches") {
    float *x = deviceFloats({0});
    writeAt<<<0, 1>>>(x, 0);
    status("no blocks");
    writeAt<<<1, 2048>>>(x, 0);
    status("2048 threads");
    long long blocks = 1ll << 32;
    writeAt<<<blocks, 1>>>(x, 0);
    status("2^32 blocks");
    writeAt<<<1, 1>>>(x, 0);
    status("a good one after");
  } else if (name == "copy-kinds") {
    float host[2] = {1, 2};
    float *x = deviceFloats({0, 0});
    std::printf("device to device from the host: %s\n",
                cudaGetErrorString(cudaMemcpyAsync(x, host, sizeof host,
                                                   cudaMemcpyDeviceToDevice)));
    status("later");
  } else if (name == "events") {
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    float ms = -1;
    std::printf("never recorded: %s\n",
                cudaGetErrorString(cudaEventElapsedTime(&ms, start, stop)));
    status("last error");
    float *x = deviceFloats({0});
    cudaEventRecord(start);
    writeAt<<<1, 1>>>(x, 0);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    cudaError_t e = cudaEventElapsedTime(&ms, start, stop);
    std::printf("around a kernel: %s, %s\n", cudaGetErrorString(e),
                ms >= 0 ? "not negative" : "negative");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  } else if (name == "gemm") {
    // Column-major A (2 x 3, lda 2) = [[1, 3, 5], [2, 4, 6]] and B (3 x 2,
    // ldb 3) = [[1, 4], [2, 5], [3, 6]]: C = A B = [[22, 49], [28, 64]],
    // stored column by column: 22 28 49 64. Transposed: the same product
    // from A^T stored (3 x 2, lda 3: 1 3 5 2 4 6) and B^T (2 x 3, ldb 2:
    // 1 4 2 5 3 6).
    cublasHandle_t blas;
    cublasCreate(&blas);
    float *a = deviceFloats({1, 2, 3, 4, 5, 6}), *b = deviceFloats({1, 2, 3, 4, 5, 6});
    float *c = deviceFloats({-1, -1, -1, -1});
    float one = 1, zero = 0;
    cublasStatus_t s = cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one,
                                                 a, 2, 0, b, 3, 0, &zero, c, 2, 0, 1);
    std::printf("NN: %s\n", cublasGetStatusString(s));
    print("C", hostFloats(c, 4));
    float *at = deviceFloats({1, 3, 5, 2, 4, 6}), *bt = deviceFloats({1, 4, 2, 5, 3, 6});
    c = deviceFloats({-1, -1, -1, -1});
    s = cublasSgemmStridedBatched(blas, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &one, at, 3, 0, bt, 2,
                                  0, &zero, c, 2, 0, 1);
    std::printf("TT: %s\n", cublasGetStatusString(s));
    print("C", hostFloats(c, 4));
    s = cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, 1, 0, b, 3, 0,
                                  &zero, c, 2, 0, 1);
    std::printf("lda 1 < m 2: %s\n", cublasGetStatusString(s));
    cublasDestroy(blas);
  } else if (name == "lt-epilogue") {
    // D = gelu(A B + bias) with A = I (2 x 2), B = [[1, 2], [-3, 0.5]]
    // (column-major: 1 -3 2 0.5) and bias [0.5, 1] per row of D.
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    float *a = deviceFloats({1, 0, 0, 1}), *b = deviceFloats({1, -3, 2, 0.5f});
    float *d = deviceFloats({0, 0, 0, 0}), *bias = deviceFloats({0.5f, 1});
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    cublasLtMatrixLayout_t layout;
    cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 2, 2, 2);
    cublasLtMatmulPreference_t preference;
    cublasLtMatmulPreferenceCreate(&preference);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, layout, layout, layout, layout, preference, 1, &result,
                                   &found);
    float one = 1, zero = 0;
    cublasStatus_t s = cublasLtMatmul(lt, op, &one, a, layout, b, layout, &zero, d, layout, d,
                                      layout, &result.algo, nullptr, 0, nullptr);
    std::printf("gelu bias: %s\n", cublasGetStatusString(s));
    print("D", hostFloats(d, 4));
    // An operand less aligned than the algorithm was chosen for.
    s = cublasLtMatmul(lt, op, &one, a + 1, layout, b, layout, &zero, d, layout, d, layout,
                       &result.algo, nullptr, 0, nullptr);
    std::printf("misaligned A: %s\n", cublasGetStatusString(s));
    int badSize = 0;
    std::printf("epilogue of 2 bytes: %s\n",
                cublasGetStatusString(cublasLtMatmulDescSetAttribute(
                    op, CUBLASLT_MATMUL_DESC_EPILOGUE, &badSize, 2)));
    cublasLtMatmulPreferenceDestroy(preference);
    cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(lt);
  } else {
    std::fprintf(stderr, "emu-cases: no case '%s'\n", name.c_str());
    return 2;
  }
  return 0;
}
