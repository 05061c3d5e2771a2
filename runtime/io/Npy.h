// NumPy .npy files: how test inputs and reference outputs are exchanged.
#pragma once

#include "runtime/Tensor.h"

#include <string>
#include <vector>

namespace sbprt::io {

/// Reads a .npy file (format versions 1.0, 2.0 and 3.0; little-endian
/// float32/float64/int32/int64, C order only). On failure returns false and
/// sets `error` to a one-line message starting with the path.
bool readNpy(const std::string &path, Tensor &out, std::string &error);

/// Reads only the header of a .npy file: its element type and shape.
bool readNpyHeader(const std::string &path, DType &dtype, std::vector<int64_t> &shape,
                   std::string &error);

/// Reads the block [offsets[d], offsets[d] + sizes[d]) of every dimension
/// of the array in a .npy file, seeking over the rest; `fileShape` gets the
/// array's shape (also when the block does not fit it).
bool readNpySlice(const std::string &path, const std::vector<int64_t> &offsets,
                  const std::vector<int64_t> &sizes, Tensor &out,
                  std::vector<int64_t> &fileShape, std::string &error);

/// Writes a version 1.0 .npy file with the header padded so that the data
/// starts at a multiple of 64 bytes, as NumPy does. A rank-0 tensor is written
/// with shape (). Falls back to version 2.0 only if the header would not fit
/// version 1.0's 16-bit length field.
bool writeNpy(const std::string &path, const Tensor &tensor,
              std::string &error);

/// Writes `rows` as rows first, first + step, ... (dimension 0) of the
/// array of `shape` in the .npy file at `path`, `rows` having 1/step of its
/// rows: one of `step` pieces of it. With `create` the file is made first
/// (the rows not written yet zero); otherwise it must exist with that
/// header.
bool writeNpyRows(const std::string &path, const std::vector<int64_t> &shape, const Tensor &rows,
                  int64_t first, int64_t step, bool create, std::string &error);

} // namespace sbprt::io
