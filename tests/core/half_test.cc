// Exhaustive bf16/f16 conversion tests: all 65,536 bit patterns each way, against independent
// references: value-space arithmetic in double (ldexp from the fields) for both formats, and
// the F16C hardware instructions for f16.
#include "lmstack/core/half.h"

#include <immintrin.h>

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace lmstack {
namespace {

// Value of a 16-bit float with `exp_bits` exponent bits and `mant_bits` mantissa bits, in
// double, with an unbounded exponent for the all-ones field when `extend` is set (used to get
// the "value" just past the largest finite number).
double field_value(uint16_t h, int exp_bits, int mant_bits, bool extend = false) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int sign = (h >> 15) & 1;
  const int exp = (h >> mant_bits) & ((1 << exp_bits) - 1);
  const int mant = h & ((1 << mant_bits) - 1);
  double v;
  if (exp == (1 << exp_bits) - 1 && !extend) {
    v = mant ? std::nan("") : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(mant, 1 - bias - mant_bits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(mant, -mant_bits), exp - bias);
  }
  return sign ? -v : v;
}

TEST(Half, Bf16ToF32AllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(static_cast<uint16_t>(h));
    const double want = field_value(static_cast<uint16_t>(h), 8, 7);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "pattern " << h;
    }
  }
}

TEST(Half, F16ToF32AllPatternsMatchesValueAndF16C) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = field_value(static_cast<uint16_t>(h), 5, 10);
    const float hw = _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      ASSERT_EQ(f32_bits(got), f32_bits(hw)) << "NaN payload, pattern " << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "pattern " << h;
      ASSERT_EQ(f32_bits(got), f32_bits(hw)) << "pattern " << h;
    }
  }
}

// Round-to-nearest-even reference in value space: the two neighbours lo/hi (bit patterns,
// same sign) of x, and the one whose value is nearer, ties to the even pattern.
uint16_t rne_reference(float x, uint16_t lo, int exp_bits, int mant_bits) {
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dx = std::fabs(static_cast<double>(x));
  const double dlo = std::fabs(field_value(lo, exp_bits, mant_bits, true));
  const double dhi = std::fabs(field_value(hi, exp_bits, mant_bits, true));
  if (dx - dlo < dhi - dx) return lo;
  if (dx - dlo > dhi - dx) return hi;
  return (lo & 1) ? hi : lo;
}

// For every finite pattern p: p's value, the midpoint to the next pattern, and the floats
// just either side of the midpoint must round as the reference says.
template <class ToHalf>
void check_rounding_all_patterns(int exp_bits, int mant_bits, ToHalf to_half) {
  const uint16_t max_finite_mag = static_cast<uint16_t>((((1 << exp_bits) - 1) << mant_bits) - 1);
  for (uint32_t p = 0; p < 65536; ++p) {
    const uint16_t mag = p & 0x7fff;
    if (mag > max_finite_mag) continue;
    const double v = field_value(static_cast<uint16_t>(p), exp_bits, mant_bits);
    const double next = field_value(static_cast<uint16_t>(p + 1), exp_bits, mant_bits, true);
    ASSERT_EQ(to_half(static_cast<float>(v)), p) << "exact value of pattern " << p;
    const double mid = 0.5 * (v + next);
    const float fm = static_cast<float>(mid);
    if (static_cast<double>(fm) != mid || std::isinf(fm)) continue;  // midpoint not an f32
    for (float x : {fm, std::nextafter(fm, 0.0f), std::nextafter(fm, fm * 2)}) {
      if (std::isinf(x)) continue;
      const uint16_t want = rne_reference(x, static_cast<uint16_t>(p), exp_bits, mant_bits);
      ASSERT_EQ(to_half(x), want) << "x=" << x << " near pattern " << p;
    }
  }
}

TEST(Half, F32ToBf16RoundsToNearestEvenAllPatterns) {
  check_rounding_all_patterns(8, 7, f32_to_bf16);
}

TEST(Half, F32ToF16RoundsToNearestEvenAllPatterns) {
  check_rounding_all_patterns(5, 10, f32_to_f16);
}

TEST(Half, F32ToF16MatchesF16COnRandomFloats) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float x = f32_from_bits(bits(rng));
    const uint16_t hw = static_cast<uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set1_ps(x), _MM_FROUND_TO_NEAREST_INT), 0));
    if (std::isnan(x)) {
      const uint16_t got = f32_to_f16(x);
      ASSERT_TRUE((got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0) << "NaN stays NaN";
      continue;
    }
    ASSERT_EQ(f32_to_f16(x), hw) << "x=" << x << " bits " << f32_bits(x);
  }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(f32_to_bf16(3.4e38f), 0x7f80) << "rounds past the largest finite bf16";
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000) << "tie to even zero";
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
}

TEST(Half, BulkConversionsMatchScalar) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0, 100);
  for (int n : {0, 1, 7, 8, 9, 31, 1000}) {
    std::vector<float> x(static_cast<size_t>(n)), back(x.size());
    for (auto& v : x) v = dist(rng);
    std::vector<uint16_t> h(x.size());
    convert_f32_to_bf16(x.data(), h.data(), n);
    convert_bf16_to_f32(h.data(), back.data(), n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], f32_to_bf16(x[i]));
      ASSERT_EQ(back[i], bf16_to_f32(h[i]));
    }
    convert_f32_to_f16(x.data(), h.data(), n);
    convert_f16_to_f32(h.data(), back.data(), n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], f32_to_f16(x[i]));
      ASSERT_EQ(back[i], f16_to_f32(h[i]));
    }
  }
}

}  // namespace
}  // namespace lmstack
