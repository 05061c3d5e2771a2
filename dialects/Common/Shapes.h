// Shape rules shared by the graph and exec dialects, which do not link
// each other: graph.matmul infers its result with them, exec.causal_matmul
// verifies its own.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sbpc {

/// "[2, 16, 64]": how shapes appear in every diagnostic.
inline std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

/// A product's result shape: lhs [..., M, K] (transposed [..., K, M]) times
/// rhs [K, N] or [..., K, N] with lhs's batch dimensions (transposed
/// [..., N, K]) is [..., M, N]. std::nullopt, with `why` saying what is
/// wrong (a diagnostic after the op's name), when they do not multiply.
inline std::optional<llvm::SmallVector<int64_t>>
matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs, bool transposeLhs,
            bool transposeRhs, std::string &why) {
  if (lhs.size() < 2 || rhs.size() < 2) {
    why = "operands must have rank >= 2, got " + formatShape(lhs) + " and " + formatShape(rhs);
    return std::nullopt;
  }
  size_t batchRank = lhs.size() - 2;
  if (rhs.size() != 2 && rhs.size() != lhs.size()) {
    why = "rhs " + formatShape(rhs) + " must be a matrix or have the batch dimensions of lhs " +
          formatShape(lhs);
    return std::nullopt;
  }
  if (rhs.size() != 2 && lhs.take_front(batchRank) != rhs.take_front(batchRank)) {
    why = "batch dimensions of lhs " + formatShape(lhs) + " and rhs " + formatShape(rhs) +
          " differ";
    return std::nullopt;
  }
  int64_t m = lhs[batchRank + (transposeLhs ? 1 : 0)];
  int64_t kl = lhs[batchRank + (transposeLhs ? 0 : 1)];
  size_t rb = rhs.size() - 2;
  int64_t kr = rhs[rb + (transposeRhs ? 1 : 0)];
  int64_t n = rhs[rb + (transposeRhs ? 0 : 1)];
  if (kl != kr) {
    why = "contracting dimensions differ: lhs " + formatShape(lhs) + " has K = " +
          std::to_string(kl) + ", rhs " + formatShape(rhs) + " has K = " + std::to_string(kr);
    return std::nullopt;
  }
  llvm::SmallVector<int64_t> shape(lhs.take_front(batchRank));
  shape.append({m, n});
  return shape;
}

} // namespace sbpc
