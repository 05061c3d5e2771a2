// Host tensor helpers.
#include "runtime/Tensor.h"

#include <algorithm>
#include <sstream>

namespace sbprt {

namespace {
/// Everything the runtime knows about a dtype, in one place.
struct DTypeInfo {
  DType dtype;
  size_t size;
  const char *name;
  const char *npyDescr;
  const char *safetensorsName;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, 4, "float32", "<f4", "F32"},
    {DType::F64, 8, "float64", "<f8", "F64"},
    {DType::I32, 4, "int32", "<i4", "I32"},
    {DType::I64, 8, "int64", "<i8", "I64"},
};

const DTypeInfo &infoOf(DType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype)
      return info;
  return kDTypes[0];
}

/// The dtype whose `field` is `name`.
std::optional<DType> dtypeBy(const char *DTypeInfo::*field, const std::string &name) {
  for (const DTypeInfo &info : kDTypes)
    if (name == info.*field)
      return info.dtype;
  return std::nullopt;
}
} // namespace

size_t dtypeSize(DType dtype) { return infoOf(dtype).size; }
const char *dtypeName(DType dtype) { return infoOf(dtype).name; }
const char *npyDescr(DType dtype) { return infoOf(dtype).npyDescr; }
const char *safetensorsName(DType dtype) { return infoOf(dtype).safetensorsName; }

std::optional<DType> dtypeFromNpyDescr(const std::string &descr) {
  return dtypeBy(&DTypeInfo::npyDescr, descr);
}
std::optional<DType> dtypeFromSafetensorsName(const std::string &name) {
  return dtypeBy(&DTypeInfo::safetensorsName, name);
}
std::optional<DType> dtypeFromName(const std::string &name) {
  return dtypeBy(&DTypeInfo::name, name);
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool isBatches(const std::vector<int64_t> &fileShape, const std::vector<int64_t> &shape) {
  return fileShape.size() == shape.size() + 1 && fileShape.front() >= 1 &&
         std::equal(shape.begin(), shape.end(), fileShape.begin() + 1);
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)),
      storage_(static_cast<size_t>(sbprt::numElements(shape_)) * dtypeSize(dtype)) {}

bool Tensor::reshape(std::vector<int64_t> shape) {
  if (sbprt::numElements(shape) != numElements())
    return false;
  shape_ = std::move(shape);
  return true;
}

} // namespace sbprt
