// Index walks the CPU kernels share (Kernels.cpp, Copy.cpp).
#pragma once

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

#include <array>

namespace sbprt::cpu {

/// Row-major strides of `shape`.
inline Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Visits every index of `shape` in row-major order, like an odometer, and
/// calls `visit(i, offsets)` with the linear output index and, for each of
/// the N strided views, the offset of that index (`start + sum(index * stride)`).
template <size_t N, typename Visit>
void walk(const Shape &shape, const std::array<Shape, N> &strides, std::array<int64_t, N> offsets,
          Visit visit) {
  int64_t rank = static_cast<int64_t>(shape.size()), n = numElements(shape);
  Shape index(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    visit(i, offsets);
    for (int64_t d = rank - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k)
        offsets[k] += strides[k][d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

/// For a copy of a block between two row-major arrays (a slice, a pad):
/// how many leading dimensions of the block's `sizes` are left to walk.
/// The trailing ones that `whole(axis)` says the copy takes whole, and the
/// one before them, are one contiguous run on both sides per index of the
/// dimensions before: `run` elements, copied as one.
template <typename Whole> size_t walkedDims(const Shape &sizes, Whole whole, int64_t &run) {
  size_t d = sizes.size();
  run = 1;
  while (d > 0 && whole(d - 1))
    run *= sizes[--d];
  if (d > 0)
    run *= sizes[--d];
  return d;
}

} // namespace sbprt::cpu
