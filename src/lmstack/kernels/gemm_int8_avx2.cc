// The AVX2 microkernel of the int8 prefill GEMM (gemm_int8.h), for CPUs without VNNI: per
// 32-element block, 8 vpmaddubsw per row and 8 columns (the row's 4 unsigned activations
// broadcast times the panel group's half of signed codes), summed in int16, then one vpmaddwd
// against ones widens each column's pairs to int32 onto the block's corrections, and the
// block's scaling follows as in the VNNI kernel: acc += (d_x * s) * float(isum) (+ sum_x * o).
//
// int16 is exact for 4-bit codes: a vpmaddubsw lane is two products |code| <= 8 times u <= 255,
// and 8 groups add 16 of them, 16 * 8 * 255 = 32,640 < 2^15. Q6_K's 6-bit codes (|code| <= 32)
// are widened every 2 groups instead (4 * 32 * 255 = 32,640). Q8_0's 8-bit codes could not be
// summed even once that way (2 * 128 * 255), so for it (Int8PanelKind::wide) each group
// multiplies |code| by the signed activation carrying code's sign (vpsignb; 2 * 128 * 127 <
// 2^15) and widens at once: 32 multiply-adds per vpmaddubsw + vpmaddwd pair, where the f32
// path's FMAs do 8 each.
//
// 16 ymm registers: MR rows keep MR int16 and MR f32 accumulators plus the codes, the ones and
// the scale pair, so one call runs 4 rows over one half (8 columns) of the panel at a time.
#include <immintrin.h>

#include <cstring>

#include "lmstack/kernels/gemm_int8.h"
#include "lmstack/kernels/pin.h"

namespace lmstack::kernels {
namespace {

constexpr int kRowsPerPass = 4;
constexpr int kHalf = kInt8PanelCols / 2;

template <typename T>
inline int32_t load_4(const T* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// isum[r] += the int32 sums of rows [0, MR) against groups [g0, g1) of one half of a block's
// codes at pb: kWide, 8-bit codes by sign against q, widened per group; else kRun groups at a
// time in int16 against qu.
template <int MR, bool kWide, int kRun>
inline void part_sums(const int8_t* q, const uint8_t* qu, int64_t ldq, const uint8_t* pb, int g0,
                      int g1, __m256i isum[MR]) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kWide) {
#pragma GCC unroll 8
    for (int g = g0; g < g1; ++g) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + g * 64));
      const __m256i mag = _mm256_abs_epi8(codes);
      for (int r = 0; r < MR; ++r) {
        const __m256i xs = _mm256_set1_epi32(load_4(q + r * ldq + 4 * g));
        const __m256i pairs = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(xs, codes));
        isum[r] = pin(_mm256_add_epi32(isum[r], _mm256_madd_epi16(pairs, ones)));  // as run[]
      }
    }
    return;
  }
#pragma GCC unroll 8
  for (int gr = g0; gr < g1; gr += kRun) {
    __m256i run[MR];
    for (int r = 0; r < MR; ++r) run[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = gr; g < gr + kRun; ++g) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + g * 64));
      for (int r = 0; r < MR; ++r) {
        const __m256i xs = _mm256_set1_epi32(load_4(qu + r * ldq + 4 * g));
        // pinned (pin.h): GCC would otherwise reassociate the int16 sums into a tree over all
        // groups, keeping every product live and spilling the accumulators (AVX2 Q4_0 prefill
        // 246-275 -> 323-331 GFLOP/s with the pin, BM_QuantPrefill M=512).
        run[r] = pin(_mm256_add_epi16(run[r], _mm256_maddubs_epi16(xs, codes)));
      }
    }
    for (int r = 0; r < MR; ++r) {
      isum[r] = pin(_mm256_add_epi32(isum[r], _mm256_madd_epi16(run[r], ones)));
    }
  }
}

// Rows [row0, row0 + MR) against columns [8 half, 8 half + 8) of the panel, into out[r][0..8).
template <int MR, bool kHalves, bool kOffsets, bool kWide>
void half_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, int half,
               __m256 out[MR]) {
  static_assert(!(kHalves && kOffsets), "offsets come with whole blocks only (Int8PanelKind)");
  constexpr int kParts = kHalves ? 2 : 1, kRun = kWide ? 1 : kHalves ? 2 : 8;
  const int64_t blocks = x.k / 32, block_bytes = int8_panel_block_bytes(kHalves);
  const int8_t* q = x.q + row0 * x.k;
  const uint8_t* qu = x.qu + row0 * x.k;
  const float* d = x.d + row0 * blocks;
  const float* xsum = x.sum32 + row0 * blocks;
  for (int r = 0; r < MR; ++r) out[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * block_bytes + 4 * kHalf * half;
    const uint8_t* parts = panel + b * block_bytes;  // the part vectors' lanes of this half
    for (int h = 0; h < kParts; ++h) {
      __m256i isum[MR];
      // Signed activations (kWide) need no correction.
      const __m256i corr = kWide ? _mm256_setzero_si256()
                                 : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                       int8_part_corrections(parts, h) + kHalf * half));
      for (int r = 0; r < MR; ++r) isum[r] = corr;
      part_sums<MR, kWide, kRun>(q + 32 * b, qu + 32 * b, x.k, pb, 8 / kParts * h,
                                 8 / kParts * (h + 1), isum);
      const __m256 s = _mm256_loadu_ps(int8_part_scales(parts, h) + kHalf * half);
      for (int r = 0; r < MR; ++r) {
        const __m256 scale = _mm256_mul_ps(s, _mm256_set1_ps(d[r * blocks + b]));
        out[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(isum[r]), out[r]);
      }
      if constexpr (!kOffsets) continue;
      const __m256 o = _mm256_loadu_ps(int8_part_offsets(parts, 0) + kHalf * half);
      for (int r = 0; r < MR; ++r)
        out[r] = _mm256_fmadd_ps(_mm256_set1_ps(xsum[r * blocks + b]), o, out[r]);
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

template <int MR, bool kHalves, bool kOffsets, bool kWide>
void rows_pass(const QuantizedRows& x, int64_t row0, const uint8_t* panel, float* c, int64_t ldc,
               int nr, bool add) {
  for (int half = 0; half * kHalf < nr; ++half) {
    __m256 out[MR];
    half_pass<MR, kHalves, kOffsets, kWide>(x, row0, panel, half, out);
    const int cols = nr - half * kHalf < kHalf ? nr - half * kHalf : kHalf;
    if (cols == kHalf && !add) {
      for (int r = 0; r < MR; ++r) _mm256_storeu_ps(c + r * ldc + kHalf * half, out[r]);
      continue;
    }
    store_half<MR>(out, c + kHalf * half, ldc, cols, add);
  }
}

template <bool kHalves, bool kOffsets, bool kWide>
void micro_rows(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                int64_t ldc, int nr, bool add) {
  for (int r = 0; r < mr; r += kRowsPerPass) {
    float* cr = c + r * ldc;
    switch (mr - r < kRowsPerPass ? mr - r : kRowsPerPass) {
      case 1:
        rows_pass<1, kHalves, kOffsets, kWide>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 2:
        rows_pass<2, kHalves, kOffsets, kWide>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      case 3:
        rows_pass<3, kHalves, kOffsets, kWide>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
      default:
        rows_pass<4, kHalves, kOffsets, kWide>(x, row0 + r, panel, cr, ldc, nr, add);
        break;
    }
  }
}

}  // namespace

void int8_micro_avx2(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                     int64_t ldc, int nr, bool add, Int8PanelKind kind) {
  if (kind.wide)
    micro_rows<false, false, true>(x, row0, mr, panel, c, ldc, nr, add);
  else if (kind.halves)
    micro_rows<true, false, false>(x, row0, mr, panel, c, ldc, nr, add);
  else if (kind.offsets)
    micro_rows<false, true, false>(x, row0, mr, panel, c, ldc, nr, add);
  else
    micro_rows<false, false, false>(x, row0, mr, panel, c, ldc, nr, add);
}

}  // namespace lmstack::kernels
