// Tests for safetensors round trips, slices and header validation.
#include "runtime/io/Safetensors.h"

#include "test/unit/TensorTestUtil.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace sbprt;
using namespace sbprt::testing;
using sbprt::io::SafetensorsEntry;
using sbprt::io::SafetensorsFile;

namespace {

/// A safetensors image: little-endian length (the real one unless given),
/// header text, data.
std::string image(const std::string &header, const std::string &data,
                  uint64_t length = ~uint64_t(0)) {
  if (length == ~uint64_t(0))
    length = header.size();
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}

class SafetensorsTest : public TempFileTest {
protected:
  SafetensorsTest() : TempFileTest("sbprt_st_") {}
  /// Expects opening to fail with a message naming the path and `words`.
  void expectOpenError(const std::string &path, const std::string &words) {
    std::string error;
    EXPECT_FALSE(SafetensorsFile::open(path, error).has_value());
    expectMessage(path, error, words);
  }
};

TEST_F(SafetensorsTest, RoundTripsEveryDtypeInOrderWithMetadata) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.emplace_back("z.scalar", randomTensor(DType::F32, {}, 1));
  tensors.emplace_back("a.f64", randomTensor(DType::F64, {2, 3, 4}, 2));
  tensors.emplace_back("m.i32", randomTensor(DType::I32, {9}, 3));
  tensors.emplace_back("b.i64", randomTensor(DType::I64, {3, 1, 2}, 4));
  tensors.emplace_back("empty", randomTensor(DType::F32, {0, 4}, 5));
  std::vector<std::pair<std::string, const Tensor *>> refs;
  for (const auto &[name, tensor] : tensors)
    refs.emplace_back(name, &tensor);
  std::string path = tempPath("rt.safetensors");
  std::string error;
  ASSERT_TRUE(io::writeSafetensors(path, refs, error, {{"format", "pt"}}))
      << error;

  std::ifstream raw(path, std::ios::binary);
  unsigned char len[8];
  raw.read(reinterpret_cast<char *>(len), 8);
  EXPECT_EQ(0u, len[0] % 8) << "header is padded to 8 bytes";

  auto file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(path, file->path());
  EXPECT_EQ("pt", file->metadata().at("format"));
  ASSERT_EQ(tensors.size(), file->entries().size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsEntry &entry = file->entries()[i];
    EXPECT_EQ(tensors[i].first, entry.name);
    EXPECT_EQ(&entry, file->find(entry.name));
    Tensor out;
    ASSERT_TRUE(file->read(entry, out, error)) << error;
    expectSame(tensors[i].second, out);
  }
  EXPECT_EQ("F64", file->entries()[1].dtypeName);
  EXPECT_EQ(file->entries()[0].end, file->entries()[1].begin);
  EXPECT_EQ(nullptr, file->find("missing"));
  EXPECT_EQ(nullptr, file->find("__metadata__"));
}

TEST_F(SafetensorsTest, ReadsStridedSlices) {
  Tensor full = randomTensor(DType::F32, {4, 5, 6}, 6);
  Tensor wide = randomTensor(DType::I64, {3, 4}, 7);
  std::string path = tempPath("slice.safetensors");
  std::string error;
  ASSERT_TRUE(io::writeSafetensors(path, {{"w", &full}, {"v", &wide}}, error));
  auto file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;

  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      slices = {{{1, 2, 1}, {2, 3, 4}}, {{0, 0, 0}, {4, 5, 6}},
                {{2, 0, 0}, {2, 5, 6}}, {{1, 1, 0}, {3, 2, 6}},
                {{3, 4, 5}, {1, 1, 1}}, {{0, 3, 2}, {4, 0, 3}}};
  for (const auto &[offsets, sizes] : slices) {
    SCOPED_TRACE(shapeToString(offsets) + " " + shapeToString(sizes));
    Tensor part;
    ASSERT_TRUE(file->readSlice(*file->find("w"), offsets, sizes, part, error))
        << error;
    ASSERT_EQ(sizes, part.shape());
    int64_t n = 0;
    for (int64_t i = 0; i < sizes[0]; ++i)
      for (int64_t j = 0; j < sizes[1]; ++j)
        for (int64_t k = 0; k < sizes[2]; ++k, ++n)
          ASSERT_EQ(
              full.as<float>()[((offsets[0] + i) * 5 + offsets[1] + j) * 6 +
                               offsets[2] + k],
              part.as<float>()[n]);
    EXPECT_EQ(n, part.numElements());
  }

  Tensor column;
  ASSERT_TRUE(file->readSlice(*file->find("v"), {0, 2}, {3, 1}, column, error));
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_EQ(wide.as<int64_t>()[i * 4 + 2], column.as<int64_t>()[i]);

  Tensor bad;
  EXPECT_FALSE(
      file->readSlice(*file->find("w"), {3, 0, 0}, {2, 5, 6}, bad, error));
  expectMessage(path, error, "out of bounds");
  EXPECT_FALSE(file->readSlice(*file->find("w"), {0, 0}, {1, 1}, bad, error));
  expectMessage(path, error, "rank");
}

TEST_F(SafetensorsTest, ReadsSliceOfScalar) {
  Tensor scalar = randomTensor(DType::F64, {}, 8);
  std::string path = tempPath("scalar.safetensors");
  std::string error;
  ASSERT_TRUE(io::writeSafetensors(path, {{"s", &scalar}}, error));
  auto file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;
  Tensor out;
  ASSERT_TRUE(file->readSlice(file->entries()[0], {}, {}, out, error)) << error;
  expectSame(scalar, out);
}

TEST_F(SafetensorsTest, UnsupportedDtypeOpensButDoesNotRead) {
  std::string path = writeRaw(
      "bf16.safetensors",
      image(
          R"({"wte.weight":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})",
          "abcd"));
  std::string error;
  auto file = SafetensorsFile::open(path, error);
  ASSERT_TRUE(file) << error;
  const SafetensorsEntry *entry = file->find("wte.weight");
  ASSERT_NE(nullptr, entry);
  EXPECT_FALSE(entry->dtype.has_value());
  Tensor out;
  EXPECT_FALSE(file->read(*entry, out, error));
  expectMessage(path, error,
                "tensor 'wte.weight' has dtype BF16, which is not supported "
                "(F32, F64, I32, I64)");
}

TEST_F(SafetensorsTest, ReportsMissingAndShortFiles) {
  expectOpenError(tempPath("missing.safetensors"),
                  "cannot open: No such file or directory");
  expectOpenError(writeRaw("short.safetensors", "\x02\0\0"), "truncated");
}

TEST_F(SafetensorsTest, ReportsHeaderLengthPastEnd) {
  expectOpenError(writeRaw("len.safetensors", image("{}", "", 1000)),
                  "header length 1000 runs past the end of the file");
  expectOpenError(
      writeRaw("huge.safetensors", image("{}", "", ~uint64_t(0) - 1)),
      "runs past the end");
}

TEST_F(SafetensorsTest, ReportsBadJson) {
  for (std::string header : {"{", "{\"a\": }", "not json", "{} {}", ""}) {
    SCOPED_TRACE(header);
    expectOpenError(writeRaw("json.safetensors", image(header, "")),
                    "header is not valid JSON");
  }
  expectOpenError(writeRaw("array.safetensors", image("[1, 2]", "")),
                  "not a JSON object");
}

TEST_F(SafetensorsTest, ReportsBadEntries) {
  const std::string data(16, 'x');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,17]}})",
       "data_offsets [8, 17] out of range (data buffer has 16 bytes)"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,4]}})", "out of range"},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       "has 8 bytes of data, but dtype F32 and shape [3] need 12"},
      {R"({"t":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", "need 6"},
      {R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       "too large"},
      {R"({"t":{"dtype":5,"shape":[2],"data_offsets":[0,8]}})", "'dtype'"},
      {R"({"t":{"shape":[2],"data_offsets":[0,8]}})", "'dtype'"},
      {R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "'shape'"},
      {R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", "'shape'"},
      {R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "'shape'"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", "'data_offsets'"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,"8"]}})", "'data_offsets'"},
      {R"({"t":{"dtype":"F32","shape":[2]}})", "'data_offsets'"},
      {R"({"t":[1]})", "entry 't' is not an object"},
      {R"({"__metadata__":{"a":1}})", "__metadata__"},
      {R"({"__metadata__":"x"})", "__metadata__"},
      {R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "duplicate key 't'"},
      // The tensors tile the buffer: no overlap, no hole, nothing after.
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"c":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
       "tensor 'b' has data_offsets [4, 12], which overlap those of 'a' [0, 8]"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
       "no tensor holds bytes [8, 12) of the data buffer (tensors must tile it)"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       "no tensor holds bytes [8, 16) of the data buffer"},
  };
  for (const auto &[header, words] : cases) {
    SCOPED_TRACE(header);
    expectOpenError(writeRaw("entry.safetensors", image(header, data)), words);
  }
}

TEST_F(SafetensorsTest, WriterRejectsDuplicateNames) {
  Tensor t(DType::F32, {1});
  std::string path = tempPath("dup.safetensors");
  std::string error;
  EXPECT_FALSE(io::writeSafetensors(path, {{"a", &t}, {"a", &t}}, error));
  expectMessage(path, error, "duplicate");
  EXPECT_FALSE(io::writeSafetensors(path, {{"__metadata__", &t}}, error));
  expectMessage(path, error, "reserved");
}

} // namespace
