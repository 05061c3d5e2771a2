// graph.matmul on cuBLAS: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so B goes first; batches are strided, a shared B
// has stride 0 (or, under an untransposed A, the batch is folded into A's
// rows). Full f32 (the handle is in pedantic math mode: no TF32); bf16
// operands and result with f32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F).
#include "runtime/cuda/Context.h"
#include "runtime/cpu/Ops.h"
#include "runtime/cuda/Ops.h"

#include <type_traits>

namespace sbprt::cuda {

template <typename T>
void matmulOp(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *c,
              const Shape &cShape, bool transposeA, bool transposeB) {
  auto [batch, m, n, k, sharedB] = cpu::matmulDims(aShape, bShape, cShape, transposeA);
  if (batch == 0 || m == 0 || n == 0)
    return;
  // A batch of row-major m x k by one shared B is one (batch * m) x k
  // GEMM: one larger product keeps more of the GPU busy than a batch.
  if (sharedB && !transposeA && batch > 1) {
    m *= batch;
    batch = 1;
  }
  if (k == 0) {
    check(cudaMemsetAsync(c, 0, batch * m * n * sizeof(T), context().stream), "matmul");
    return;
  }
  // Row-major A is m x k (k x m when transposed): column-major k x m, ld k
  // (m x k, ld m). Likewise B.
  int lda = static_cast<int>(transposeA ? m : k), ldb = static_cast<int>(transposeB ? k : n);
  float one = 1.0f, zero = 0.0f;
  cublasOperation_t opB = transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opA = transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    check(cublasSgemmStridedBatched(context().blas, opB, opA, static_cast<int>(n),
                                    static_cast<int>(m), static_cast<int>(k), &one, b, ldb,
                                    sharedB ? 0 : k * n, a, lda, m * k, &zero, c,
                                    static_cast<int>(n), m * n, static_cast<int>(batch)),
          "matmul");
  else
    check(cublasGemmStridedBatchedEx(context().blas, opB, opA, static_cast<int>(n),
                                     static_cast<int>(m), static_cast<int>(k), &one, b,
                                     CUDA_R_16BF, ldb, sharedB ? 0 : k * n, a, CUDA_R_16BF, lda,
                                     m * k, &zero, c, CUDA_R_16BF, static_cast<int>(n), m * n,
                                     static_cast<int>(batch), CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT),
          "matmul");
  if (context().syncEachOp)
    check(cudaStreamSynchronize(context().stream), "matmul");
}

template void matmulOp(const float *, const Shape &, const float *, const Shape &, float *,
                       const Shape &, bool, bool);
template void matmulOp(const bf16 *, const Shape &, const bf16 *, const Shape &, bf16 *,
                       const Shape &, bool, bool);

} // namespace sbprt::cuda
