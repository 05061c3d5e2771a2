// Helpers the file readers and writers share: an owning FILE handle, one-line
// errors, overflow-checked tensor sizes, and writing a file from byte ranges.
#pragma once

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace sbprt::io::detail {

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

/// Sets `error` to "<path>: <msg>" and returns false.
inline bool fail(std::string &error, const std::string &path, const std::string &msg) {
  error = path + ": " + msg;
  return false;
}

/// `path` opened for reading, or null with `error` set: a file that cannot
/// be opened, or a directory (which fopen opens and every read then finds
/// empty).
inline FilePtr openForReading(const std::string &path, std::string &error) {
  FilePtr file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    fail(error, path, std::string("cannot open: ") + std::strerror(errno));
    return nullptr;
  }
  struct stat status;
  if (fstat(fileno(file.get()), &status) == 0 && S_ISDIR(status.st_mode)) {
    fail(error, path, "is a directory, not a file");
    return nullptr;
  }
  return file;
}

/// Byte size of a tensor, multiplied in the same order Tensor does so a shape
/// accepted here can never overflow there.
inline bool checkedByteSize(const std::vector<int64_t> &shape, size_t elemSize,
                            uint64_t &bytes) {
  const uint64_t limit = std::numeric_limits<int64_t>::max();
  uint64_t n = elemSize;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > limit / static_cast<uint64_t>(d)))
      return false;
    n *= static_cast<uint64_t>(d);
  }
  bytes = n;
  return true;
}

/// A byte range to write.
struct Chunk {
  const void *data;
  size_t size;
};

/// Writes the chunks to `path` in order, replacing the file; on failure a
/// one-line error names the path and the system's reason.
inline bool writeFile(const std::string &path, const std::vector<Chunk> &chunks,
                      std::string &error) {
  FilePtr file(std::fopen(path.c_str(), "wb"));
  if (!file)
    return fail(error, path, std::string("cannot open for writing: ") + std::strerror(errno));
  bool ok = true;
  for (const Chunk &chunk : chunks)
    ok = ok && (chunk.size == 0 || std::fwrite(chunk.data, 1, chunk.size, file.get()) == chunk.size);
  int savedErrno = errno;
  if (std::fclose(file.release()) != 0 || !ok)
    return fail(error, path,
                std::string("cannot write: ") + std::strerror(ok ? errno : savedErrno));
  return true;
}

/// Reads the block [offsets[d], offsets[d] + sizes[d]) of every dimension d
/// of a row-major tensor of `shape` whose data starts at byte `dataStart` of
/// `file`, into `dst` (packed), seeking over what is not needed. The caller
/// has checked the block against the shape.
inline bool readBlock(std::FILE *file, const std::string &path, uint64_t dataStart,
                      const std::vector<int64_t> &shape, size_t elemSize,
                      const std::vector<int64_t> &offsets, const std::vector<int64_t> &sizes,
                      void *dst, std::string &error) {
  size_t rank = shape.size();
  for (int64_t size : sizes)
    if (size == 0)
      return true;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  // Trailing dimensions taken whole are contiguous with the one before them,
  // so each read covers dimensions [k, rank) at once.
  size_t k = rank ? rank - 1 : 0;
  int64_t runElems = rank ? sizes[k] : 1;
  while (k > 0 && sizes[k] == shape[k])
    runElems *= sizes[--k];
  size_t runBytes = static_cast<size_t>(runElems) * elemSize;
  std::vector<int64_t> index(k, 0);
  auto *out = static_cast<unsigned char *>(dst);
  while (true) {
    int64_t elem = rank ? offsets[k] * strides[k] : 0;
    for (size_t d = 0; d < k; ++d)
      elem += (offsets[d] + index[d]) * strides[d];
    uint64_t pos = dataStart + uint64_t(elem) * elemSize;
    if (pos > uint64_t(std::numeric_limits<long>::max()) ||
        std::fseek(file, static_cast<long>(pos), SEEK_SET) != 0 ||
        std::fread(out, 1, runBytes, file) != runBytes)
      return fail(error, path, "read failed: file is shorter than its header says");
    out += runBytes;
    size_t d = k;
    while (d > 0 && ++index[d - 1] == sizes[d - 1])
      index[--d] = 0;
    if (d == 0)
      return true;
  }
}

/// Empty when the block fits `shape`; otherwise what is wrong.
inline std::string checkBlock(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &offsets,
                              const std::vector<int64_t> &sizes) {
  auto text = [](const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  if (offsets.size() != shape.size() || sizes.size() != shape.size())
    return "slice of rank " + std::to_string(offsets.size()) + "/" +
           std::to_string(sizes.size()) + " does not match a tensor of rank " +
           std::to_string(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > shape[d] - sizes[d])
      return "slice at " + text(offsets) + " of size " + text(sizes) +
             " is out of bounds for shape " + text(shape);
  return "";
}

} // namespace sbprt::io::detail
