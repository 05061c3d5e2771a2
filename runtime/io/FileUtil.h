// Helpers the file readers and writers share: an owning FILE handle, one-line
// errors, overflow-checked tensor sizes, and writing a file from byte ranges.
#pragma once

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

} // namespace sbprt::io::detail
