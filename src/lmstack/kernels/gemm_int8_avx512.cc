// The AVX-512 VNNI microkernel of the int8 prefill GEMM (gemm_int8.h): MR rows x 16 columns.
// Per 32-element block, 8 vpdpbusd per row (the panel's 64-byte group of signed codes times the
// row's 4 unsigned activations broadcast) into an int32 accumulator started at the block's
// corrections, then the block's scaling into the f32 accumulator: acc += d_x * (s *
// float(isum)), and + sum32_x * o for types with offsets. 12 rows keep 12 int32 + 12 f32
// accumulators, the group, the corrections and the scales in 28 of the 32 registers. Half-scale
// blocks (Q6_K) sum s * float(isum) over their two halves before the one multiply by d_x, which
// takes 8 more registers: they run 8 rows at a time. Per block and row that is 8 vpdpbusd and 3
// (offsets: 4; halves: 5) other vector operations, which the 512-bit units also run: the fewer,
// the faster (Q6_K with the halves scaled apart, 6: 5-9% slower, BM_QuantPrefill q6_Kx16).
#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "lmstack/kernels/gemm_int8.h"

namespace lmstack::kernels {
namespace {

inline int32_t load_u32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int MR, bool kHalves, bool kOffsets>
void micro(const QuantizedRows& x, int64_t row0, const uint8_t* panel, float* c, int64_t ldc,
           int nr, bool add) {
  static_assert(!(kHalves && kOffsets), "offsets come with whole blocks only (Int8PanelKind)");
  const int64_t blocks = x.k / 32;
  const uint8_t* q = x.qu + row0 * x.k;
  const float* d = x.d + row0 * blocks;
  const int parts = kHalves ? 2 : 1;
  const float* xsum = x.sum32 + row0 * blocks;
  __m512 acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = panel + b * int8_panel_block_bytes(kHalves);
    __m512 scaled[MR];  // s * float(isum), summed over the parts, times d_x once
    for (int h = 0; h < parts; ++h) {
      const __m512i corr = _mm512_loadu_si512(int8_part_corrections(pb, h));
      __m512i isum[MR];
      for (int r = 0; r < MR; ++r) isum[r] = corr;
#pragma GCC unroll 8
      for (int g = 8 / parts * h; g < 8 / parts * (h + 1); ++g) {
        const __m512i codes = _mm512_loadu_si512(pb + g * 64);
        for (int r = 0; r < MR; ++r)
          isum[r] = _mm512_dpbusd_epi32(
              isum[r], _mm512_set1_epi32(load_u32(q + r * x.k + 32 * b + 4 * g)), codes);
      }
      const __m512 s = _mm512_loadu_ps(int8_part_scales(pb, h));
      for (int r = 0; r < MR; ++r)
        scaled[r] = h == 0 ? _mm512_mul_ps(s, _mm512_cvtepi32_ps(isum[r]))
                           : _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(isum[r]), scaled[r]);
    }
    for (int r = 0; r < MR; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(d[r * blocks + b]), scaled[r], acc[r]);
    if (!kOffsets) continue;
    const __m512 o = _mm512_loadu_ps(int8_part_offsets(pb, 0));
    for (int r = 0; r < MR; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(xsum[r * blocks + b]), o, acc[r]);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << nr) - 1u);
  for (int r = 0; r < MR; ++r) {
    float* out = c + r * ldc;
    __m512 v = acc[r];
    if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, out));
    _mm512_mask_storeu_ps(out, mask, v);
  }
}

using MicroFn = void(const QuantizedRows&, int64_t, const uint8_t*, float*, int64_t, int, bool);

// micro<1..12> of one panel kind, so every loop over rows unrolls.
template <bool kHalves, bool kOffsets, int... I>
constexpr std::array<MicroFn*, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
  return {micro<I + 1, kHalves, kOffsets>...};
}
template <bool kHalves, bool kOffsets>
constexpr auto kMicros =
    micro_table<kHalves, kOffsets>(std::make_integer_sequence<int, kInt8MicroRows>());

}  // namespace

void int8_micro_avx512_vnni(const QuantizedRows& x, int64_t row0, int mr, const uint8_t* panel,
                            float* c, int64_t ldc, int nr, bool add, Int8PanelKind kind) {
  if (mr < 1 || mr > kInt8MicroRows) return;
  // Half-scale blocks keep a third set of MR vectors (the parts' scaled sums), which only 8
  // rows leave registers for: more rows run as 8, then the rest.
  constexpr int kHalvesRows = 8;
  if (kind.halves && mr > kHalvesRows) {
    int8_micro_avx512_vnni(x, row0, kHalvesRows, panel, c, ldc, nr, add, kind);
    return int8_micro_avx512_vnni(x, row0 + kHalvesRows, mr - kHalvesRows, panel,
                                  c + kHalvesRows * ldc, ldc, nr, add, kind);
  }
  const auto& micros = kind.halves    ? kMicros<true, false>
                       : kind.offsets ? kMicros<false, true>
                                      : kMicros<false, false>;  // plain or wide
  micros[mr - 1](x, row0, panel, c, ldc, nr, add);
}

}  // namespace lmstack::kernels
