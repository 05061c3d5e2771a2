// A dense, row-major host tensor: the value type the runtime and the reference evaluator share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sbprt {

enum class DType { F32, F64, I32, I64 };

/// Size of one element in bytes.
size_t dtypeSize(DType dtype);
/// NumPy-style name: "float32", "float64", "int32", "int64".
const char *dtypeName(DType dtype);
/// How the file formats name a dtype: NumPy's little-endian descr ("<f4")
/// and safetensors' dtype ("F32").
const char *npyDescr(DType dtype);
const char *safetensorsName(DType dtype);
/// The dtype a format name stands for, or nullopt if the runtime has none.
std::optional<DType> dtypeFromNpyDescr(const std::string &descr);
std::optional<DType> dtypeFromSafetensorsName(const std::string &name);
/// The dtype a NumPy-style name ("float32") stands for.
std::optional<DType> dtypeFromName(const std::string &name);

/// Product of the dimensions (1 for a scalar).
int64_t numElements(const std::vector<int64_t> &shape);
/// "[2, 16, 64]".
std::string shapeToString(const std::vector<int64_t> &shape);

/// Whether an input file of `fileShape` holds batches of `shape`, one a
/// training step: `shape` with one more leading dimension, their number,
/// of at least 1 (`sbpc run --steps`: step k takes batch k modulo it).
bool isBatches(const std::vector<int64_t> &fileShape, const std::vector<int64_t> &shape);

class Tensor {
public:
  Tensor() = default;
  /// A zero-filled tensor of the given type and shape.
  Tensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numElements() const { return sbprt::numElements(shape_); }
  size_t numBytes() const { return storage_.size(); }
  /// Views the same elements, row-major, as `shape`; false (and unchanged)
  /// where its element count differs.
  bool reshape(std::vector<int64_t> shape);

  void *data() { return storage_.data(); }
  const void *data() const { return storage_.data(); }
  template <typename T> T *as() { return reinterpret_cast<T *>(storage_.data()); }
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(storage_.data());
  }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::vector<std::byte> storage_;
};

} // namespace sbprt
