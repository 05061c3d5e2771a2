// graph.matmul on cuBLAS: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so B goes first; batches are strided, a shared B
// has stride 0 (or, under an untransposed A, the batch is folded into A's
// rows). Full f32 (the handle is in pedantic math mode: no TF32); bf16
// operands and result with f32 accumulation (cublasGemmStridedBatchedEx,
// CUBLAS_COMPUTE_32F).
//
// A bf16 GEMM whose A or C rows are not 16-byte aligned (the logits of an
// odd vocabulary, [T, 50257], and their gradients) would get cuBLAS's
// narrow-load kernels, several times slower than its tensor-core ones; it
// goes in chunks of C's rows through a scratch with padded rows instead
// (paddedGemm below), or, where only C's rows are misaligned, computes C^T
// in chunks and transposes them into C (transposedGemm).
//
// exec.causal_matmul (attention's products under a causal mask) is the
// same GEMM per block of C's rows, each only as far as the diagonal
// (runtime/CausalGemm.h).
//
// exec.linear, exec.matmul_gelu_grad and exec.matmul_bias_grad on
// cuBLASLt: the same GEMM with the bias (and GELU, keeping its input for
// the backward), the GELU's gradient (and the bias gradient), or the bias
// gradient in the epilogue, one plan (descriptors and the heuristic's
// algorithm) per shape, epilogue and alignment, kept for the run; each
// falls back to the GEMM and our kernels where cuBLASLt has no algorithm.
#include "runtime/Alignment.h"
#include "runtime/cpu/Ops.h"
#include "runtime/cuda/Context.h"
#include "runtime/cuda/Ops.h"

#include <cstdio>
#include <map>
#include <tuple>
#include <type_traits>

namespace sbprt::cuda {
namespace {

/// Whether rows `ld` elements of `bytes` apart from `p` all start on 16 bytes.
bool rowsAligned(const void *p, int64_t ld, size_t bytes) {
  return alignmentOf(p) >= 16 && (ld * static_cast<int64_t>(bytes)) % 16 == 0;
}

/// `rows` rows of `cols` elements, `srcLd` apart in `src`, to `dstLd`
/// apart in `dst`, zeros after them up to dstLd (a padded row is all
/// written: the GEMM's wide loads may read its tail): one thread per
/// element, consecutive threads along a row.
template <typename T>
__global__ void copyMatrixKernel(T *dst, int64_t dstLd, const T *src, int64_t srcLd,
                                 int64_t rows, int64_t cols) {
  for (int64_t row = blockIdx.y; row < rows; row += gridDim.y)
    for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < dstLd;
         col += static_cast<int64_t>(gridDim.x) * blockDim.x)
      dst[row * dstLd + col] = col < cols ? src[row * srcLd + col] : T(0.0f);
}

template <typename T>
void copyMatrix(T *dst, int64_t dstLd, const T *src, int64_t srcLd, int64_t rows, int64_t cols) {
  dim3 grid(blocksFor(dstLd) < 1024 ? blocksFor(dstLd) : 1024,
            static_cast<unsigned>(rows < 65535 ? rows : 65535));
  copyMatrixKernel<<<grid, kThreads, 0, stream()>>>(dst, dstLd, src, srcLd, rows, cols);
  launched("matmul (padding)");
}

int64_t roundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

constexpr int kTile = 32, kTileRows = 8;

/// dst[j][i] = src[i][j] for src's `rows` x `cols` (rows `srcLd` apart)
/// into dst's rows `dstLd` apart: through a shared tile, so that both the
/// reads and the writes go along rows. Blocks of kTile x kTileRows threads.
template <typename T>
__global__ void transposeKernel(T *dst, int64_t dstLd, const T *src, int64_t srcLd,
                                int64_t rows, int64_t cols) {
  __shared__ T tile[kTile][kTile + 1];
  int64_t tilesDown = (rows + kTile - 1) / kTile, tilesAcross = (cols + kTile - 1) / kTile;
  for (int64_t down = blockIdx.y; down < tilesDown; down += gridDim.y)
    for (int64_t across = blockIdx.x; across < tilesAcross; across += gridDim.x) {
      int64_t row0 = down * kTile, col0 = across * kTile;
      for (int i = threadIdx.y; i < kTile; i += kTileRows) {
        int64_t row = row0 + i, col = col0 + threadIdx.x;
        if (row < rows && col < cols)
          tile[i][threadIdx.x] = src[row * srcLd + col];
      }
      __syncthreads();
      for (int i = threadIdx.y; i < kTile; i += kTileRows) {
        int64_t col = col0 + i, row = row0 + threadIdx.x;
        if (row < rows && col < cols)
          dst[col * dstLd + row] = tile[threadIdx.x][i];
      }
      __syncthreads();
    }
}

template <typename T>
void transpose(T *dst, int64_t dstLd, const T *src, int64_t srcLd, int64_t rows, int64_t cols) {
  int64_t down = (rows + kTile - 1) / kTile, across = (cols + kTile - 1) / kTile;
  dim3 grid(static_cast<unsigned>(across < 4096 ? across : 4096),
            static_cast<unsigned>(down < 65535 ? down : 65535));
  transposeKernel<<<grid, dim3(kTile, kTileRows), 0, stream()>>>(dst, dstLd, src, srcLd, rows,
                                                                 cols);
  launched("matmul (transposing)");
}

/// Row-major c = op(a) op(b) for `batch` entries `strideA`, `strideB` and
/// `strideC` elements apart, rows lda, ldb and ldc apart: column-major
/// c^T = op(b)^T op(a)^T, so b goes first.
template <typename T>
void stridedGemm(const T *a, int64_t lda, int64_t strideA, const T *b, int64_t ldb,
                 int64_t strideB, T *c, int64_t ldc, int64_t strideC, int64_t batch, int64_t m,
                 int64_t n, int64_t k, bool transposeA, bool transposeB) {
  float one = 1.0f, zero = 0.0f;
  cublasOperation_t opB = transposeB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opA = transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    check(cublasSgemmStridedBatched(context().blas, opB, opA, static_cast<int>(n),
                                    static_cast<int>(m), static_cast<int>(k), &one, b,
                                    static_cast<int>(ldb), strideB, a, static_cast<int>(lda),
                                    strideA, &zero, c, static_cast<int>(ldc), strideC,
                                    static_cast<int>(batch)),
          "matmul");
  else
    check(cublasGemmStridedBatchedEx(context().blas, opB, opA, static_cast<int>(n),
                                     static_cast<int>(m), static_cast<int>(k), &one, b,
                                     CUDA_R_16BF, static_cast<int>(ldb), strideB, a, CUDA_R_16BF,
                                     static_cast<int>(lda), strideA, &zero, c, CUDA_R_16BF,
                                     static_cast<int>(ldc), strideC, static_cast<int>(batch),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "matmul");
}

/// Row-major bf16 C[m, n] = A[m, k] B[k, n] with A's rows misaligned and
/// so long that chunks of C's rows would be too small to fill the GPU (the
/// logits' gradient times the embedding: k = 50,257): in chunks of k
/// instead, each chunk of A's columns copied to the scratch with padded
/// rows, the products summed in f32 in the scratch and rounded to bf16
/// once. Half the scratch holds the sums (of a chunk of C's rows), half
/// A's chunk. False, having done nothing, where they would not fill the
/// GPU either.
bool splitKGemm(const bf16 *a, const bf16 *b, bf16 *c, int64_t m, int64_t n, int64_t k,
                int64_t budget) {
  constexpr int64_t kRowAlign = 16 / sizeof(bf16);
  int64_t rowsPerChunk = std::min(m, budget / 2 / (n * static_cast<int64_t>(sizeof(float))));
  if (rowsPerChunk < m)
    rowsPerChunk = rowsPerChunk / kRowAlign * kRowAlign;
  int64_t sumBytes = roundUp(rowsPerChunk * n * static_cast<int64_t>(sizeof(float)), 256);
  int64_t cols = rowsPerChunk > 0 ? (budget - sumBytes) / (rowsPerChunk * 2) : 0;
  cols = std::min(cols / kRowAlign * kRowAlign, roundUp(k, kRowAlign));
  if (rowsPerChunk < 1 || cols < kRowAlign || rowsPerChunk * n < budget / 32)
    return false;
  auto *sum = static_cast<float *>(context().ltWorkspace);
  auto *aChunk = reinterpret_cast<bf16 *>(static_cast<char *>(context().ltWorkspace) + sumBytes);
  float one = 1.0f, zero = 0.0f;
  for (int64_t first = 0; first < m; first += rowsPerChunk) {
    int64_t rows = std::min(rowsPerChunk, m - first);
    for (int64_t from = 0; from < k; from += cols) {
      int64_t width = std::min(cols, k - from), ld = roundUp(width, kRowAlign);
      copyMatrix(aChunk, ld, a + first * k + from, k, rows, width);
      check(cublasGemmStridedBatchedEx(context().blas, CUBLAS_OP_N, CUBLAS_OP_N,
                                       static_cast<int>(n), static_cast<int>(rows),
                                       static_cast<int>(width), &one, b + from * n, CUDA_R_16BF,
                                       static_cast<int>(n), 0, aChunk, CUDA_R_16BF,
                                       static_cast<int>(ld), 0, from ? &one : &zero, sum,
                                       CUDA_R_32F, static_cast<int>(n), 0, 1, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            "matmul");
    }
    convert(sum, c + first * n, rows * n);
  }
  return true;
}

/// Row-major bf16 C[m, n] = op(A) B^T with A's and B's rows 16-byte aligned
/// and C's not (the logits: x [T, 768] times the embedding [50,257, 768]
/// transposed). cuBLAS's kernels for an odd row length are slow even into
/// padded rows (60 TFLOP/s on an H200, where aligned ones reach 500), so
/// this computes C^T = B op(A)^T instead, whose rows are m long, in chunks
/// of its rows (B's) through the scratch, and transposes each into its
/// columns of C. Only for a transposed B (stored [n, k]): an untransposed
/// one has rows n long, misaligned with C's unless C's start is what is
/// misaligned. False, having done nothing, where B is not transposed or not
/// one row of C^T fits in the scratch.
bool transposedGemm(const bf16 *a, const bf16 *b, bf16 *c, int64_t m, int64_t n, int64_t k,
                    bool transposeA, bool transposeB, int64_t budget) {
  constexpr int64_t kRowAlign = 16 / sizeof(bf16);
  int64_t ld = roundUp(m, kRowAlign);
  int64_t chunk = std::min(budget / (ld * static_cast<int64_t>(sizeof(bf16))), n);
  if (!transposeB || chunk < 1)
    return false;
  if (chunk >= 64 && chunk < n)
    chunk = chunk / 64 * 64;
  auto *scratch = static_cast<bf16 *>(context().ltWorkspace);
  for (int64_t first = 0; first < n; first += chunk) {
    int64_t rows = std::min(chunk, n - first);
    if (context().initcheck)
      check(cudaMemsetAsync(scratch, 0, rows * ld * sizeof(bf16), stream()),
            "matmul (zeroing the scratch for initcheck)");
    // Row-major C^T's rows [first, first + rows) = B's rows times op(A)^T:
    // A stored [m, k] read transposed, or stored [k, m] read as it is.
    stridedGemm(b + first * k, k, 0, a, transposeA ? m : k, 0, scratch, ld, 0, 1, rows, m, k,
                false, !transposeA);
    transpose(c + first, n, scratch, ld, rows, m);
  }
  return true;
}

/// Row-major bf16 C[m, n] = op(A) op(B) (one product) when B's rows are
/// 16-byte aligned and A's or C's are not: in chunks of C's rows, each
/// through the cuBLASLt workspace (free between exec.linear's calls on the
/// same stream), A's chunk copied there with rows padded to 16 bytes, C's
/// computed there padded and copied out. False, having done nothing, where
/// that does not apply or SBPRT_CUDA_GEMM_PAD=0.
bool paddedGemm(const bf16 *a, const bf16 *b, bf16 *c, int64_t m, int64_t n, int64_t k,
                bool transposeA, bool transposeB) {
  constexpr int64_t kElement = sizeof(bf16), kRowAlign = 16 / sizeof(bf16);
  int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
  bool padA = !rowsAligned(a, lda, kElement), padC = !rowsAligned(c, n, kElement);
  int64_t budget = static_cast<int64_t>(context().gemmPadBytes);
  if (!(padA || padC) || !rowsAligned(b, ldb, kElement) || budget <= 0)
    return false;
  if (padC && !padA && transposedGemm(a, b, c, m, n, k, transposeA, transposeB, budget))
    return true;
  // Scratch bytes per row of C: A's (k elements, padded unless A is
  // transposed, whose chunk is k rows of the chunk's width) and C's.
  int64_t padK = roundUp(k, kRowAlign), padN = roundUp(n, kRowAlign);
  int64_t perRow = (padA ? (transposeA ? k : padK) : 0) * kElement + (padC ? padN * kElement : 0);
  int64_t chunk = (budget - 256) / perRow;
  chunk = chunk >= 64 ? chunk / 64 * 64 : chunk / kRowAlign * kRowAlign;
  // Rows too long for the scratch, or chunks whose products are too small
  // to fill the GPU (fewer elements than a 32nd of the scratch's bytes,
  // 2^20 by default), as the gradient by a 50,257-row embedding would get
  // (320 rows of 768 per chunk): in chunks of k where only A is padded,
  // else as they are.
  if (chunk < kRowAlign || (chunk < m && chunk * n < budget / 32)) {
    bool splitK = padA && !padC && !transposeA && !transposeB;
    return splitK && splitKGemm(a, b, c, m, n, k, budget);
  }
  // A multiple of kRowAlign: a chunk of m, rounded up, still fits.
  chunk = std::min(chunk, m);
  auto *scratchA = static_cast<bf16 *>(context().ltWorkspace);
  int64_t aElements = transposeA ? k * roundUp(chunk, kRowAlign) : chunk * padK;
  int64_t aBytes = padA ? roundUp(aElements * kElement, 256) : 0;
  auto *scratchC = reinterpret_cast<bf16 *>(static_cast<char *>(context().ltWorkspace) + aBytes);
  for (int64_t first = 0; first < m; first += chunk) {
    int64_t rows = std::min(chunk, m - first);
    // A's rows of this chunk: stored [rows, k], or columns of stored [k, m].
    const bf16 *aChunk = transposeA ? a + first : a + first * k;
    int64_t aLd = lda;
    if (padA && transposeA) {
      aLd = roundUp(rows, kRowAlign);
      copyMatrix(scratchA, aLd, aChunk, m, k, rows);
      aChunk = scratchA;
    } else if (padA) {
      aLd = padK;
      copyMatrix(scratchA, aLd, aChunk, k, rows, k);
      aChunk = scratchA;
    }
    bf16 *cChunk = padC ? scratchC : c + first * n;
    int64_t cLd = padC ? padN : n;
    stridedGemm(aChunk, aLd, 0, b, ldb, 0, cChunk, cLd, 0, 1, rows, n, k, transposeA,
                transposeB);
    if (padC)
      copyMatrix(c + first * n, n, scratchC, cLd, rows, n);
  }
  return true;
}

} // namespace

template <typename T>
void matmulOp(const T *a, const Shape &aShape, const T *b, const Shape &bShape, T *c,
              const Shape &cShape, bool transposeA, bool transposeB, Causal causal) {
  auto [batch, m, n, k, sharedB] = cpu::matmulDims(aShape, bShape, cShape, transposeA);
  if (batch == 0 || m == 0 || n == 0)
    return;
  // Row-major A is m x k (k x m when transposed), B is k x n (n x k).
  int64_t lda = transposeA ? m : k, ldb = transposeB ? k : n;
  // exec.causal_matmul: a GEMM per block of 256 rows or more (up to 8, so
  // that each still fills the GPU), each only as far as the diagonal.
  if (causal != Causal::None && k > 0) {
    std::vector<GemmBlock> blocks =
        causalBlocks(causal, m, n, k, transposeA, causalBlockRows(m, 256, 8));
    if (blocks.size() > 1) {
      for (const GemmBlock &g : blocks)
        stridedGemm(a + g.aOffset(lda, transposeA), lda, m * k, b + g.bOffset(ldb, transposeB),
                    ldb, sharedB ? 0 : k * n, c + g.cOffset(n), n, m * n, batch, g.rows, g.cols,
                    g.k, transposeA, transposeB);
      if (context().syncEachOp)
        check(cudaStreamSynchronize(context().stream), "matmul");
      return;
    }
  }
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
  if constexpr (std::is_same_v<T, bf16>)
    if (batch == 1 && paddedGemm(a, b, c, m, n, k, transposeA, transposeB)) {
      if (context().syncEachOp)
        check(cudaStreamSynchronize(context().stream), "matmul");
      return;
    }
  stridedGemm(a, lda, m * k, b, ldb, sharedB ? 0 : k * n, c, n, m * n, batch, m, n, k,
              transposeA, transposeB);
  if (context().syncEachOp)
    check(cudaStreamSynchronize(context().stream), "matmul");
}

namespace {

/// What a cuBLASLt plan depends on: column-major D (m x n) = op(A) op(B),
/// the epilogue, the element type and the alignment of each matrix and
/// vector (the arena aligns to 64 bytes, less than the 256 cuBLASLt assumes
/// unless told; the heuristic reads the bias's and aux's pointers for
/// theirs).
struct LtKey {
  int64_t m, n, k;
  bool transA, transB;
  cublasLtEpilogue_t epilogue;
  bool isBf16;
  /// alignC: the residual's (cuBLASLt's C), else D's.
  uint32_t alignA, alignB, alignC, alignD, alignBias, alignAux;
  auto tied() const {
    return std::tie(m, n, k, transA, transB, epilogue, isBf16, alignA, alignB, alignC, alignD,
                    alignBias, alignAux);
  }
  bool operator<(const LtKey &o) const { return tied() < o.tied(); }
};

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// False when cuBLASLt has no algorithm for it: the caller's kernels.
  bool usable = false;
  /// Whether a call with it has succeeded.
  bool called = false;
};

std::map<LtKey, LtPlan> &ltPlans() {
  static std::map<LtKey, LtPlan> plans;
  return plans;
}

bool hasAux(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DGELU ||
         epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

/// The descriptors and the heuristic's algorithm; `bias` and `aux` are the
/// call's pointers (the heuristic reads their alignment).
LtPlan makePlan(const LtKey &key, const void *bias, const void *aux) {
  LtPlan plan;
  cudaDataType_t type = key.isBf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasOperation_t opA = key.transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                    opB = key.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const char *what = "GEMM with an epilogue (cuBLASLt plan)";
  check(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto &value) {
    check(cublasLtMatmulDescSetAttribute(plan.op, attribute, &value, sizeof value), what);
  };
  set(CUBLASLT_MATMUL_DESC_TRANSA, opA);
  set(CUBLASLT_MATMUL_DESC_TRANSB, opB);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, key.epilogue);
  if (bias)
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (hasAux(key.epilogue)) {
    // The aux matrix is laid out as D: m x n, ld m.
    int64_t auxLd = key.m;
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, auxLd);
  }
  auto layout = [&](cublasLtMatrixLayout_t &out, int64_t rows, int64_t cols) {
    check(cublasLtMatrixLayoutCreate(&out, type, rows, cols, rows), what);
  };
  layout(plan.a, key.transA ? key.k : key.m, key.transA ? key.m : key.k);
  layout(plan.b, key.transB ? key.n : key.k, key.transB ? key.k : key.n);
  layout(plan.d, key.m, key.n);
  cublasLtMatmulPreference_t preference;
  check(cublasLtMatmulPreferenceCreate(&preference), what);
  size_t workspaceBytes = kLtWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference,
                                             CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspaceBytes, sizeof workspaceBytes),
        what);
  for (auto [attribute, align] :
       {std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignA),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignB),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC),
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD)})
    check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &align, sizeof align),
          what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      context().lt, plan.op, plan.a, plan.b, plan.d, plan.d, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  plan.usable = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan.usable)
    plan.algo = result.algo;
  else // once per plan: whether the epilogues run is what a GPU run must tell
    std::fprintf(stderr,
                 "sbprt: warning: cuBLASLt has no algorithm for epilogue %d at %lld x %lld x "
                 "%lld (%s); the GEMM and kernels instead\n",
                 static_cast<int>(key.epilogue), static_cast<long long>(key.m),
                 static_cast<long long>(key.n), static_cast<long long>(key.k),
                 key.isBf16 ? "bf16" : "f32");
  return plan;
}

/// Column-major D (m x n) = op(A) op(B) (+ C, beta 1, where `c` is not
/// null) with `epilogue`: `bias` is its bias, or where it computes one, the
/// bias gradient it writes; `aux` the GELU's input it writes (GELU_AUX_BIAS)
/// or reads (DGELU), laid out as D. False, having done nothing, where the
/// epilogues are off (SBPRT_CUDA_EPILOGUES=0), there is nothing to contract,
/// a vector is less than 16-byte aligned (cuBLASLt reads them in 16-byte
/// vectors), the aux's ld is not a multiple of 8 elements (cuBLASLt's
/// rule), or cuBLASLt has no algorithm for it.
template <typename T>
bool ltMatmul(int64_t m, int64_t n, int64_t k, bool transA, bool transB,
              cublasLtEpilogue_t epilogue, const T *a, const T *b, const T *c, T *d,
              const void *bias, const void *aux, const char *what) {
  bool auxOk = !hasAux(epilogue) || (m % 8 == 0 && alignmentOf(aux) >= 16);
  if (k <= 0 || !context().epilogues || !auxOk || (bias && alignmentOf(bias) < 16))
    return false;
  LtKey key{m,
            n,
            k,
            transA,
            transB,
            epilogue,
            std::is_same_v<T, bf16>,
            alignmentOf(a),
            alignmentOf(b),
            alignmentOf(c ? static_cast<const void *>(c) : d),
            alignmentOf(d),
            bias ? alignmentOf(bias) : 256u,
            aux ? alignmentOf(aux) : 256u};
  auto found = ltPlans().find(key);
  if (found == ltPlans().end())
    found = ltPlans().emplace(key, makePlan(key, bias, aux)).first;
  LtPlan &plan = found->second;
  if (!plan.usable)
    return false;
  if (bias)
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias),
          what);
  if (hasAux(epilogue))
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                         sizeof aux),
          what);
  float one = 1.0f, zero = 0.0f;
  cublasStatus_t status = cublasLtMatmul(context().lt, plan.op, &one, a, plan.a, b, plan.b,
                                         c ? &one : &zero, c ? c : d, plan.d, d, plan.d,
                                         &plan.algo, context().ltWorkspace, kLtWorkspaceBytes,
                                         stream());
  // A plan's first call that cuBLASLt refuses (an epilogue its heuristic
  // offered but the call does not take: it checks before it launches) is
  // that GEMM's last: it says so once and falls back. Any later failure
  // ends the job.
  if (status != CUBLAS_STATUS_SUCCESS && !plan.called &&
      (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE)) {
    std::fprintf(stderr,
                 "sbprt: warning: %s: cublasLtMatmul refused epilogue %d for %lld x %lld x %lld "
                 "(%s); the GEMM and kernels instead\n",
                 what, static_cast<int>(epilogue), static_cast<long long>(m),
                 static_cast<long long>(n), static_cast<long long>(k),
                 cublasGetStatusString(status));
    plan.usable = false;
    return false;
  }
  check(status, what);
  plan.called = true;
  if (context().syncEachOp)
    check(cudaStreamSynchronize(stream()), what);
  return true;
}

/// Sums of the columns of row-major [rows, n] `values` into `out`: a
/// bias's gradient, where no epilogue computed it.
template <typename T> void columnSums(const T *values, int64_t rows, int64_t n, T *out) {
  cuda::reduce(ReduceKind::Sum, values, Shape{rows, n}, {0}, out);
}

} // namespace

void releaseLinearPlans() {
  for (auto &[key, plan] : ltPlans()) {
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatmulDescDestroy(plan.op);
  }
  ltPlans().clear();
}

// Row-major y[rows, n] = x[rows, k] op(w) is column-major y^T (n x rows) =
// op(w)^T x^T: w is cuBLASLt's A (stored [k, n], n x k column-major; or
// [n, k], k x n transposed), x its B; so for each GEMM below.

template <typename T>
void linearOp(const T *x, const Shape &xShape, const T *w, const T *bias, const T *residual, T *y,
              const Shape &yShape, bool transposeW, bool gelu, T *preactivation) {
  int64_t n = yShape.back(), k = xShape.back(), rows = n ? elementsOf(yShape) / n : 0;
  if (rows == 0 || n == 0)
    return;
  T *pre = gelu ? preactivation : nullptr;
  cublasLtEpilogue_t epilogue = !gelu ? CUBLASLT_EPILOGUE_BIAS
                                : pre ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                      : CUBLASLT_EPILOGUE_GELU_BIAS;
  if (ltMatmul(n, rows, k, transposeW, false, epilogue, w, x, residual, y, bias, pre, "linear"))
    return;
  // No epilogue for it (or none wanted, or nothing to contract): the
  // product, then the bias and the GELU, as the unfused ops compute them
  // (in bf16, rounding after each where the fused GEMM and the CPU round
  // once); the sum in the preactivation where it is kept.
  Shape wShape = transposeW ? Shape{n, k} : Shape{k, n};
  T *sum = pre ? pre : y;
  matmulOp(x, xShape, w, wShape, sum, yShape, false, transposeW);
  cuda::binary(BinaryKind::Add, sum, yShape, bias, Shape{n}, sum, yShape);
  if (residual)
    cuda::binary(BinaryKind::Add, y, yShape, residual, yShape, y, yShape);
  if (gelu)
    cuda::unary(UnaryKind::Gelu, sum, y, rows * n);
}

template <typename T>
void matmulGeluGradOp(const T *g, const Shape &gShape, const T *w, const T *pre, T *dx,
                      const Shape &dxShape, bool transposeW, T *biasGrad) {
  int64_t n = dxShape.back(), k = gShape.back(), rows = n ? elementsOf(dxShape) / n : 0;
  if (n == 0)
    return;
  if (rows == 0) { // no rows to sum: the bias gradient is zeros
    if (biasGrad)
      check(fillAsync(biasGrad, n, T(0.0f)), "matmul_gelu_grad");
    return;
  }
  cublasLtEpilogue_t epilogue = biasGrad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
  if (ltMatmul(n, rows, k, transposeW, false, epilogue, w, g, static_cast<const T *>(nullptr), dx,
               biasGrad, pre, "matmul_gelu_grad"))
    return;
  Shape wShape = transposeW ? Shape{n, k} : Shape{k, n};
  matmulOp(g, gShape, w, wShape, dx, dxShape, false, transposeW);
  cuda::geluGrad(pre, dx, dx, rows * n);
  if (biasGrad)
    columnSums(dx, rows, n, biasGrad);
}

// Row-major dw[k, n] = x[rows, k]^T dy[rows, n] is column-major dw^T
// (n x k) = dy^T (n x rows, as stored) x (rows x k: x's k x rows,
// transposed): dy is A, whose rows BGRADA sums over the contraction.
template <typename T>
void matmulBiasGradOp(const T *x, const Shape &xShape, const T *dy, const Shape &dyShape, T *dw,
                      T *biasGrad) {
  int64_t rows = xShape[0], k = xShape[1], n = dyShape[1];
  if (n == 0)
    return;
  if (rows == 0) { // nothing to contract or sum: zeros
    if (k > 0)
      check(fillAsync(dw, k * n, T(0.0f)), "matmul_bias_grad");
    check(fillAsync(biasGrad, n, T(0.0f)), "matmul_bias_grad");
    return;
  }
  if (k > 0 && ltMatmul(n, k, rows, false, true, CUBLASLT_EPILOGUE_BGRADA, dy, x,
                        static_cast<const T *>(nullptr), dw, biasGrad, nullptr,
                        "matmul_bias_grad"))
    return;
  if (k > 0) // an input without columns has a weight gradient of none, but a bias's
    matmulOp(x, xShape, dy, dyShape, dw, Shape{k, n}, true, false);
  columnSums(dy, rows, n, biasGrad);
}

template void matmulOp(const float *, const Shape &, const float *, const Shape &, float *,
                       const Shape &, bool, bool, Causal);
template void matmulOp(const bf16 *, const Shape &, const bf16 *, const Shape &, bf16 *,
                       const Shape &, bool, bool, Causal);
#define SBPRT_CUDA_LINEAR(T)                                                                       \
  template void linearOp(const T *, const Shape &, const T *, const T *, const T *, T *,           \
                         const Shape &, bool, bool, T *);                                          \
  template void matmulGeluGradOp(const T *, const Shape &, const T *, const T *, T *,              \
                                 const Shape &, bool, T *);                                        \
  template void matmulBiasGradOp(const T *, const Shape &, const T *, const Shape &, T *, T *);
SBPRT_CUDA_LINEAR(float)
SBPRT_CUDA_LINEAR(bf16)

} // namespace sbprt::cuda
