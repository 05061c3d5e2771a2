// Hugging Face safetensors files: the format model weights come in.
#pragma once

#include "runtime/Tensor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sbprt::io {

struct SafetensorsEntry {
  std::string name;
  std::string dtypeName;      // as stored: "F32", "BF16", ...
  std::optional<DType> dtype; // set when supported: F32, F64, I32, I64
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets into the data buffer
};

class SafetensorsFile {
public:
  /// Opens the file and validates its header (well-formed JSON, typed fields,
  /// offsets inside the file, sizes consistent with shapes). Does not read
  /// tensor data. On failure returns nullopt and a one-line message starting
  /// with the path.
  static std::optional<SafetensorsFile> open(const std::string &path,
                                             std::string &error);

  const std::string &path() const { return path_; }
  /// Entries in header order (excluding __metadata__).
  const std::vector<SafetensorsEntry> &entries() const { return entries_; }
  /// The optional "__metadata__" string map; empty when absent.
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }
  /// nullptr when absent.
  const SafetensorsEntry *find(const std::string &name) const;

  /// Reads one whole tensor (supported dtypes only).
  bool read(const SafetensorsEntry &entry, Tensor &out,
            std::string &error) const;
  /// Reads the rectangular slice [offsets[d], offsets[d] + sizes[d]) of every
  /// dimension d, seeking over the bytes that are not needed. With `view`,
  /// the slice is of the tensor's elements seen (row-major) in that shape,
  /// which must hold as many elements: GPT-2's [H, 3H] attention weight as
  /// [H, 3, heads, d], sliced by heads.
  bool readSlice(const SafetensorsEntry &entry,
                 const std::vector<int64_t> &offsets,
                 const std::vector<int64_t> &sizes, Tensor &out,
                 std::string &error,
                 const std::vector<int64_t> *view = nullptr) const;

private:
  SafetensorsFile() = default;

  std::string path_;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  uint64_t dataStart_ = 0;
};

/// Writes tensors in the given order, data packed in that order, header JSON
/// padded with spaces to a multiple of 8 bytes. Names must be unique and must
/// not be "__metadata__".
bool writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    std::string &error,
    const std::map<std::string, std::string> &metadata = {});

} // namespace sbprt::io
