// NumPy .npy reader and writer; the header dict is parsed by hand.
#include "runtime/io/Npy.h"
#include "runtime/io/FileUtil.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace sbprt::io {
namespace {
using namespace detail;


constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

/// Parses the header dict, e.g. {'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }. Keys may come in any order; anything else is rejected.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text_(text) {}

  /// Returns an empty string on success, otherwise what is wrong.
  std::string parse(std::string &descr, bool &fortran,
                    std::vector<int64_t> &shape) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    skipSpace();
    if (!consume('{'))
      return "expected '{'";
    while (true) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return "expected a quoted key";
      skipSpace();
      if (!consume(':'))
        return "expected ':' after '" + key + "'";
      skipSpace();
      if (key == "descr") {
        if (seenDescr || !parseString(descr))
          return "bad or repeated 'descr'";
        seenDescr = true;
      } else if (key == "fortran_order") {
        if (seenFortran || !parseBool(fortran))
          return "bad or repeated 'fortran_order'";
        seenFortran = true;
      } else if (key == "shape") {
        if (seenShape || !parseShape(shape))
          return "bad or repeated 'shape'";
        seenShape = true;
      } else {
        return "unexpected key '" + key + "'";
      }
      skipSpace();
      if (consume(','))
        continue;
      if (consume('}'))
        break;
      return "expected ',' or '}'";
    }
    skipSpace();
    if (pos_ != text_.size())
      return "unexpected text after '}'";
    if (!seenDescr || !seenFortran || !seenShape)
      return "missing 'descr', 'fortran_order' or 'shape'";
    return "";
  }

private:
  void skipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  bool consume(char c) {
    if (pos_ >= text_.size() || text_[pos_] != c)
      return false;
    ++pos_;
    return true;
  }
  bool consumeWord(const char *word) {
    size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0)
      return false;
    pos_ += n;
    return true;
  }
  bool parseString(std::string &out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      return false;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string::npos)
      return false;
    out = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    if (consumeWord("True"))
      out = true;
    else if (consumeWord("False"))
      out = false;
    else
      return false;
    return true;
  }
  bool parseShape(std::vector<int64_t> &out) {
    out.clear();
    if (!consume('('))
      return false;
    skipSpace();
    if (consume(')'))
      return true;
    while (true) {
      if (pos_ >= text_.size() ||
          !std::isdigit(static_cast<unsigned char>(text_[pos_])))
        return false;
      int64_t value = 0;
      while (pos_ < text_.size() &&
             std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        int digit = text_[pos_++] - '0';
        if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
          return false;
        value = value * 10 + digit;
      }
      out.push_back(value);
      skipSpace();
      if (consume(')'))
        return true;
      if (!consume(','))
        return false;
      skipSpace();
      if (consume(')'))
        return true;
    }
  }

  const std::string &text_;
  size_t pos_ = 0;
};

/// '|' (no byte order) is accepted as well as '<': harmless for these sizes.
std::optional<DType> dtypeFromDescr(const std::string &descr) {
  if (descr.size() == 3 && descr[0] == '|')
    return dtypeFromNpyDescr("<" + descr.substr(1));
  return dtypeFromNpyDescr(descr);
}

} // namespace

namespace {

/// An opened .npy file whose header has been checked: the data of `shape`
/// and `dtype` starts at byte `dataStart`.
struct NpyFile {
  FilePtr file;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t dataStart = 0;
};

bool openNpy(const std::string &path, NpyFile &npy, std::string &error) {
  FilePtr file = openForReading(path, error);
  if (!file)
    return false;
  if (std::fseek(file.get(), 0, SEEK_END) != 0)
    return fail(error, path, "cannot seek");
  long fileSizeL = std::ftell(file.get());
  if (fileSizeL < 0 || std::fseek(file.get(), 0, SEEK_SET) != 0)
    return fail(error, path, "cannot seek");
  uint64_t fileSize = static_cast<uint64_t>(fileSizeL);

  unsigned char preamble[12] = {};
  size_t got = std::fread(preamble, 1, 8, file.get());
  if (got < kMagicLen || std::memcmp(preamble, kMagic, kMagicLen) != 0)
    return fail(error, path, "not a .npy file (bad magic)");
  if (got < 8)
    return fail(error, path, "truncated: file ends inside the preamble");
  unsigned major = preamble[6], minor = preamble[7];
  size_t lenBytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (lenBytes == 0)
    return fail(error, path,
                "unsupported format version " + std::to_string(major) + "." +
                    std::to_string(minor));
  if (std::fread(preamble + 8, 1, lenBytes, file.get()) != lenBytes)
    return fail(error, path, "truncated: file ends inside the preamble");
  uint64_t headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= static_cast<uint64_t>(preamble[8 + i]) << (8 * i);
  uint64_t dataStart = 8 + lenBytes + headerLen;
  if (dataStart > fileSize)
    return fail(error, path,
                "truncated: header says it is " + std::to_string(headerLen) +
                    " bytes, file has " +
                    std::to_string(fileSize - 8 - lenBytes));

  std::string header(static_cast<size_t>(headerLen), '\0');
  if (headerLen &&
      std::fread(&header[0], 1, header.size(), file.get()) != header.size())
    return fail(error, path, "read failed");
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  std::string problem = HeaderParser(header).parse(descr, fortran, shape);
  if (!problem.empty())
    return fail(error, path, "malformed header: " + problem);

  std::optional<DType> found = dtypeFromDescr(descr);
  if (!found)
    return fail(error, path,
                "unsupported dtype '" + descr +
                    "' (supported: <f4, <f8, <i4, <i8)");
  DType dtype = *found;
  // With at most one dimension the two orders are the same bytes.
  if (fortran && shape.size() > 1)
    return fail(error, path, "Fortran-ordered arrays are not supported");
  uint64_t expected = 0;
  if (!checkedByteSize(shape, dtypeSize(dtype), expected))
    return fail(error, path, "shape " + shapeToString(shape) + " is too large");
  uint64_t actual = fileSize - dataStart;
  if (actual < expected)
    return fail(error, path,
                "truncated: header says " + std::to_string(expected) +
                    " bytes of data, file has " + std::to_string(actual));
  if (actual > expected)
    return fail(error, path,
                "trailing data: file has " + std::to_string(actual) +
                    " bytes of data, header says " + std::to_string(expected));

  npy.file = std::move(file);
  npy.dtype = dtype;
  npy.shape = std::move(shape);
  npy.dataStart = dataStart;
  return true;
}

} // namespace

bool readNpy(const std::string &path, Tensor &out, std::string &error) {
  NpyFile npy;
  if (!openNpy(path, npy, error))
    return false;
  Tensor result(npy.dtype, npy.shape);
  if (result.numBytes() && std::fread(result.data(), 1, result.numBytes(),
                                      npy.file.get()) != result.numBytes())
    return fail(error, path, "read failed");
  out = std::move(result);
  return true;
}

bool readNpyHeader(const std::string &path, DType &dtype, std::vector<int64_t> &shape,
                   std::string &error) {
  NpyFile npy;
  if (!openNpy(path, npy, error))
    return false;
  dtype = npy.dtype;
  shape = std::move(npy.shape);
  return true;
}

bool readNpySlice(const std::string &path, const std::vector<int64_t> &offsets,
                  const std::vector<int64_t> &sizes, Tensor &out,
                  std::vector<int64_t> &fileShape, std::string &error) {
  NpyFile npy;
  if (!openNpy(path, npy, error))
    return false;
  fileShape = npy.shape;
  std::string problem = checkBlock(npy.shape, offsets, sizes);
  if (!problem.empty())
    return fail(error, path, problem);
  Tensor result(npy.dtype, sizes);
  if (!readBlock(npy.file.get(), path, npy.dataStart, npy.shape, dtypeSize(npy.dtype), offsets,
                 sizes, result.data(), error))
    return false;
  out = std::move(result);
  return true;
}

/// The magic, version, header length and header of a .npy file of `dtype`
/// and `shape`, padded so that the data starts at a multiple of 64 bytes,
/// as NumPy does; version 2.0 only if the header would not fit version
/// 1.0's 16-bit length field.
static std::string npyPreamble(DType dtype, const std::vector<int64_t> &dims) {
  std::string shape = "(";
  for (size_t i = 0; i < dims.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(dims[i]);
  shape += dims.size() == 1 ? ",)" : ")";
  std::string header = std::string("{'descr': '") + npyDescr(dtype) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";

  // NumPy aligns the data to 64 bytes so that it can be memory-mapped.
  unsigned major = 1;
  size_t lenBytes = 2;
  size_t unpadded = kMagicLen + 2 + lenBytes + header.size() + 1;
  size_t padded = (unpadded + 63) / 64 * 64;
  if (padded - kMagicLen - 2 - lenBytes > 0xffff) {
    major = 2;
    lenBytes = 4;
    padded = (unpadded + 2 + 63) / 64 * 64;
  }
  size_t headerLen = padded - kMagicLen - 2 - lenBytes;
  header.resize(headerLen - 1, ' ');
  header += '\n';

  std::string preamble(kMagic, kMagicLen);
  preamble += static_cast<char>(major);
  preamble += '\0';
  for (size_t i = 0; i < lenBytes; ++i)
    preamble += static_cast<char>((headerLen >> (8 * i)) & 0xff);
  return preamble + header;
}

bool writeNpy(const std::string &path, const Tensor &tensor, std::string &error) {
  std::string preamble = npyPreamble(tensor.dtype(), tensor.shape());
  return writeFile(path, {{preamble.data(), preamble.size()}, {tensor.data(), tensor.numBytes()}},
                   error);
}

bool writeNpyRows(const std::string &path, const std::vector<int64_t> &shape, const Tensor &rows,
                  int64_t first, int64_t step, bool create, std::string &error) {
  std::string preamble = npyPreamble(rows.dtype(), shape);
  if (shape.empty() || rows.shape().empty() || first < 0 || step < 1 ||
      rows.shape()[0] * step != shape[0] || first >= step)
    return fail(error, path,
                "rows " + shapeToString(rows.shape()) + " every " + std::to_string(step) +
                    " from " + std::to_string(first) + " do not fit an array of shape " +
                    shapeToString(shape));
  size_t rowBytes = rows.numBytes() / static_cast<size_t>(rows.shape()[0]);
  FilePtr file(std::fopen(path.c_str(), create ? "w+b" : "r+b"));
  if (!file)
    return fail(error, path, std::string("cannot open for writing: ") + std::strerror(errno));
  bool ok = true;
  if (!create) {
    // The file an earlier piece made: the same array.
    std::string header(preamble.size(), '\0');
    if (std::fread(header.data(), 1, header.size(), file.get()) != header.size() ||
        header != preamble)
      return fail(error, path,
                  "is not the array of shape " + shapeToString(shape) + " an earlier piece began");
  } else {
    // The whole array's extent, the rows not yet written zero.
    ok = std::fwrite(preamble.data(), 1, preamble.size(), file.get()) == preamble.size();
    uint64_t end = preamble.size() + rowBytes * static_cast<uint64_t>(shape[0]);
    ok = ok && std::fseek(file.get(), static_cast<long>(end - 1), SEEK_SET) == 0 &&
         std::fputc(0, file.get()) != EOF;
  }
  const auto *src = static_cast<const unsigned char *>(rows.data());
  for (int64_t q = 0; ok && q < rows.shape()[0]; ++q) {
    uint64_t at = preamble.size() + rowBytes * static_cast<uint64_t>(q * step + first);
    ok = std::fseek(file.get(), static_cast<long>(at), SEEK_SET) == 0 &&
         std::fwrite(src + q * rowBytes, 1, rowBytes, file.get()) == rowBytes;
  }
  int savedErrno = errno;
  if (std::fclose(file.release()) != 0 || !ok)
    return fail(error, path,
                std::string("cannot write: ") + std::strerror(ok ? errno : savedErrno));
  return true;
}

} // namespace sbprt::io
