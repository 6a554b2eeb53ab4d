// bf16 and IEEE f16 <-> f32 conversion, portable bit manipulation (no ISA needed).
// f32 -> 16-bit rounds to nearest, ties to even; NaN stays NaN (quiet bit set, sign kept),
// Inf stays Inf, f16 subnormals are produced and read exactly. The exhaustive test over all
// 65,536 patterns (tests/core/half_test.cc) checks these against an independent reference.
#pragma once

#include <cstdint>
#include <cstring>

namespace lmstack {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 is the top half of an f32: 1 sign, 8 exponent, 7 mantissa bits.
inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  // Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate.
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  // Inf, or NaN made quiet (bit 22 set) as F16C does.
  if (exp == 0x1f)
    return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);
  // Subnormal: normalize the mantissa into an f32 normal.
  int e = -1;
  do {
    ++e;
    mant <<= 1;
  } while ((mant & 0x400u) == 0);
  return f32_from_bits(sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: Inf
  if (abs >= 0x38800000u) {                       // normal f16 range (>= 2^-14)
    uint32_t r = abs - (112u << 23);              // rebias exponent 127 -> 15
    r += 0x0fffu + ((r >> 13) & 1u);              // round to nearest even at bit 13
    return sign | static_cast<uint16_t>(r >> 13);
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal f16: value = mant * 2^-24. Shift the full 24-bit significand and round.
  const uint32_t exp = abs >> 23;
  const uint32_t sig = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exp;  // in [14, 24]
  uint32_t m = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (m & 1u))) ++m;
  return sign | static_cast<uint16_t>(m);
}

// Bulk conversions (vectorized where the CPU allows; see half.cc).
void convert_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void convert_f16_to_f32(const uint16_t* src, float* dst, int64_t n);
void convert_f32_to_f16(const float* src, uint16_t* dst, int64_t n);

}  // namespace lmstack
