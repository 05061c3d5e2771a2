// The CUDA emulator's cuBLAS and cuBLASLt: GEMMs on the host by the
// libraries' documented definitions (column-major matrices, leading
// dimensions, op(A) op(B), beta = 0 leaving C unread, epilogues applied to
// the f32 result before it is rounded), with the argument checks that make
// the real libraries refuse a call, and checks that every matrix lies in
// device memory and is as aligned as the heuristic was told.
#include <cublasLt.h>

#include "runtime/Alignment.h"
#include "runtime/BFloat16.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using sbprt::bf16;

struct cublasContext {
  cudaStream_t stream = nullptr;
};
struct cublasLtContext {};

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  /// The bias, or the bias gradient the epilogue writes.
  const void *bias = nullptr;
  /// The GELU's input: written by GELU_AUX(_BIAS), read by DGELU(_BGRAD);
  /// laid out as D, rows auxLd apart.
  const void *aux = nullptr;
  int64_t auxLd = 0;
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D
};

namespace {

size_t elementBytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

float read(const void *p, cudaDataType_t type, int64_t i) {
  if (type == CUDA_R_16BF)
    return static_cast<float>(static_cast<const bf16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

void write(void *p, cudaDataType_t type, int64_t i, float value) {
  if (type == CUDA_R_16BF)
    static_cast<bf16 *>(p)[i] = bf16(value);
  else
    static_cast<float *>(p)[i] = value;
}

/// A column-major rows x cols matrix with leading dimension ld (>= rows).
struct Matrix {
  const void *data;
  cudaDataType_t type;
  int64_t rows, cols, ld;
  /// Element (i, j) of op(this).
  float at(bool transposed, int64_t i, int64_t j) const {
    return transposed ? read(data, type, j + i * ld) : read(data, type, i + j * ld);
  }
  /// Bytes from its first element to past its last.
  size_t extent() const {
    return rows == 0 || cols == 0 ? 0 : ((cols - 1) * ld + rows) * elementBytes(type);
  }
};

bool inDevice(const void *p, size_t bytes, const char *call, const char *what) {
  if (bytes == 0 || sbpc_emu::isDevice(p, bytes))
    return true;
  sbpc_emu::fault(std::string(call) + ": " + what + " is not in device memory (" +
                      std::to_string(bytes) + " bytes)",
                  cudaErrorIllegalAddress);
  return false;
}

/// The tanh form of GELU, cuBLASLt's epilogue, and its derivative.
constexpr float kScale = 0.7978845608f, kCubic = 0.044715f;
float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kScale * (x + kCubic * x * x * x))); }
float geluDerivative(float x) {
  double t = std::tanh(kScale * (x + kCubic * x * x * x));
  double inner = kScale * (1.0 + 3.0 * kCubic * static_cast<double>(x) * x);
  return static_cast<float>(0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner);
}

/// What an epilogue adds to the product, and where (cuBLASLt's flags).
struct Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr, *aux = nullptr;
  int64_t auxLd = 0;
  bool addsBias() const { return kind & CUBLASLT_EPILOGUE_BIAS; }
  bool gelu() const {
    return kind == CUBLASLT_EPILOGUE_GELU || kind == CUBLASLT_EPILOGUE_GELU_BIAS ||
           kind == CUBLASLT_EPILOGUE_GELU_AUX || kind == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  bool writesAux() const {
    return kind == CUBLASLT_EPILOGUE_GELU_AUX || kind == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  }
  bool geluGrad() const {
    return kind == CUBLASLT_EPILOGUE_DGELU || kind == CUBLASLT_EPILOGUE_DGELU_BGRAD;
  }
  bool readsAux() const { return geluGrad(); }
  /// The bias gradient it writes: the sums of D's rows (DGELU_BGRAD), of
  /// op(A)'s rows or of op(B)'s columns over the contraction (BGRADA,
  /// BGRADB).
  bool biasGrad() const {
    return kind == CUBLASLT_EPILOGUE_DGELU_BGRAD || kind == CUBLASLT_EPILOGUE_BGRADA ||
           kind == CUBLASLT_EPILOGUE_BGRADB;
  }
};

/// D (m x n) = alpha op(A) op(B) + beta C, then the epilogue: what every
/// GEMM here computes, accumulating in double (and the bias gradients
/// too, of the values before they are rounded to D's type).
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const Matrix &a,
          const Matrix &b, float beta, const Matrix &c, void *d, cudaDataType_t dType, int64_t ldd,
          const Epilogue &epilogue = {}) {
  std::vector<double> grads(epilogue.kind == CUBLASLT_EPILOGUE_BGRADB ? n : m, 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        float ap = a.at(transA, i, p), bp = b.at(transB, p, j);
        sum += static_cast<double>(ap) * bp;
        if (epilogue.kind == CUBLASLT_EPILOGUE_BGRADA && j == 0)
          grads[i] += ap;
        if (epilogue.kind == CUBLASLT_EPILOGUE_BGRADB && i == 0)
          grads[j] += bp;
      }
      float value = static_cast<float>(alpha * sum);
      if (beta != 0.0f) // beta = 0: C is not read (it may hold NaN)
        value += beta * c.at(false, i, j);
      if (epilogue.addsBias())
        value += read(epilogue.bias, dType, i);
      if (epilogue.writesAux())
        write(const_cast<void *>(epilogue.aux), dType, i + j * epilogue.auxLd, value);
      if (epilogue.gelu())
        value = gelu(value);
      if (epilogue.geluGrad()) {
        value *= geluDerivative(read(epilogue.aux, dType, i + j * epilogue.auxLd));
        if (epilogue.kind == CUBLASLT_EPILOGUE_DGELU_BGRAD)
          grads[i] += value;
      }
      write(d, dType, i + j * ldd, value);
    }
  if (epilogue.biasGrad())
    for (size_t i = 0; i < grads.size(); ++i)
      write(const_cast<void *>(epilogue.bias), dType, static_cast<int64_t>(i),
            static_cast<float>(grads[i]));
}

/// cublas<t>gemmStridedBatched for both element types: A and B of `type`,
/// C of `cType`.
cublasStatus_t stridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, float alpha,
                              const void *A, int lda, long long strideA, const void *B, int ldb,
                              long long strideB, float beta, void *C, int ldc, long long strideC,
                              int batchCount, cudaDataType_t type, cudaDataType_t cType) {
  const char *call = "cublasGemmStridedBatched";
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batchCount < 0 || lda < std::max(1, ta ? k : m) ||
      ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int batch = 0; batch < batchCount; ++batch) {
    size_t size = elementBytes(type);
    Matrix a{static_cast<const char *>(A) + batch * strideA * size, type, ta ? k : m, ta ? m : k,
             lda};
    Matrix b{static_cast<const char *>(B) + batch * strideB * size, type, tb ? n : k, tb ? k : n,
             ldb};
    Matrix c{static_cast<char *>(C) + batch * strideC * elementBytes(cType), cType, m, n, ldc};
    if (!inDevice(a.data, k ? a.extent() : 0, call, "A") ||
        !inDevice(b.data, k ? b.extent() : 0, call, "B") ||
        !inDevice(c.data, c.extent(), call, "C"))
      return CUBLAS_STATUS_EXECUTION_FAILED;
    gemm(ta, tb, m, n, k, alpha, a, b, beta, c, const_cast<void *>(c.data), cType, ldc);
  }
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount) {
  return stridedBatched(handle, transa, transb, m, n, k, *alpha, A, lda, strideA, B, ldb, strideB,
                        *beta, C, ldc, strideC, batchCount, CUDA_R_32F, CUDA_R_32F);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t) {
  // CUBLAS_COMPUTE_32F: alpha and beta are floats; C of A's type, or f32
  // under bf16 A and B (cuBLAS's mixed-precision case).
  if (computeType != CUBLAS_COMPUTE_32F || Atype != Btype ||
      !(Ctype == Atype || (Atype == CUDA_R_16BF && Ctype == CUDA_R_32F)))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return stridedBatched(handle, transa, transb, m, n, k, *static_cast<const float *>(alpha), A,
                        lda, strideA, B, ldb, strideB, *static_cast<const float *>(beta), C, ldc,
                        strideC, batchCount, Atype, Ctype);
}

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

namespace {

/// The checks the heuristic and the matmul share: operand shapes that
/// agree, one element type, an epilogue emulated.
cublasStatus_t checkMatmul(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                           cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                           cublasLtMatrixLayout_t d) {
  if (!desc || !a || !b || !c || !d)
    return CUBLAS_STATUS_INVALID_VALUE;
  for (cublasLtMatrixLayout_t layout : {a, b, c, d})
    if (layout->ld < static_cast<int64_t>(std::max<uint64_t>(1, layout->rows)))
      return CUBLAS_STATUS_INVALID_VALUE;
  bool ta = desc->transA != CUBLAS_OP_N, tb = desc->transB != CUBLAS_OP_N;
  uint64_t m = ta ? a->cols : a->rows, k = ta ? a->rows : a->cols;
  uint64_t bk = tb ? b->cols : b->rows, n = tb ? b->rows : b->cols;
  if (k != bk || c->rows != m || c->cols != n || d->rows != m || d->cols != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (a->type != b->type || b->type != c->type || c->type != d->type ||
      desc->compute != CUBLAS_COMPUTE_32F || desc->scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  switch (desc->epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT:
  case CUBLASLT_EPILOGUE_BIAS:
  case CUBLASLT_EPILOGUE_GELU:
  case CUBLASLT_EPILOGUE_GELU_BIAS:
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_EPILOGUE_BGRADA: // the operand summed is read as it is stored
    return ta ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_EPILOGUE_BGRADB:
    return tb ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
  case CUBLASLT_EPILOGUE_GELU_AUX:
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
  case CUBLASLT_EPILOGUE_DGELU:
  case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    // The aux's ld: a multiple of 8, no less than D's rows.
    if (desc->auxLd % 8 || desc->auxLd < static_cast<int64_t>(d->rows))
      return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

template <typename T>
cublasStatus_t setValue(T &field, const void *buffer, size_t bytes) {
  if (!buffer || bytes != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buffer, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  *desc = new cublasLtMatmulDescOpaque_t{computeType, scaleType};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attribute,
                                              const void *buffer, size_t bytes) {
  if (!desc)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setValue(desc->transA, buffer, bytes);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setValue(desc->transB, buffer, bytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setValue(desc->epilogue, buffer, bytes);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setValue(desc->bias, buffer, bytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return setValue(desc->aux, buffer, bytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return setValue(desc->auxLd, buffer, bytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (type != CUDA_R_32F && type != CUDA_R_16BF)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete preference;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
    const void *buffer, size_t bytes) {
  if (!preference)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attribute) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setValue(preference->workspace, buffer, bytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setValue(preference->align[attribute - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES],
                    buffer, bytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

/// One algorithm for any GEMM the checks accept; it remembers the
/// alignments it was chosen for, which the matmul's operands must have.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t preference, int requested, cublasLtMatmulHeuristicResult_t results[],
    int *found) {
  *found = 0;
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!preference || requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (cublasStatus_t status = checkMatmul(desc, a, b, c, d); status != CUBLAS_STATUS_SUCCESS)
    return status;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  for (int i = 0; i < 4; ++i)
    results[0].algo.data[i] = preference->align[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t a,
                              const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t d, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceBytes, cudaStream_t) {
  const char *call = "cublasLtMatmul";
  if (!handle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (cublasStatus_t status = checkMatmul(desc, a, b, c, d); status != CUBLAS_STATUS_SUCCESS)
    return status;
  // SBPC_CUDA_EMU_LT_REFUSE=EPILOGUE: the call refuses that epilogue, which
  // the heuristic offered (as a cuBLASLt whose heuristic and kernels
  // disagree would), so that the caller's fallback runs.
  static const long refused = [] {
    const char *value = std::getenv("SBPC_CUDA_EMU_LT_REFUSE");
    return value ? std::strtol(value, nullptr, 10) : 0L;
  }();
  if (refused && refused == desc->epilogue)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  Epilogue epilogue{desc->epilogue, desc->bias, desc->aux, desc->auxLd};
  bool hasBias = epilogue.addsBias() || epilogue.biasGrad();
  bool hasAux = epilogue.writesAux() || epilogue.readsAux();
  if (!algo || (hasBias && !desc->bias) || (hasAux && !desc->aux))
    return CUBLAS_STATUS_INVALID_VALUE;
  const void *operands[] = {A, B, C, D};
  for (int i = 0; i < 4; ++i)
    if (sbprt::alignmentOf(operands[i]) < algo->data[i]) {
      std::fprintf(stderr,
                   "cuda-emu: cublasLtMatmul: operand %c at %u-byte alignment, but its "
                   "algorithm was chosen for %u\n",
                   "ABCD"[i], sbprt::alignmentOf(operands[i]), static_cast<unsigned>(algo->data[i]));
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  bool ta = desc->transA != CUBLAS_OP_N, tb = desc->transB != CUBLAS_OP_N;
  int64_t m = d->rows, n = d->cols, k = ta ? a->rows : a->cols;
  Matrix ma{A, a->type, static_cast<int64_t>(a->rows), static_cast<int64_t>(a->cols), a->ld};
  Matrix mb{B, b->type, static_cast<int64_t>(b->rows), static_cast<int64_t>(b->cols), b->ld};
  Matrix mc{C, c->type, m, n, c->ld};
  Matrix md{D, d->type, m, n, d->ld};
  float scaleA = *static_cast<const float *>(alpha), scaleC = *static_cast<const float *>(beta);
  if (!inDevice(A, k ? ma.extent() : 0, call, "A") || !inDevice(B, k ? mb.extent() : 0, call, "B") ||
      !inDevice(D, md.extent(), call, "D") ||
      (scaleC != 0.0f && !inDevice(C, mc.extent(), call, "C")) ||
      (hasBias &&
       !inDevice(desc->bias,
                 (desc->epilogue == CUBLASLT_EPILOGUE_BGRADB ? n : m) * elementBytes(d->type), call,
                 "the bias")) ||
      (hasAux && !inDevice(desc->aux, Matrix{desc->aux, d->type, m, n, desc->auxLd}.extent(), call,
                           "the aux")) ||
      (workspaceBytes && !inDevice(workspace, workspaceBytes, call, "the workspace")))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  gemm(ta, tb, m, n, k, scaleA, ma, mb, scaleC, mc, D, d->type, d->ld, epilogue);
  return CUBLAS_STATUS_SUCCESS;
}
