// Does compute-sanitizer's initcheck see what cuBLAS's bf16 GEMMs write?
// C is written only by cuBLAS (cublasGemmStridedBatchedEx, cublasGemmEx,
// cublasLtMatmul with a bias epilogue), then read by a plain kernel: a
// report on readAll is one about cuBLAS's writes (docs/cuda.md, "On a
// GPU"). Each GEMM's status and first element are printed to check that it
// did write.
//
//   nvcc -arch=sm_90 -o probe initcheck-cublas-bf16.cu -lcublasLt -lcublas
//   compute-sanitizer --tool initcheck --print-limit 4 ./probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>

__global__ void readAll(const __nv_bfloat16 *c, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = __bfloat162float(c[i]);
}

static void run(const char *what, int m, int n, int k, int batch, bool lt) {
  size_t a = size_t(m) * k * batch, b = size_t(k) * n * batch, c = size_t(m) * n * batch;
  std::vector<__nv_bfloat16> ha(a), hb(b), hbias(n);
  for (size_t i = 0; i < a; ++i) ha[i] = __float2bfloat16(float(i % 7) / 7);
  for (size_t i = 0; i < b; ++i) hb[i] = __float2bfloat16(float(i % 5) / 5);
  for (int i = 0; i < n; ++i) hbias[i] = __float2bfloat16(1.0f);
  __nv_bfloat16 *da, *db, *dc, *dbias;
  float *dout;
  cudaMalloc(&da, a * 2); cudaMalloc(&db, b * 2); cudaMalloc(&dc, c * 2); cudaMalloc(&dbias, n * 2);
  cudaMalloc(&dout, c * 4);
  cudaMemcpy(da, ha.data(), a * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, hb.data(), b * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dbias, hbias.data(), n * 2, cudaMemcpyHostToDevice);
  float one = 1, zero = 0;
  if (!lt) {
    cublasHandle_t h; cublasCreate(&h);
    cublasStatus_t s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, db, CUDA_R_16BF, n, (long long)k * n, da, CUDA_R_16BF, k, (long long)m * k, &zero, dc, CUDA_R_16BF, n, (long long)m * n, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    printf("%s: gemm status %d\n", what, int(s));
    cudaDeviceSynchronize(); cublasDestroy(h);
  } else {
    cublasLtHandle_t h; cublasLtCreate(&h);
    cublasLtMatmulDesc_t op; cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias);
    cublasLtMatrixLayout_t lw, lx, ly;
    cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, n, k, n);
    cublasLtMatrixLayoutCreate(&lx, CUDA_R_16BF, k, m, k);
    cublasLtMatrixLayoutCreate(&ly, CUDA_R_16BF, n, m, n);
    void *ws; size_t wsb = 32 << 20; cudaMalloc(&ws, wsb);
    cublasLtMatmulPreference_t p; cublasLtMatmulPreferenceCreate(&p);
    cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t r{}; int found = 0;
    cublasLtMatmulAlgoGetHeuristic(h, op, lw, lx, ly, ly, p, 1, &r, &found);
    cublasStatus_t s = cublasLtMatmul(h, op, &one, db, lw, da, lx, &zero, dc, ly, dc, ly, &r.algo, ws, wsb, 0);
    printf("%s: lt found %d status %d\n", what, found, int(s));
    cudaDeviceSynchronize();
  }
  readAll<<<(c + 255) / 256, 256>>>(dc, dout, int(c));
  std::vector<float> out(c);
  cudaMemcpy(out.data(), dout, c * 4, cudaMemcpyDeviceToHost);
  // Row 0, column 0 of batch 0 against the host's sum.
  float ref = lt ? 1.0f : 0.0f;
  for (int i = 0; i < k; ++i) ref += __bfloat162float(ha[i]) * __bfloat162float(hb[size_t(i) * n]);
  printf("%s: c[0] %g, host %g; %s\n", what, out[0], ref, cudaGetErrorString(cudaGetLastError()));
}

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0); // said before a sanitizer's timeout
  run("batched 32 x (8x8x8)", 8, 8, 8, 32, false);
  run("64x32x32", 64, 32, 32, 1, false);
  run("lt 64x32x32 bias", 64, 32, 32, 1, true);
  return 0;
}
