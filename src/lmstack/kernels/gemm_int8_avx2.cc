// The AVX2 microkernel of the int8 prefill GEMM (gemm_int8.h), for CPUs without VNNI: per
// 32-element block, 8 vpmaddubsw per row and 8 columns (the panel group's half times the row's 4
// int8 activations broadcast), summed in int16, then one vpmaddwd against ones widens each
// column's 4-code pairs to int32 and the block's scaling follows as in the VNNI kernel:
// acc += (d_x * s) * float(isum) + sum32_x * o.
//
// int16 is exact only for 4-bit codes (int8_gemm_fits_int16): a vpmaddubsw lane is two products
// |code| <= 15 times |q| <= 127, and 8 groups add 16 of them, 16 * 15 * 127 = 30,480 < 2^15.
// Q6_K's 6-bit codes are widened every 2 groups instead (half_pass). (Q8_0's codes reach 255,
// so it keeps the f32 path here.) Against 8-lane f32 FMAs this is 32
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
// kRun groups are summed in int16 before one vpmaddwd widens them: a block's 8 for 4-bit codes,
// 2 for Q6_K's 6-bit codes (kHalves: 2 groups x 2 products x 63 x 128 = 32,256 < 2^15), whose
// blocks also take a scale set per half.
template <int MR, bool kHalves>
void half_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, int half,
               __m256 out[MR]) {
  constexpr int kParts = kHalves ? 2 : 1, kRun = kHalves ? 2 : 8;
  const int64_t blocks = x.k / 32, block_bytes = int8_panel_block_bytes(kHalves);
  const int8_t* q = x.q + row0 * x.k;
  const float* d = x.d + row0 * blocks;
  const float* xsum = kHalves ? x.sum16 + row0 * 2 * blocks : x.sum32 + row0 * blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r = 0; r < MR; ++r) out[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * block_bytes;
    for (int h = 0; h < kParts; ++h) {
      __m256i isum[MR];
      for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
      for (int g0 = 8 / kParts * h; g0 < 8 / kParts * (h + 1); g0 += kRun) {
        __m256i run[MR];
        for (int r = 0; r < MR; ++r) run[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int g = g0; g < g0 + kRun; ++g) {
          const __m256i codes =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + g * 64 + 4 * kHalf * half));
          for (int r = 0; r < MR; ++r) {
            const __m256i xs = _mm256_set1_epi32(load_i32(q + r * x.k + 32 * b + 4 * g));
            run[r] = _mm256_add_epi16(run[r], _mm256_maddubs_epi16(codes, xs));
          }
        }
        for (int r = 0; r < MR; ++r)
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(run[r], ones));
      }
      const float* so =
          reinterpret_cast<const float*>(pb + 32 * kInt8PanelCols) + 2 * kInt8PanelCols * h;
      const __m256 s = _mm256_loadu_ps(so + kHalf * half);
      const __m256 o = _mm256_loadu_ps(so + kInt8PanelCols + kHalf * half);
      for (int r = 0; r < MR; ++r) {
        const __m256 scale = _mm256_mul_ps(s, _mm256_set1_ps(d[r * blocks + b]));
        out[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum[r]), out[r]);
        out[r] = _mm256_fmadd_ps(_mm256_set1_ps(xsum[(r * blocks + b) * kParts + h]), o, out[r]);
      }
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

template <int MR, bool kHalves>
void rows_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, float* c, int64_t ldc,
               int nr, bool add) {
  for (int half = 0; half * kHalf < nr; ++half) {
    __m256 out[MR];
    half_pass<MR, kHalves>(x, row0, panel, half, out);
    const int cols = nr - half * kHalf < kHalf ? nr - half * kHalf : kHalf;
    if (cols == kHalf && !add) {
      for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc + kHalf * half, out[r]);
      continue;
    }
    store_half<MR>(out, c + kHalf * half, ldc, cols, add);
  }
}

template <bool kHalves>
void micro_rows(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                int64_t ldc, int nr, bool add) {
  for (int r = 0; r < mr; r += kRowsPerPass) {
    float* cr = c + r * ldc;
    switch (mr - r < kRowsPerPass ? mr - r : kRowsPerPass) {
      case 1:
        rows_pass<1, kHalves>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 2:
        rows_pass<2, kHalves>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 3:
        rows_pass<3, kHalves>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      default:
        rows_pass<4, kHalves>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
    }
  }
}

}  // namespace

void int8_micro_avx2(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                     int64_t ldc, int nr, bool add, bool half_scales) {
  if (half_scales)
    micro_rows<true>(x, row0, mr, panel, c, ldc, nr, add);
  else
    micro_rows<false>(x, row0, mr, panel, c, ldc, nr, add);
}

}  // namespace lmstack::kernels
