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
// exec.linear on cuBLASLt: the same GEMM with the bias (and GELU) in the
// epilogue, one plan (descriptors and the heuristic's algorithm) per shape
// and operand alignment, kept for the run.
#include "runtime/Alignment.h"
#include "runtime/cuda/Context.h"
#include "runtime/cpu/Ops.h"
#include "runtime/cuda/Ops.h"

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

/// What a cuBLASLt plan depends on: the GEMM, the epilogue, the element
/// type and the alignment of each matrix (the arena aligns to 64 bytes, less
/// than the 256 cuBLASLt assumes unless told).
struct LinearKey {
  int64_t rows, n, k;
  bool transposeW, gelu, isBf16;
  /// alignC: the residual's (cuBLASLt's C), else the result's.
  uint32_t alignW, alignX, alignY, alignC;
  bool operator<(const LinearKey &o) const {
    return std::tie(rows, n, k, transposeW, gelu, isBf16, alignW, alignX, alignY, alignC) <
           std::tie(o.rows, o.n, o.k, o.transposeW, o.gelu, o.isBf16, o.alignW, o.alignX,
                    o.alignY, o.alignC);
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
        std::make_pair(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignC),
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
void linearOp(const T *x, const Shape &xShape, const T *w, const T *bias, const T *residual,
              T *y, const Shape &yShape, bool transposeW, bool gelu) {
  int64_t n = yShape.back(), k = xShape.back(), rows = n ? elementsOf(yShape) / n : 0;
  if (rows == 0 || n == 0)
    return;
  const void *c = residual ? static_cast<const void *>(residual) : y;
  LinearKey key{rows, n, k, transposeW, gelu, std::is_same_v<T, bf16>,
                alignmentOf(w), alignmentOf(x), alignmentOf(y), alignmentOf(c)};
  // cuBLASLt reads the bias in 16-byte vectors (the arena aligns to 64).
  bool fusable = k > 0 && context().epilogues && alignmentOf(bias) >= 16;
  auto found = linearPlans().find(key);
  if (fusable && found == linearPlans().end())
    found = linearPlans().emplace(key, makePlan(key)).first;
  if (fusable && found->second.usable) {
    LinearPlan &plan = found->second;
    // D = alpha w x + beta C + bias: the residual is C with beta = 1.
    float one = 1.0f, zero = 0.0f;
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias),
          "linear");
    check(cublasLtMatmul(context().lt, plan.op, &one, w, plan.w, x, plan.x,
                         residual ? &one : &zero, residual ? residual : y, plan.y, y, plan.y,
                         &plan.algo, context().ltWorkspace, kLtWorkspaceBytes, stream()),
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
  if (residual)
    cuda::binary(BinaryKind::Add, y, yShape, residual, yShape, y, yShape);
  if (gelu)
    cuda::unary(UnaryKind::Gelu, y, y, rows * n);
}

template void matmulOp(const float *, const Shape &, const float *, const Shape &, float *,
                       const Shape &, bool, bool, Causal);
template void matmulOp(const bf16 *, const Shape &, const bf16 *, const Shape &, bf16 *,
                       const Shape &, bool, bool, Causal);
template void linearOp(const float *, const Shape &, const float *, const float *,
                       const float *, float *, const Shape &, bool, bool);
template void linearOp(const bf16 *, const Shape &, const bf16 *, const bf16 *, const bf16 *,
                       bf16 *, const Shape &, bool, bool);

} // namespace sbprt::cuda
