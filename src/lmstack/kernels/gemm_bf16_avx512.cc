// AVX512_BF16 pieces of the bf16 GEMM (driver: gemm_bf16_driver.cc): packers that round f32 (or
// copy bf16) operands into k-pair panels and the 14 x 32 microkernel on vdpbf16ps
// (_mm512_dpbf16_ps), which multiplies each 32-bit lane's pair of bf16 from A and from B and
// adds both products to an f32 lane: twice the f32 FMA's flops per instruction, so on Zen 4
// (doctor: 234 GFLOP/s f32 FMA, ~460 vdpbf16ps) the bf16 product can run near twice as fast.
// Panels hold "pairs": one uint32_t per (row or column, k pair), step 2p in the low half and
// 2p + 1 in the high half; an odd k's last pair has a zero high half. f32 -> bf16 rounds to
// nearest even (vcvtne2ps2bf16), as PyTorch's autocast does. The tiling, register budget and
// 16 x 16 transposes are those of the f32 kernel (gemm_avx512.cc), on pairs instead of floats.
#include <immintrin.h>

#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kMr = 14;
constexpr int kNr = 32;

inline __mmask16 mask16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1u);
}

inline __mmask32 mask32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu)
                 : static_cast<__mmask32>((1u << (n > 0 ? n : 0)) - 1u);
}

// Up to 32 consecutive k steps of one row (zero past `steps`) as 16 pairs: f32 rounded to
// bf16, bf16 copied.
template <WeightType WT>
inline __m512i load_pairs(const void* src, int64_t at, int64_t steps, __m512 scale) {
  if constexpr (WT == WeightType::kBF16) {
    return _mm512_maskz_loadu_epi16(mask32(steps), static_cast<const uint16_t*>(src) + at);
  } else {
    const float* p = static_cast<const float*>(src) + at;
    const __m512 lo = _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(mask16(steps), p));
    const __m512 hi = _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(mask16(steps - 16), p + 16));
    return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
  }
}

// Up to 16 consecutive elements (zero where `mask` is off) as bf16 in the low half of each
// 32-bit lane.
template <WeightType WT>
inline __m512i load_low_halves(const void* src, int64_t at, __mmask16 mask, __m512 scale) {
  if constexpr (WT == WeightType::kBF16) {
    return _mm512_cvtepu16_epi32(
        _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(src) + at));
  } else {
    const __m512 v =
        _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(mask, static_cast<const float*>(src) + at));
    return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
}

// Pairs from two rows k = 2p (low) and 2p + 1 (high; null: zero), 16 columns.
template <WeightType WT>
inline __m512i interleave_rows(const void* row0, const void* row1, int64_t at, __mmask16 mask,
                               __m512 scale) {
  const __m512i lo = load_low_halves<WT>(row0, at, mask, scale);
  if (!row1) return lo;
  return _mm512_or_si512(lo, _mm512_slli_epi32(load_low_halves<WT>(row1, at, mask, scale), 16));
}

// In-place 16 x 16 transpose of 32-bit lanes (the f32 kernel's transpose16, on pairs).
inline void transpose16(__m512i r[16]) {
  __m512i a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i u0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44);
    const __m512i u1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
    const __m512i u2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44);
    const __m512i u3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
}

// `rows` (<= 16) rows contiguous in k (row i at src + at + i * ld), k steps [0, k), into
// pair-major order: dst[p * dst_stride + i] = pair p of row i, for i < `keep` lanes.
template <WeightType WT>
void pack_rows_k_contiguous(const void* src, int64_t at, int64_t ld, int64_t rows, int64_t k,
                            __m512 scale, uint32_t* dst, int64_t dst_stride, __mmask16 keep) {
  for (int64_t kk = 0; kk < k; kk += 32) {
    const int64_t steps = k - kk < 32 ? k - kk : 32, pairs = (steps + 1) / 2;
    __m512i r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] =
          i < rows ? load_pairs<WT>(src, at + i * ld + kk, steps, scale) : _mm512_setzero_si512();
    transpose16(r);
    uint32_t* out = dst + kk / 2 * dst_stride;
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q)
      if (q < pairs) _mm512_mask_storeu_epi32(out + q * dst_stride, keep, r[q]);
  }
}

// One A panel, ap[p * 14 + ii] = pair p of row ii of alpha * op(A).
void pack_a(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha,
            uint32_t* ap) {
  const __m512 scale = _mm512_set1_ps(alpha);
  const __mmask16 keep = mask16(kMr);
  if (!trans) {
    pack_rows_k_contiguous<WeightType::kF32>(a, 0, lda, rows, k, scale, ap, kMr, keep);
    return;
  }
  const __mmask16 live = mask16(rows);
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const float* row1 = 2 * p + 1 < k ? a + (2 * p + 1) * lda : nullptr;
    _mm512_mask_storeu_epi32(
        ap + p * kMr, keep,
        interleave_rows<WeightType::kF32>(a + 2 * p * lda, row1, 0, live, scale));
  }
}

// B [N, K] -> panels of 32 columns, bp[p * 32 + jj], each 16-column half from 16 x 32 tiles.
template <WeightType WT>
void pack_b_nt_typed(const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                     uint32_t* bp) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const int64_t panel_pairs = (kc + 1) / 2 * kNr;
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    uint32_t* panel = bp + jp / kNr * panel_pairs;
    for (int h = 0; h < 2; ++h) {
      const int64_t first = jp + h * 16;
      const int64_t rows = nc - first < 16 ? nc - first : 16;  // may be <= 0: zero half
      pack_rows_k_contiguous<WT>(b, (n0 + first) * ldb + k0, ldb, rows, kc, one, panel + h * 16,
                                 kNr, mask16(16));
    }
  }
}

void pack_b_nt(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
               int64_t kc, uint32_t* bp) {
  if (wt == WeightType::kBF16)
    pack_b_nt_typed<WeightType::kBF16>(b, ldb, n0, nc, k0, kc, bp);
  else  // kF32; gemm_bf16.cc passes no other type
    pack_b_nt_typed<WeightType::kF32>(b, ldb, n0, nc, k0, kc, bp);
}

// B [K, N] -> panels of 32 columns: each pair interleaves two rows of B.
template <WeightType WT>
void pack_b_nn_typed(const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                     uint32_t* bp) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const int64_t elem = WT == WeightType::kBF16 ? 2 : 4;
  const auto* base = static_cast<const char*>(b);
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    uint32_t* panel = bp + jp / kNr * pairs * kNr;
    const __mmask16 m0 = mask16(nc - jp), m1 = mask16(nc - jp - 16);
    for (int64_t p = 0; p < pairs; ++p) {
      const char* row0 = base + (k0 + 2 * p) * ldb * elem;
      const char* row1 = 2 * p + 1 < kc ? row0 + ldb * elem : nullptr;
      _mm512_storeu_si512(panel + p * kNr, interleave_rows<WT>(row0, row1, n0 + jp, m0, one));
      _mm512_storeu_si512(panel + p * kNr + 16,
                          interleave_rows<WT>(row0, row1, n0 + jp + 16, m1, one));
    }
  }
}

void pack_b_nn(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
               int64_t kc, uint32_t* bp) {
  if (wt == WeightType::kBF16)
    pack_b_nn_typed<WeightType::kBF16>(b, ldb, n0, nc, k0, kc, bp);
  else
    pack_b_nn_typed<WeightType::kF32>(b, ldb, n0, nc, k0, kc, bp);
}

// The 14 x 32 register tile: per pair 2 B loads and 14 pair broadcasts feed 28 vdpbf16ps.
// Longer than the usual function limit on purpose: one loop nest whose fully unrolled body
// must keep all 28 accumulators in registers.
void micro(int64_t kc, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int mr,
           int nr, bool add) {
  __m512 acc[kMr][2];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + p * kNr));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bp + p * kNr + 16));
    const uint32_t* a = ap + p * kMr;
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512bh av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(a[i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
  const __mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (add) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, row));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

}  // namespace

extern const GemmBf16Isa kGemmBf16IsaAvx512 = {"avx512_bf16", kMr,       kNr,  pack_a,
                                               pack_b_nt,     pack_b_nn, micro};

}  // namespace lmstack::kernels
