// graph.matmul on cuBLAS: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so B goes first; batches are strided, a shared B
// has stride 0 (or, under an untransposed A, the batch is folded into A's
// rows). Full f32 (the handle is in pedantic math mode: no TF32).
#include "runtime/cuda/Context.h"
#include "runtime/cpu/Ops.h"
#include "runtime/cuda/Ops.h"

namespace sbprt::cuda {

void matmulOp(const float *a, const Shape &aShape, const float *b, const Shape &bShape, float *c,
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
    check(cudaMemsetAsync(c, 0, batch * m * n * sizeof(float), context().stream), "matmul");
    return;
  }
  // Row-major A is m x k (k x m when transposed): column-major k x m, ld k
  // (m x k, ld m). Likewise B.
  int lda = static_cast<int>(transposeA ? m : k), ldb = static_cast<int>(transposeB ? k : n);
  float one = 1.0f, zero = 0.0f;
  check(cublasSgemmStridedBatched(context().blas, transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  transposeA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                  static_cast<int>(m), static_cast<int>(k), &one, b, ldb,
                                  sharedB ? 0 : k * n, a, lda, m * k, &zero, c,
                                  static_cast<int>(n), m * n, static_cast<int>(batch)),
        "matmul");
  if (context().syncEachOp)
    check(cudaStreamSynchronize(context().stream), "matmul");
}

} // namespace sbprt::cuda
