// The AVX2 microkernel of the int8 prefill GEMM (gemm_int8.h), for CPUs without VNNI: per
// 32-element block, 8 vpmaddubsw per row and 8 columns (the panel group's half times the row's 4
// int8 activations broadcast), summed in int16, then one vpmaddwd against ones widens each
// column's 4-code pairs to int32 and the block's scaling follows as in the VNNI kernel:
// acc += (d_x * s) * float(isum) + sum32_x * o.
//
// int16 is exact only for 4-bit codes (int8_gemm_fits_int16): a vpmaddubsw lane is two products
// |code| <= 15 times |q| <= 127, and 8 groups add 16 of them, 16 * 15 * 127 = 30,480 < 2^15.
// (Q8_0's codes reach 255, so it keeps the f32 path here.) Against 8-lane f32 FMAs this is 32
// multiply-adds per vpmaddubsw, one vpaddw each, and weights one byte wide in the panel.
//
// 16 ymm registers: MR rows keep MR int16 and MR f32 accumulators plus the codes, the ones and
// the scale pair, so one call runs 4 rows over one half (8 columns) of the panel at a time.
#include <immintrin.h>

#include <cstring>

#include "lmstack/kernels/gemm_int8.h"

namespace lmstack::kernels {
namespace {

constexpr int kRowsPerPass = 4;
constexpr int kHalf = kInt8PanelCols / 2;

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Rows [row0, row0 + MR) against columns [8 half, 8 half + 8) of the panel, into out[r][0..8).
template <int MR>
void half_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, int half,
               __m256 out[MR]) {
  const int64_t blocks = x.k / 32;
  const int8_t* q = x.q + row0 * x.k;
  const float* d = x.d + row0 * blocks;
  const float* sum32 = x.sum32 + row0 * blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r = 0; r < MR; ++r) out[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * kInt8PanelBlockBytes + 4 * kHalf * half;
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + g * 64));
      for (int r = 0; r < MR; ++r) {
        const __m256i xs = _mm256_set1_epi32(load_i32(q + r * x.k + 32 * b + 4 * g));
        isum[r] = _mm256_add_epi16(isum[r], _mm256_maddubs_epi16(codes, xs));
      }
    }
    const float* so =
        reinterpret_cast<const float*>(panel + b * kInt8PanelBlockBytes + 32 * kInt8PanelCols);
    const __m256 s = _mm256_loadu_ps(so + kHalf * half);
    const __m256 o = _mm256_loadu_ps(so + kInt8PanelCols + kHalf * half);
    for (int r = 0; r < MR; ++r) {
      const __m256 dots = _mm256_cvtepi32_ps(_mm256_madd_epi16(isum[r], ones));
      out[r] = _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_set1_ps(d[r * blocks + b])), dots, out[r]);
      out[r] = _mm256_fmadd_ps(_mm256_set1_ps(sum32[r * blocks + b]), o, out[r]);
    }
  }
}

// Columns [8 half, 8 half + 8) of out stored into c's rows, the first `cols` of them.
template <int MR>
void store_half(const __m256 out[MR], float* c, int64_t ldc, int cols, bool add) {
  for (int r = 0; r < MR; ++r) {
    float lanes[kHalf];
    _mm256_storeu_ps(lanes, out[r]);
    float* dst = c + r * ldc;
    for (int j = 0; j < cols; ++j) dst[j] = add ? dst[j] + lanes[j] : lanes[j];
  }
}

template <int MR>
void rows_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, float* c, int64_t ldc,
               int nr, bool add) {
  for (int half = 0; half * kHalf < nr; ++half) {
    __m256 out[MR];
    half_pass<MR>(x, row0, panel, half, out);
    const int cols = nr - half * kHalf < kHalf ? nr - half * kHalf : kHalf;
    if (cols == kHalf && !add) {
      for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc + kHalf * half, out[r]);
      continue;
    }
    store_half<MR>(out, c + kHalf * half, ldc, cols, add);
  }
}

}  // namespace

void int8_micro_avx2(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                     int64_t ldc, int nr, bool add) {
  for (int r = 0; r < mr; r += kRowsPerPass) {
    float* cr = c + r * ldc;
    switch (mr - r < kRowsPerPass ? mr - r : kRowsPerPass) {
      case 1:
        rows_pass<1>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 2:
        rows_pass<2>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 3:
        rows_pass<3>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      default:
        rows_pass<4>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
    }
  }
}

}  // namespace lmstack::kernels
