// The AVX-512 VNNI microkernel of the int8 prefill GEMM (gemm_int8.h): MR rows x 16 columns.
// Per 32-element block, 8 vpdpbusd per row (the panel's 64-byte group times the row's 4
// int8 activations broadcast) into a fresh int32 accumulator, then the block's scaling into
// the f32 accumulator: acc += (d_x * s) * float(isum) + sum32_x * o. 12 rows keep 12 int32 +
// 12 f32 accumulators, the group, the scales and offsets in 28 of the 32 registers. Half-scale
// blocks (Q6_K) apply their first half's scale after group 3 and the second's after group 7,
// each with the half's activation sum (sum16).
#include <immintrin.h>

#include <cstring>

#include "lmstack/kernels/gemm_int8.h"

namespace lmstack::kernels {
namespace {

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int MR, bool kHalves>
void micro(const QuantizedRows& x, int64_t row0, const uint8_t* panel, float* c, int64_t ldc,
           int nr, bool add) {
  const int64_t blocks = x.k / 32;
  const int8_t* q = x.q + row0 * x.k;
  const float* d = x.d + row0 * blocks;
  // Per half (or block) its activation sum: sum16 has 2 per block, sum32 one.
  const int parts = kHalves ? 2 : 1;
  const float* xsum = kHalves ? x.sum16 + row0 * 2 * blocks : x.sum32 + row0 * blocks;
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * int8_panel_block_bytes(kHalves);
    for (int h = 0; h < parts; ++h) {
      __m512i isum[MR];
      for (int r = 0; r < MR; ++r) isum[r] = _mm512_setzero_si512();
      for (int g = 8 / parts * h; g < 8 / parts * (h + 1); ++g) {
        const __m512i codes = _mm512_loadu_si512(pb + g * 64);
        for (int r = 0; r < MR; ++r)
          isum[r] = _mm512_dpbusd_epi32(isum[r], codes,
                                        _mm512_set1_epi32(load_i32(q + r * x.k + 32 * b + 4 * g)));
      }
      const auto* so =
          reinterpret_cast<const float*>(pb + 32 * kInt8PanelCols) + 2 * kInt8PanelCols * h;
      const __m512 s = _mm512_loadu_ps(so), o = _mm512_loadu_ps(so + kInt8PanelCols);
      for (int r = 0; r < MR; ++r) {
        const __m512 scale = _mm512_mul_ps(s, _mm512_set1_ps(d[r * blocks + b]));
        acc[r] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(isum[r]), acc[r]);
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xsum[(r * blocks + b) * parts + h]), o, acc[r]);
      }
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1u);
  for (int r = 0; r < MR; ++r) {
    float* out = c + r * ldc;
    __m512 v = acc[r];
    if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out));
    _mm512_mask_storeu_ps(out, mask, v);
  }
}

template <bool kHalves>
void micro_rows(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel, float* c,
                int64_t ldc, int nr, bool add) {
  static_assert(kInt8MicroRows == 12);
  switch (mr) {  // one instantiation per row count, so every loop over rows unrolls
    case 1:
      return micro<1, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 2:
      return micro<2, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 3:
      return micro<3, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 4:
      return micro<4, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 5:
      return micro<5, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 6:
      return micro<6, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 7:
      return micro<7, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 8:
      return micro<8, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 9:
      return micro<9, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 10:
      return micro<10, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 11:
      return micro<11, kHalves>(x, row0, panel, c, ldc, nr, add);
    case 12:
      return micro<12, kHalves>(x, row0, panel, c, ldc, nr, add);
    default:
      return;
  }
}

}  // namespace

void int8_micro_avx512_vnni(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel,
                            float* c, int64_t ldc, int nr, bool add, bool half_scales) {
  if (half_scales)
    micro_rows<true>(x, row0, mr, panel, c, ldc, nr, add);
  else
    micro_rows<false>(x, row0, mr, panel, c, ldc, nr, add);
}

}  // namespace lmstack::kernels
