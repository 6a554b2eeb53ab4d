// Block-quantized codecs (quant.h): (a) dequantize_row of every GGUF type equals llama.cpp's
// gguf-py on golden data, and quantize_row of Q8_0/Q4_0 is byte-identical to gguf-py's
// quantize; (b) quantize -> dequantize stays within each type's hand-derived error bound
// (quant.cc / quant_kquants.cc headers) on random rows of several magnitudes; plus the dtype
// table and parser entries of the quant types. Golden data: tools/ref/gen_quant_golden.py.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/dtype.h"
#include "lmstack/core/file.h"
#include "lmstack/core/half.h"
#include "lmstack/core/npy.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/kernels/quant_blocks.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

const char* kRegen = "regenerate: python3 tools/ref/gen_quant_golden.py";

std::string golden(const std::string& name) {
  return test::source_path("tests/data/kernels/quant/" + name);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  const std::string s = read_file(path);
  return {s.begin(), s.end()};
}

class GgufGolden : public ::testing::TestWithParam<DType> {};

TEST_P(GgufGolden, DequantizeMatchesGgufPy) {
  const DType t = GetParam();
  const std::string name(dtype_name(t));
  const std::vector<uint8_t> bytes = read_bytes(golden(name + "_bytes.bin"));
  const NpyArray want = read_npy(golden(name + "_dequant.npy"));
  ASSERT_EQ(want.shape.size(), 2u) << kRegen;
  const int64_t rows = want.shape[0], n = want.shape[1];
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), rows * dtype_bytes(t, n)) << kRegen;
  std::vector<float> got(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(t, bytes.data() + r * dtype_bytes(t, n), got.data() + r * n, n);
  // gguf-py multiplies in f32 like the C++ code, but may order the Q4_K product d*sc*q - m
  // differently: allow one f32 rounding of the larger term.
  EXPECT_TRUE(test::all_close(got, want.f32, 2e-7, 1e-12)) << name << " " << kRegen;
}

// gguf-py quantizes only these two (k-quant bytes differ by design: quant.h).
class GgufQuantizeGolden : public ::testing::TestWithParam<DType> {};

TEST_P(GgufQuantizeGolden, QuantizeIsByteIdenticalToGgufPy) {
  const DType t = GetParam();
  const std::string name(dtype_name(t));
  const NpyArray x = read_npy(golden(name + "_input.npy"));
  const std::vector<uint8_t> want = read_bytes(golden(name + "_bytes.bin"));
  std::vector<uint8_t> got(want.size());
  const int64_t rows = x.shape[0], n = x.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(t, x.f32.data() + r * n, got.data() + r * dtype_bytes(t, n), n);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << name << " byte " << i << " (block "
                               << i / static_cast<size_t>(dtype_info(t).block_bytes) << ") "
                               << kRegen;
}

INSTANTIATE_TEST_SUITE_P(Types, GgufQuantizeGolden, ::testing::Values(DType::kQ8_0, DType::kQ4_0),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });
INSTANTIATE_TEST_SUITE_P(Types, GgufGolden,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// The per-element error bound of each quantizer, read from the quantized bytes of the block
// that holds element i (derivations in quant.cc and quant_kquants.cc). `slack` covers f32
// rounding in x / step and the like.
double error_bound(DType t, const uint8_t* row, int64_t i) {
  const int block = dtype_info(t).block_size;
  const uint8_t* b = row + (i / block) * dtype_info(t).block_bytes;
  const int64_t e = i % block;
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0: {
      const double d = std::fabs(f16_to_f32(qblock::load_u16(b)));
      const int levels = t == DType::kQ8_0 ? 127 : 8;
      // q is computed with the f32 scale d and decoded with its f16 rounding, at most half an
      // f16 ulp away: d 2^-11, or 2^-25 among the subnormals (scales below 2^-14).
      const double half_ulp = std::max(d * std::ldexp(1.0, -11), std::ldexp(1.0, -25));
      // Q4_0's grid is -8..7 steps of d with d = max / -8: the value opposite max may reach
      // 8 steps and clamps to 7 (error up to d); every other value rounds (error <= d/2).
      const double rounding = t == DType::kQ4_0 ? d : d / 2;
      return rounding * (1 + 1e-6) + levels * half_ulp + 1e-30;
    }
    case DType::kQ4_K: {
      int sc, m;
      qblock::q4k_scale_min(b + qblock::kQ4_KScalesAt, static_cast<int>(e / 32), &sc, &m);
      const double step = f16_to_f32(qblock::load_u16(b)) * sc;
      const double shift = f16_to_f32(qblock::load_u16(b + 2)) * m;
      return step / 2 * (1 + 1e-5) + 1e-6 * shift + 1e-30;
    }
    case DType::kQ6_K: {
      const double d = f16_to_f32(qblock::load_u16(b + qblock::kQ6_KDAt));
      const double step = d * static_cast<int8_t>(b[qblock::kQ6_KScalesAt + e / 16]);
      return std::fabs(step) / 2 * (1 + 1e-5) + 1e-30;
    }
    default:
      return f16_to_f32(qblock::load_u16(b)) * (0.5 + 1e-5) + 1e-30;
  }
}

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, ErrorWithinHandDerivedBound) {
  const DType t = GetParam();
  std::mt19937 rng(99);
  const int64_t n = 1024;
  std::vector<uint8_t> q(static_cast<size_t>(dtype_bytes(t, n)));
  std::vector<float> x(n), y(n);
  for (double magnitude : {1e-3, 1.0, 50.0}) {
    for (int trial = 0; trial < 8; ++trial) {
      std::normal_distribution<float> normal(trial % 2 ? 0.5f : 0.0f, 1.0f);  // shifted: asymmetric
      for (auto& v : x) v = static_cast<float>(normal(rng) * magnitude);
      if (trial == 3) std::fill(x.begin(), x.begin() + 256, 0.0f);        // all-zero blocks
      if (trial == 5) std::fill(x.begin() + 256, x.begin() + 512, 1.5f);  // constant blocks
      quantize_row(t, x.data(), q.data(), n);
      dequantize_row(t, q.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double err = std::fabs(static_cast<double>(x[i]) - y[i]);
        ASSERT_LE(err, error_bound(t, q.data(), i))
            << dtype_name(t) << " magnitude " << magnitude << " trial " << trial << " element " << i
            << ": x " << x[i] << " decoded " << y[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantRoundTrip,
                         ::testing::Values(DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K,
                                           DType::kInt4G32, DType::kInt4G64, DType::kInt4G128),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// The eight-at-once Q4_K scale decoder (the GEMV's) against the per-sub-block one that the
// gguf-py golden test above checks, over random and all-ones scale bytes.
TEST(QuantBlocks, Q4KScalesMinsEqualsPerSubBlockDecode) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    uint8_t bytes[12];
    for (auto& b : bytes) b = trial == 0 ? 0xff : static_cast<uint8_t>(rng());
    uint64_t sc8, m8;
    qblock::q4k_scales_mins(bytes, &sc8, &m8);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      qblock::q4k_scale_min(bytes, j, &sc, &m);
      ASSERT_EQ(static_cast<int>(sc8 >> (8 * j) & 0xff), sc) << trial << " sub-block " << j;
      ASSERT_EQ(static_cast<int>(m8 >> (8 * j) & 0xff), m) << trial << " sub-block " << j;
    }
  }
}

TEST(QuantDType, TableAndParser) {
  EXPECT_EQ(parse_dtype("q4_k"), DType::kQ4_K);
  EXPECT_EQ(parse_dtype("Q6_K"), DType::kQ6_K);
  EXPECT_EQ(parse_dtype("q8_0"), DType::kQ8_0);
  EXPECT_EQ(parse_dtype("int4_g128"), DType::kInt4G128);
  EXPECT_EQ(dtype_bytes(DType::kInt4G32, 64), 40);
  EXPECT_EQ(dtype_bytes(DType::kInt4G64, 128), 72);
  EXPECT_EQ(dtype_bytes(DType::kInt4G128, 256), 136);
  EXPECT_THROW(parse_dtype("q5_1"), ConfigError);
}

TEST(QuantRow, RejectsBadLengthsAndTypes) {
  float x[48] = {};
  uint8_t q[64];
  EXPECT_THROW(quantize_row(DType::kQ8_0, x, q, 48), ConfigError);
  EXPECT_THROW(quantize_row(DType::kI32, x, q, 32), ConfigError);
  EXPECT_THROW(dequantize_row(DType::kQ4_K, q, x, 32), ConfigError);
}

TEST(QuantMatrix, ParallelRowsEqualQuantizeRow) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int64_t rows = 37, n = 512;
  std::vector<float> w(static_cast<size_t>(rows * n));
  for (auto& v : w) v = normal(rng);
  ThreadPool pool(2);
  for (DType t : {DType::kQ4_K, DType::kInt4G64}) {
    const Tensor qt = quantize_matrix(pool, w.data(), rows, n, t);
    ASSERT_EQ(qt.dtype(), t);
    std::vector<uint8_t> row(static_cast<size_t>(dtype_bytes(t, n)));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(t, w.data() + r * n, row.data(), n);
      ASSERT_EQ(std::memcmp(row.data(), static_cast<const uint8_t*>(qt.raw_data()) + r * row.size(),
                            row.size()),
                0)
          << dtype_name(t) << " row " << r;
    }
    std::vector<float> all(static_cast<size_t>(rows * n)), one(static_cast<size_t>(n));
    dequantize_rows(qt, 0, rows, all.data());
    dequantize_row(t, static_cast<const uint8_t*>(qt.raw_data()) + 5 * row.size(), one.data(), n);
    EXPECT_EQ(std::memcmp(all.data() + 5 * n, one.data(), one.size() * 4), 0);
  }
}

}  // namespace
}  // namespace lmstack::kernels
