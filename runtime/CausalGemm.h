// The parts of a causal attention's GEMMs that matter: shared by the CPU
// and CUDA runtimes (exec.causal_matmul), so both skip the same work.
//
// Under a causal mask, query i sees keys 0..i: the scores' product is
// needed only on and below the diagonal, and the probabilities (and their
// gradient) are exactly 0 above it, so a product by them only sums the
// keys up to the diagonal. Cut into row blocks of the result, each block's
// GEMM computes its rows up to the diagonal: with B blocks, (B + 1) / 2B of
// the work (5/8 with 4 blocks, 9/16 with 8). Plain C++.
#pragma once

#include "runtime/Env.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sbprt {

/// What exec.causal_matmul knows of a batched c = op(a) op(b), each batch
/// entry's trailing matrices square where it matters.
enum class Causal {
  /// A plain product.
  None,
  /// Only c's diagonal and below are needed (m == n); above is left unwritten.
  LowerResult,
  /// a, as stored, is 0 above its diagonal (m == k).
  LowerLhs,
};

/// One GEMM of a blocked product: c's rows [row, row + rows) and columns
/// [col, col + cols), summing the contraction over [k0, k0 + k).
struct GemmBlock {
  int64_t row, rows, col, cols, k0, k;
  /// Where the block's operands start in row-major a (stored m x k, or
  /// k x m when transposed), b (k x n, or n x k) and c, rows ld apart.
  int64_t aOffset(int64_t lda, bool transposeA) const {
    return transposeA ? k0 * lda + row : row * lda + k0;
  }
  int64_t bOffset(int64_t ldb, bool transposeB) const {
    return transposeB ? col * ldb + k0 : k0 * ldb + col;
  }
  int64_t cOffset(int64_t ldc) const { return row * ldc + col; }
};

/// The blocks, of `blockRows` rows of c (the last may have fewer), that
/// compute what `causal` needs of an m x n = (m x k)(k x n) product; one
/// block, the whole product, when the shape is not the square the causal
/// kind needs (computing everything is always right).
inline std::vector<GemmBlock> causalBlocks(Causal causal, int64_t m, int64_t n, int64_t k,
                                           bool transposeA, int64_t blockRows) {
  bool square = causal == Causal::LowerResult ? m == n : m == k;
  if (causal == Causal::None || !square || blockRows <= 0 || blockRows >= m)
    return {{0, m, 0, n, 0, k}};
  std::vector<GemmBlock> blocks;
  for (int64_t row = 0; row < m; row += blockRows) {
    int64_t rows = std::min(blockRows, m - row), end = row + rows;
    if (causal == Causal::LowerResult)
      blocks.push_back({row, rows, 0, end, 0, k}); // row i needs columns 0..i
    else if (!transposeA)
      blocks.push_back({row, rows, 0, n, 0, end}); // a[i][j] = 0 for j > i
    else
      blocks.push_back({row, rows, 0, n, row, k - row}); // op(a)[i][j] = a[j][i]: 0 for j < i
  }
  return blocks;
}

/// Rows per block for an m-row causal product: SBPRT_CAUSAL_BLOCK when set
/// (0: no blocks, the whole product; the tests use a few rows), else as
/// many blocks of at least `minRows` rows (a multiple of 64, so that the
/// blocks' offsets keep 16-byte alignment) as make sense, up to `maxBlocks`.
inline int64_t causalBlockRows(int64_t m, int64_t minRows, int64_t maxBlocks) {
  static const long long forced = [] {
    auto value = envInteger("SBPRT_CAUSAL_BLOCK");
    return value ? std::max(0LL, *value) : -1LL;
  }();
  if (forced >= 0)
    return forced ? forced : m;
  int64_t blocks = std::clamp<int64_t>(m / minRows, 1, maxBlocks);
  int64_t rows = (m + blocks - 1) / blocks;
  return (rows + 63) / 64 * 64;
}

} // namespace sbprt
