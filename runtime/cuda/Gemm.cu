// graph.matmul on cuBLAS: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so B goes first; batches are strided, a shared B
// has stride 0 (or, under an untransposed A, the batch is folded into A's
// rows). Full f32 (the handle is in pedantic math mode: no TF32); bf16
// operands and result with f32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F).
//
// exec.linear on cuBLASLt: the same GEMM with the bias (and GELU) in the
// epilogue, one plan (descriptors and the heuristic's algorithm) per shape
// and operand alignment, kept for the run.
#include "runtime/cuda/Context.h"
#include "runtime/cpu/Ops.h"
#include "runtime/cuda/Ops.h"

#include <map>
#include <tuple>
#include <type_traits>

namespace sbprt::cuda {

template <typename T>
void matmulOp(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *c,
              const Shape &cShape, bool transposeA, bool transposeB) {
  auto [batch, m, n, k, sharedB] = cpu::matmulDims(aShape, bShape, cShape, transposeA);
  if (batch == 0 || m == 0 || n == 0)
    return;
  // A batch of row-major m x k by one shared B is one (batch * m) x k
  // GEMM: one larger product keeps more of the GPU busy than a batch
  // (while cuBLAS's int dimensions hold it).
  if (sharedB && !transposeA && batch > 1 && batch * m <= INT32_MAX) {
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

namespace {

/// What a cuBLASLt plan depends on: the GEMM, the epilogue, the element
/// type and the alignment of each matrix (the arena aligns to 64 bytes, less
/// than the 256 cuBLASLt assumes unless told).
struct LinearKey {
  int64_t rows, n, k;
  bool transposeW, gelu, isBf16;
  uint32_t alignW, alignX, alignY;
  bool operator<(const LinearKey &o) const {
    return std::tie(rows, n, k, transposeW, gelu, isBf16, alignW, alignX, alignY) <
           std::tie(o.rows, o.n, o.k, o.transposeW, o.gelu, o.isBf16, o.alignW, o.alignX,
                    o.alignY);
  }
};

struct LinearPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// False when cuBLASLt has no algorithm for it: matmul, then the bias and
  /// GELU kernels.
  bool usable = false;
};

std::map<LinearKey, LinearPlan> &linearPlans() {
  static std::map<LinearKey, LinearPlan> plans;
  return plans;
}

/// The largest power of two up to 256 that divides `p`'s address.
uint32_t alignmentOf(const void *p) {
  auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && address % align)
    align /= 2;
  return align;
}

/// Row-major y[rows, n] = x[rows, k] w is column-major y^T (n x rows) =
/// op(w^T) (n x k) x^T (k x rows): w is cuBLASLt's A, x its B.
LinearPlan makePlan(const LinearKey &key) {
  LinearPlan plan;
  cudaDataType_t type = key.isBf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasOperation_t opW = key.transposeW ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = key.gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  const char *what = "linear (cuBLASLt plan)";
  check(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opW, sizeof opW),
        what);
  check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                       sizeof epilogue),
        what);
  // Stored w: [k, n] row-major is n x k column-major (ld n); [n, k] is k x n (ld k).
  uint64_t wRows = key.transposeW ? key.k : key.n, wCols = key.transposeW ? key.n : key.k;
  check(cublasLtMatrixLayoutCreate(&plan.w, type, wRows, wCols, static_cast<int64_t>(wRows)),
        what);
  check(cublasLtMatrixLayoutCreate(&plan.x, type, key.k, key.rows, key.k), what);
  check(cublasLtMatrixLayoutCreate(&plan.y, type, key.n, key.rows, key.n), what);
  cublasLtMatmulPreference_t preference;
  check(cublasLtMatmulPreferenceCreate(&preference), what);
  size_t workspaceBytes = kLtWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference,
                                             CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspaceBytes, sizeof workspaceBytes),
        what);
  for (auto [attribute, align] :
       {std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignW),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignX),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignY),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignY)})
    check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof align),
          what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      context().lt, plan.op, plan.w, plan.x, plan.y, plan.y, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  plan.usable = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan.usable)
    plan.algo = result.algo;
  return plan;
}

} // namespace

void releaseLinearPlans() {
  for (auto &[key, plan] : linearPlans()) {
    cublasLtMatrixLayoutDestroy(plan.y);
    cublasLtMatrixLayoutDestroy(plan.x);
    cublasLtMatrixLayoutDestroy(plan.w);
    cublasLtMatmulDescDestroy(plan.op);
  }
  linearPlans().clear();
}

template <typename T>
void linearOp(const T *x, const Shape &xShape, const T *w, const T *bias, T *y,
              const Shape &yShape, bool transposeW, bool gelu) {
  int64_t n = yShape.back(), k = xShape.back(), rows = n ? elementsOf(yShape) / n : 0;
  if (rows == 0 || n == 0)
    return;
  LinearKey key{rows, n, k, transposeW, gelu, std::is_same_v<T, bf16>,
                alignmentOf(w), alignmentOf(x), alignmentOf(y)};
  // cuBLASLt reads the bias in 16-byte vectors (the arena aligns to 64).
  bool fusable = k > 0 && context().epilogues && alignmentOf(bias) >= 16;
  auto found = linearPlans().find(key);
  if (fusable && found == linearPlans().end())
    found = linearPlans().emplace(key, makePlan(key)).first;
  if (fusable && found->second.usable) {
    LinearPlan &plan = found->second;
    float one = 1.0f, zero = 0.0f;
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias),
          "linear");
    check(cublasLtMatmul(context().lt, plan.op, &one, w, plan.w, x, plan.x, &zero, y, plan.y, y,
                         plan.y, &plan.algo, context().ltWorkspace, kLtWorkspaceBytes, stream()),
          "linear");
    if (context().syncEachOp)
      check(cudaStreamSynchronize(stream()), "linear");
    return;
  }
  // No epilogue for it (or none wanted, or nothing to contract): the
  // product, then the bias and the GELU in place, as the unfused ops
  // compute them (in bf16, rounding after each where the fused GEMM and the
  // CPU round once).
  Shape wShape = transposeW ? Shape{n, k} : Shape{k, n};
  matmulOp(x, xShape, w, wShape, y, yShape, false, transposeW);
  cuda::binary(BinaryKind::Add, y, yShape, bias, Shape{n}, y, yShape);
  if (gelu)
    cuda::unary(UnaryKind::Gelu, y, y, rows * n);
}

template void matmulOp(const float *, const Shape &, const float *, const Shape &, float *,
                       const Shape &, bool, bool);
template void matmulOp(const bf16 *, const Shape &, const bf16 *, const Shape &, bf16 *,
                       const Shape &, bool, bool);
template void linearOp(const float *, const Shape &, const float *, const float *, float *,
                       const Shape &, bool, bool);
template void linearOp(const bf16 *, const Shape &, const bf16 *, const bf16 *, bf16 *,
                       const Shape &, bool, bool);

} // namespace sbprt::cuda
