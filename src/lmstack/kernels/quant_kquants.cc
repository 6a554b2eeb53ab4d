// Reference codecs of the GGUF k-quants Q4_K and Q6_K (layouts: quant_blocks.h, from ggml's
// block_q4_K / block_q6_K). The quantizers are lmstack's own round-to-nearest schemes, chosen
// so each element's error has a simple bound (checked by tests/kernels/quant_test.cc):
//   Q4_K, sub-block j of 32: m_j = -min(0, min x) is stored as dmin * mq_j with mq_j rounded
//     up, so m'_j >= m_j; the step d_j = d * sc_j is rounded up to cover (max x + m'_j) / 15.
//     Then 0 <= (x + m'_j) / d_j <= 15 and |x - (d_j q - m'_j)| <= d_j / 2.
//   Q6_K, sub-block j of 16: step d * sc_j >= amax_j / 31 (sc_j rounded up), q in -31..31, so
//     |x - step * q| <= step / 2.
// d and dmin are f16 values rounded up (f16_round_up) so the 6-bit / 8-bit sub-scales never
// need more than 63 / 127.
#include <algorithm>
#include <cmath>

#include "lmstack/core/half.h"
#include "lmstack/kernels/quant_blocks.h"
#include "lmstack/kernels/quant_ref.h"

namespace lmstack::kernels::qref {
namespace {

// ceil(v / unit) clamped to [0, limit]; 0 when unit is 0.
int steps_up(float v, float unit, int limit) {
  if (unit <= 0.0f) return 0;
  return std::clamp(static_cast<int>(std::ceil(v / unit)), 0, limit);
}

void pack_q4k_scales(const int sc[8], const int m[8], uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

void quantize_q4k_block(const float* x, uint8_t* dst) {
  float lo[8], hi[8], max_m = 0.0f;
  for (int j = 0; j < 8; ++j) {
    lo[j] = 0.0f;
    hi[j] = x[32 * j];
    for (int i = 0; i < 32; ++i) {
      lo[j] = std::min(lo[j], x[32 * j + i]);
      hi[j] = std::max(hi[j], x[32 * j + i]);
    }
    max_m = std::max(max_m, -lo[j]);
  }
  const uint16_t dmin16 = f16_round_up(max_m / 63.0f);
  const float dmin = f16_to_f32(dmin16);
  int mq[8], sc[8];
  float need[8], max_need = 0.0f;
  for (int j = 0; j < 8; ++j) {
    mq[j] = steps_up(-lo[j], dmin, 63);
    need[j] = std::max(0.0f, (hi[j] + dmin * static_cast<float>(mq[j])) / 15.0f);
    max_need = std::max(max_need, need[j]);
  }
  const uint16_t d16 = f16_round_up(max_need / 63.0f);
  const float d = f16_to_f32(d16);
  for (int j = 0; j < 8; ++j) sc[j] = steps_up(need[j], d, 63);
  qblock::store_u16(dst, d16);
  qblock::store_u16(dst + 2, dmin16);
  pack_q4k_scales(sc, mq, dst + qblock::kQ4_KScalesAt);
  uint8_t q[256];
  for (int j = 0; j < 8; ++j) {
    const float step = d * static_cast<float>(sc[j]), shift = dmin * static_cast<float>(mq[j]);
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 32; ++i)
      q[32 * j + i] = static_cast<uint8_t>(
          std::clamp(static_cast<int>(std::lround((x[32 * j + i] + shift) * inv)), 0, 15));
  }
  uint8_t* qs = dst + qblock::kQ4_KQsAt;
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l)
      qs[32 * p + l] = static_cast<uint8_t>(q[64 * p + l] | (q[64 * p + 32 + l] << 4));
}

void quantize_q6k_block(const float* x, uint8_t* dst) {
  float amax[16], max_step = 0.0f;
  for (int j = 0; j < 16; ++j) {
    amax[j] = 0.0f;
    for (int i = 0; i < 16; ++i) amax[j] = std::max(amax[j], std::fabs(x[16 * j + i]));
    max_step = std::max(max_step, amax[j] / 31.0f);
  }
  const uint16_t d16 = f16_round_up(max_step / 127.0f);
  const float d = f16_to_f32(d16);
  uint8_t q[256];
  auto* scales = dst + qblock::kQ6_KScalesAt;
  for (int j = 0; j < 16; ++j) {
    const int sc = steps_up(amax[j] / 31.0f, d, 127);
    scales[j] = static_cast<uint8_t>(sc);
    const float step = d * static_cast<float>(sc);
    const float inv = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 16; ++i)
      q[16 * j + i] = static_cast<uint8_t>(
          std::clamp(static_cast<int>(std::lround(x[16 * j + i] * inv)), -32, 31) + 32);
  }
  uint8_t* ql = dst;
  uint8_t* qh = dst + qblock::kQ6_KQhAt;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qq = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 15) | ((qq[l + 64] & 15) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((qq[l + 32] & 15) | ((qq[l + 96] & 15) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                            ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
    }
  }
  qblock::store_u16(dst + qblock::kQ6_KDAt, d16);
}

}  // namespace

void quantize_q4_k(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b)
    quantize_q4k_block(x + 256 * b, dst + qblock::kQ4_KBytes * b);
}

void dequantize_q4_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, src += qblock::kQ4_KBytes, y += 256) {
    const float d = f16_to_f32(qblock::load_u16(src));
    const float dmin = f16_to_f32(qblock::load_u16(src + 2));
    const uint8_t* qs = src + qblock::kQ4_KQsAt;
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      qblock::q4k_scale_min(src + qblock::kQ4_KScalesAt, j, &sc, &m);
      const float step = d * static_cast<float>(sc), shift = dmin * static_cast<float>(m);
      const int shift_bits = (j % 2) * 4;
      for (int l = 0; l < 32; ++l)
        y[32 * j + l] =
            step * static_cast<float>((qs[32 * (j / 2) + l] >> shift_bits) & 15) - shift;
    }
  }
}

void quantize_q6_k(const float* x, uint8_t* dst, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b)
    quantize_q6k_block(x + 256 * b, dst + qblock::kQ6_KBytes * b);
}

void dequantize_q6_k(const uint8_t* src, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b, src += qblock::kQ6_KBytes, y += 256) {
    const float d = f16_to_f32(qblock::load_u16(src + qblock::kQ6_KDAt));
    const auto* scales = reinterpret_cast<const int8_t*>(src + qblock::kQ6_KScalesAt);
    for (int j = 0; j < 8; ++j) {
      uint8_t code[32];
      qblock::q6k_codes(src, j, code);
      for (int i = 0; i < 32; ++i)
        y[32 * j + i] = d * static_cast<float>(scales[2 * j + i / 16]) *
                        static_cast<float>(static_cast<int>(code[i]) - 32);
    }
  }
}

}  // namespace lmstack::kernels::qref
