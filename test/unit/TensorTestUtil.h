// Helpers shared by the runtime I/O tests: random tensors and exact comparison.
#pragma once

#include "runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace sbprt::testing {

/// A tensor of random values that are never zero, so that a reader that
/// leaves data untouched fails.
inline Tensor randomTensor(DType dtype, std::vector<int64_t> shape, unsigned seed) {
  Tensor t(dtype, std::move(shape));
  std::mt19937_64 rng(seed);
  auto nonZero = [&]() {
    double v = std::uniform_real_distribution<double>(0.5, 1000.0)(rng);
    return rng() % 2 ? v : -v;
  };
  for (int64_t i = 0; i < t.numElements(); ++i) {
    switch (dtype) {
    case DType::F32:
      t.as<float>()[i] = static_cast<float>(nonZero());
      break;
    case DType::F64:
      t.as<double>()[i] = nonZero();
      break;
    case DType::I32:
      t.as<int32_t>()[i] = static_cast<int32_t>(nonZero() * 1000);
      break;
    case DType::I64:
      t.as<int64_t>()[i] = static_cast<int64_t>(nonZero() * 1e12);
      break;
    }
  }
  return t;
}

/// Small dyadic values (multiples of 1/8 in [-16, 16]): sums of a few of them
/// are exact in float, so values moved between layouts compare bit for bit.
inline Tensor dyadicTensor(std::vector<int64_t> shape, unsigned seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.as<float>()[i] = static_cast<float>(static_cast<int>(rng() % 257) - 128) / 8.0f;
  return t;
}

/// Same dtype, shape and bytes.
inline void expectSame(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.numBytes(), b.numBytes());
  if (a.numBytes()) {
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.numBytes()));
  }
}

/// A fixture that hands out temporary file paths and removes them afterwards.
class TempFileTest : public ::testing::Test {
protected:
  explicit TempFileTest(std::string prefix) : prefix_(std::move(prefix)) {}

  /// A fresh path unique to this process and test.
  std::string tempPath(const std::string &name) {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string path = ::testing::TempDir() + prefix_ + std::to_string(getpid()) + "_" +
                       info->name() + "_" + name;
    created_.push_back(path);
    return path;
  }
  std::string writeRaw(const std::string &name, const std::string &bytes) {
    std::string path = tempPath(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  /// Expects a one-line error that starts with the path and contains `words`.
  static void expectMessage(const std::string &path, const std::string &error,
                            const std::string &words) {
    EXPECT_EQ(0u, error.rfind(path + ": ", 0)) << error;
    EXPECT_NE(std::string::npos, error.find(words)) << error;
    EXPECT_EQ(std::string::npos, error.find('\n')) << error;
  }
  void TearDown() override {
    for (const std::string &path : created_)
      std::remove(path.c_str());
  }

private:
  std::string prefix_;
  std::vector<std::string> created_;
};

} // namespace sbprt::testing
