// AVX2 build of the quantized GEMV leaf kernels (quant_gemv_impl.h): vpmaddubsw + vpmaddwd in
// place of VNNI, for x86-64-v3 machines without AVX-512 (q4_0x16 / q4_Kx16 / q6_Kx16 groups as two
// 8-row halves).
#include "lmstack/kernels/quant_gemv.h"

#define QG_NS avx2
#define QG_VNNI 0
#define QG_W512 0
#include "lmstack/kernels/quant_gemv_impl.h"
#include "lmstack/kernels/quant_gemv_x16.h"
#undef QG_NS
#undef QG_VNNI
#undef QG_W512

namespace lmstack::kernels {

void quant_gemv_avx2(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
                     const QuantizedRows& x, int64_t m, float* y, int64_t ldy, const float* bias,
                     bool accumulate) {
  if (is_row_interleaved(t))
    return avx2::gemv_x16(t, w, n, n_begin, n_end, x, m, y, ldy, bias, accumulate);
  avx2::gemv(t, w, n_begin, n_end, x, m, y, ldy, bias, accumulate);
}

}  // namespace lmstack::kernels

namespace lmstack::kernels {
namespace {

float max_lanes(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

int32_t sum_lanes(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1))));
}

}  // namespace

// The reference's arithmetic per block (quant_linear.cc): the same amax, the same scalar scale
// and inverse, x * inv in f32 and vcvtps2dq's round-to-nearest-even (nearbyint's default mode).
void quantize_blocks_avx2(const float* x, int64_t blocks, int8_t* q, float* d, float* sum32,
                          float* sum16) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // vpackssdw / vpacksswb work per 128-bit lane: the dwords of 4 codes come out in the order
  // 0, 2, 4, 6, 1, 3, 5, 7 of the wanted one.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    const __m256 amax =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                      _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float scale = max_lanes(amax) / 127.0f;
    const __m256 inv = _mm256_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
    __m256i c[4];
    for (int i = 0; i < 4; ++i) c[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const int32_t s0 = sum_lanes(_mm256_add_epi32(c[0], c[1]));
    const int32_t s1 = sum_lanes(_mm256_add_epi32(c[2], c[3]));
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b),
                        _mm256_permutevar8x32_epi32(packed, order));
    d[b] = scale;
    sum32[b] = scale * static_cast<float>(s0 + s1);
    sum16[2 * b] = scale * static_cast<float>(s0);
    sum16[2 * b + 1] = scale * static_cast<float>(s1);
  }
}

}  // namespace lmstack::kernels
