// Tests for the .npy reader and writer, its headers and its error paths.
#include "runtime/io/Npy.h"

#include "test/unit/TensorTestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace sbprt;
using namespace sbprt::testing;
using sbprt::io::readNpy;
using sbprt::io::writeNpy;

namespace {

/// A .npy file image with the given version and header dict; the header is
/// padded to 64 bytes unless `pad` is false.
std::string npyImage(int major, std::string dict, const std::string &data,
                     bool pad = true) {
  size_t lenBytes = major == 1 ? 2 : 4;
  if (pad)
    while ((6 + 2 + lenBytes + dict.size() + 1) % 64)
      dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < lenBytes; ++i)
    out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  return out + dict + data;
}

class NpyTest : public TempFileTest {
protected:
  NpyTest() : TempFileTest("sbprt_npy_") {}
  /// Expects reading to fail with a message naming the path and `words`.
  void expectError(const std::string &path, const std::string &words) {
    Tensor t;
    std::string error;
    EXPECT_FALSE(readNpy(path, t, error));
    expectMessage(path, error, words);
  }
};

TEST_F(NpyTest, RoundTripsEveryDtypeAndRank) {
  const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {2, 3, 4}, {3, 0}};
  unsigned seed = 1;
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    for (const auto &shape : shapes) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeToString(shape));
      Tensor in = randomTensor(dtype, shape, seed++);
      std::string path = tempPath("rt.npy");
      std::string error;
      ASSERT_TRUE(writeNpy(path, in, error)) << error;
      Tensor out;
      ASSERT_TRUE(readNpy(path, out, error)) << error;
      expectSame(in, out);
    }
  }
}

TEST_F(NpyTest, WritesAlignedVersion1Header) {
  Tensor in = randomTensor(DType::F32, {5}, 3);
  std::string path = tempPath("aligned.npy");
  std::string error;
  ASSERT_TRUE(writeNpy(path, in, error)) << error;
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)),
                    std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 20u);
  size_t dataStart = bytes.size() - 20;
  EXPECT_EQ(0u, dataStart % 64);
  EXPECT_EQ(1, bytes[6]);
  EXPECT_EQ(dataStart - 10, size_t(uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8));
  EXPECT_EQ('\n', bytes[dataStart - 1]);
  EXPECT_NE(std::string::npos, bytes.find("'shape': (5,)"));
  EXPECT_NE(std::string::npos, bytes.find("'descr': '<f4'"));
}

TEST_F(NpyTest, ReadsVersion2And3Headers) {
  Tensor expected = randomTensor(DType::F64, {2, 3}, 4);
  std::string data(static_cast<const char *>(expected.data()),
                   expected.numBytes());
  for (int major : {2, 3}) {
    std::string path = writeRaw(
        "v" + std::to_string(major) + ".npy",
        npyImage(major,
                 "{\"shape\":(2,3), 'fortran_order': False, 'descr': '<f8'}",
                 data));
    Tensor out;
    std::string error;
    ASSERT_TRUE(readNpy(path, out, error)) << error;
    expectSame(expected, out);
  }
}

TEST_F(NpyTest, AcceptsUnpaddedHeaderAndOneDimFortranOrder) {
  Tensor expected = randomTensor(DType::I32, {3}, 5);
  std::string data(static_cast<const char *>(expected.data()),
                   expected.numBytes());
  std::string path = writeRaw(
      "f1.npy",
      npyImage(1, "{'descr': '|i4', 'fortran_order': True, 'shape': (3,)}",
               data, /*pad=*/false));
  Tensor out;
  std::string error;
  ASSERT_TRUE(readNpy(path, out, error)) << error;
  expectSame(expected, out);
}

TEST_F(NpyTest, ReportsMissingFile) {
  expectError(tempPath("missing.npy"),
              "cannot open: No such file or directory");
}

TEST_F(NpyTest, ReportsBadMagic) {
  expectError(writeRaw("magic.npy", "PK\x03\x04 not numpy at all"),
              "not a .npy file (bad magic)");
  expectError(writeRaw("short.npy", "\x93NU"), "bad magic");
}

TEST_F(NpyTest, ReportsUnsupportedVersion) {
  expectError(writeRaw("v9.npy", npyImage(1, "{}", "").replace(6, 1, "\x09")),
              "unsupported format version 9.0");
}

TEST_F(NpyTest, ReportsTruncation) {
  const std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 8), }";
  expectError(writeRaw("data.npy", npyImage(1, dict, std::string(64, 'x'))),
              "truncated: header says 128 bytes of data, file has 64");
  expectError(writeRaw("header.npy", npyImage(1, dict, "").substr(0, 40)),
              "truncated");
  expectError(writeRaw("preamble.npy", std::string("\x93NUMPY\x01", 7)),
              "truncated");
}

TEST_F(NpyTest, ReportsTrailingData) {
  const std::string dict =
      "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }";
  expectError(writeRaw("trailing.npy", npyImage(1, dict, std::string(24, 'x'))),
              "trailing data: file has 24 bytes of data, header says 16");
}

TEST_F(NpyTest, ReportsUnsupportedDtype) {
  for (std::string descr : {">f4", "<f2", "<u8", "|b1", "<c16", "f4"}) {
    expectError(writeRaw("dtype.npy",
                         npyImage(1,
                                  "{'descr': '" + descr +
                                      "', 'fortran_order': False, 'shape': ()}",
                                  std::string(4, 'x'))),
                "unsupported dtype '" + descr +
                    "' (supported: <f4, <f8, <i4, <i8)");
  }
}

TEST_F(NpyTest, ReportsFortranOrder) {
  expectError(
      writeRaw(
          "fortran.npy",
          npyImage(1,
                   "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}",
                   std::string(16, 'x'))),
      "Fortran-ordered arrays are not supported");
}

TEST_F(NpyTest, ReportsMalformedHeaders) {
  const std::vector<std::string> dicts = {
      "",
      "[1, 2]",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': "
      "(99999999999999999999,)}",
      "{'descr': '<f4', 'fortran_order': false, 'shape': ()}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': ()}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
      "{'descr': '<f4' 'fortran_order': False, 'shape': ()}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (",
      "{, }",
  };
  for (const std::string &dict : dicts) {
    SCOPED_TRACE(dict);
    expectError(writeRaw("bad.npy", npyImage(1, dict, std::string(4, 'x'))),
                "malformed header");
  }
}

TEST_F(NpyTest, ReportsHugeShapeWithoutAllocating) {
  expectError(
      writeRaw("huge.npy", npyImage(1,
                                    "{'descr': '<f8', 'fortran_order': False, "
                                    "'shape': (4294967296, 4294967296)}",
                                    "")),
      "too large");
  expectError(
      writeRaw("big.npy", npyImage(1,
                                   "{'descr': '<f8', 'fortran_order': False, "
                                   "'shape': (1000000000000,)}",
                                   "")),
      "truncated");
}

TEST_F(NpyTest, ReportsUnwritablePath) {
  std::string path = tempPath("no_such_dir") + "/x.npy";
  std::string error;
  EXPECT_FALSE(writeNpy(path, Tensor(DType::F32, {2}), error));
  EXPECT_EQ(0u, error.rfind(path + ": ", 0)) << error;
}

} // namespace

// A rank reads only its block: every block of a 3-D array equals the same
// block cut from the whole, and a block outside the array is refused with
// the array's shape reported.
TEST_F(NpyTest, ReadsBlocks) {
  Tensor whole = randomTensor(DType::F32, {4, 3, 6}, 9);
  std::string path = tempPath("block.npy");
  std::string error;
  ASSERT_TRUE(writeNpy(path, whole, error)) << error;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> blocks = {
      {{0, 0, 0}, {4, 3, 6}}, {{2, 0, 0}, {2, 3, 6}}, {{0, 1, 0}, {4, 1, 6}},
      {{1, 0, 3}, {2, 3, 3}}, {{3, 2, 5}, {1, 1, 1}}};
  for (const auto &[offsets, sizes] : blocks) {
    SCOPED_TRACE(shapeToString(offsets) + " " + shapeToString(sizes));
    Tensor block;
    std::vector<int64_t> shape;
    ASSERT_TRUE(io::readNpySlice(path, offsets, sizes, block, shape, error)) << error;
    EXPECT_EQ(shape, whole.shape());
    ASSERT_EQ(block.shape(), sizes);
    int64_t k = 0;
    for (int64_t i = 0; i < sizes[0]; ++i)
      for (int64_t j = 0; j < sizes[1]; ++j)
        for (int64_t l = 0; l < sizes[2]; ++l)
          EXPECT_EQ(block.as<float>()[k++],
                    whole.as<float>()[((offsets[0] + i) * 3 + offsets[1] + j) * 6 + offsets[2] + l]);
  }
  Tensor block;
  std::vector<int64_t> shape;
  EXPECT_FALSE(io::readNpySlice(path, {3, 0, 0}, {2, 3, 6}, block, shape, error));
  expectMessage(path, error, "out of bounds for shape [4, 3, 6]");
  EXPECT_EQ(shape, whole.shape());
}

// An output stored a micro-batch at a time: piece i holds rows i, i + n,
// ... of the array. Written in any order, the pieces make the same file
// as the whole written at once; a piece that does not fit is refused.
TEST_F(NpyTest, WritesRowsInPieces) {
  Tensor whole = randomTensor(DType::F32, {6, 2, 3}, 11);
  const int64_t n = 3;
  std::string path = tempPath("rows.npy"), error;
  size_t rowBytes = whole.numBytes() / 6;
  for (int64_t i : {2, 0, 1}) {
    Tensor piece(DType::F32, {2, 2, 3});
    for (int64_t q = 0; q < 2; ++q)
      std::memcpy(static_cast<char *>(piece.data()) + q * rowBytes,
                  static_cast<const char *>(whole.data()) + (q * n + i) * rowBytes, rowBytes);
    ASSERT_TRUE(sbprt::io::writeNpyRows(path, {6, 2, 3}, piece, i, n, /*create=*/i == 2, error))
        << error;
  }
  Tensor read;
  ASSERT_TRUE(readNpy(path, read, error)) << error;
  expectSame(whole, read);
  std::string wholePath = tempPath("whole.npy");
  ASSERT_TRUE(writeNpy(wholePath, whole, error)) << error;
  std::ifstream a(path, std::ios::binary), b(wholePath, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}),
            std::string(std::istreambuf_iterator<char>(b), {}));
  EXPECT_FALSE(sbprt::io::writeNpyRows(path, {6, 2, 3}, Tensor(DType::F32, {3, 2, 3}), 0, n,
                                       false, error));
  EXPECT_NE(std::string::npos, error.find("do not fit an array of shape [6, 2, 3]")) << error;
  // A file of another array is not written into.
  EXPECT_FALSE(sbprt::io::writeNpyRows(path, {9, 2, 3}, Tensor(DType::F32, {3, 2, 3}), 0, n,
                                       false, error));
  EXPECT_NE(std::string::npos, error.find("is not the array of shape [9, 2, 3]")) << error;
}
