// The CPU kernels that only move bytes (slices and concatenations of any
// element type): apart from Kernels.cpp, so that what needs only them (the
// simulated mesh's assembly of outputs) links without a BLAS.
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Walk.h"

#include <cstring>

namespace sbprt::cpu {

void slice(const void *in, size_t elementBytes, const Shape &shape,
           const std::vector<int64_t> &starts, const std::vector<int64_t> &limits, void *out) {
  Shape strides = stridesOf(shape), outShape;
  int64_t start = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    outShape.push_back(limits[d] - starts[d]);
    start += starts[d] * strides[d];
  }
  // The dimensions taken whole make runs (walkedDims).
  int64_t run;
  size_t d = walkedDims(
      outShape, [&](size_t axis) { return outShape[axis] == shape[axis]; }, run);
  outShape.resize(d);
  strides.resize(d);
  size_t runBytes = static_cast<size_t>(run) * elementBytes;
  const char *src = static_cast<const char *>(in);
  char *dst = static_cast<char *>(out);
  if (runBytes == 0)
    return;
  walk<1>(outShape, {strides}, {start}, [&](int64_t i, const std::array<int64_t, 1> &at) {
    std::memcpy(dst + i * runBytes, src + at[0] * elementBytes, runBytes);
  });
}

void concat(const std::vector<const void *> &inputs, size_t elementBytes,
            const std::vector<Shape> &shapes, int64_t axis, void *out) {
  // Every input contributes a contiguous run of shape[axis] * inner per outer index.
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shapes[0][d];
  for (size_t d = axis + 1; d < shapes[0].size(); ++d)
    inner *= shapes[0][d];
  char *dst = static_cast<char *>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < inputs.size(); ++i) {
      size_t run = static_cast<size_t>(shapes[i][axis] * inner) * elementBytes;
      std::memcpy(dst, static_cast<const char *>(inputs[i]) + o * run, run);
      dst += run;
    }
}

} // namespace sbprt::cpu
