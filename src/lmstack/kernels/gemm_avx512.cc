// AVX-512 pieces of the blocked GEMM (driver: gemm_driver.cc): the 14 x 32 f32 microkernel
// and the B packers. Tiling: 14 rows x 2 zmm columns = 28 accumulators + 2 B vectors + one
// broadcast = 31 of 32 registers; per k step 2 B loads and 14 broadcast loads feed 28 FMAs,
// so the two FMA ports, not the load ports, bound it (Goto & van de Geijn 2008, the BLIS
// microkernel). B stored [N, K] (weights) is packed with 16 x 16 in-register transposes,
// converting bf16/f16 to f32 on the way, so the K x N conversion is paid once per call.
#include <immintrin.h>

#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kMr = 14;
constexpr int kNr = 32;

inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1u);
}

// Up to 16 elements of one row of B [N, K] as f32, zero where `mask` is off.
template <WeightType WT>
inline __m512 load_row(const void* b, int64_t at, __mmask16 mask) {
  if constexpr (WT == WeightType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(b) + at);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(b) + at);
    if constexpr (WT == WeightType::kBF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  }
}

// In-place 16 x 16 f32 transpose: r[i] lane j becomes r[j] lane i. Three stages: 32-bit and
// 64-bit interleaves within 128-bit lanes, then a 4 x 4 transpose of the 128-bit lanes.
inline void transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // b[4i + c] lane L = rows 4i..4i+3 at column 4L + c
    const __m512d a0 = _mm512_castps_pd(a[4 * i]), a1 = _mm512_castps_pd(a[4 * i + 1]);
    const __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
    b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
    b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
    b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
    b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {  // column 4L + c takes lane L of b[c], b[4+c], b[8+c], b[12+c]
    const __m512 u0 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x44);
    const __m512 u1 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xee);
    const __m512 u2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x44);
    const __m512 u3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xee);
    r[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(u0, u2, 0xdd);
    r[8 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xdd);
  }
}

// B [N, K] -> panels of 32 columns: each 16-column half is built from 16 x 16 tiles read
// row-wise (contiguous in K) and transposed into k-major order. Every loop over the 16 tile
// registers is fully unrolled with constant indices, or r[] would live on the stack.
template <WeightType WT>
void pack_b_nt_typed(const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                     float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    for (int h = 0; h < 2; ++h) {
      const int64_t first = jp + h * 16;
      const int64_t rows = nc - first < 16 ? nc - first : 16;  // may be <= 0: zero half
      const int64_t row0 = (n0 + first) * ldb + k0;
      for (int64_t kk = 0; kk < kc; kk += 16) {
        const int64_t steps = kc - kk < 16 ? kc - kk : 16;
        const __mmask16 mask = tail_mask(steps);
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          r[i] = i < rows ? load_row<WT>(b, row0 + i * ldb + kk, mask) : _mm512_setzero_ps();
        transpose16(r);
        float* dst = panel + kk * kNr + h * 16;
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q)
          if (q < steps) _mm512_storeu_ps(dst + q * kNr, r[q]);
      }
    }
  }
}

void pack_b_nt(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
               int64_t kc, float* bp) {
  with_float_weight_type(wt,
                         [&]<WeightType WT>() { pack_b_nt_typed<WT>(b, ldb, n0, nc, k0, kc, bp); });
}

// One A panel (MR = 14 rows), ap[kk * 14 + ii] = alpha * op(A)(ii, kk). Row-major A goes
// through the same 16 x 16 transposes as B (the 14 live lanes stored, masked); a scalar
// strided copy here cost ~18% of the GEMM time at N = 256.
void pack_a(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha, float* ap) {
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 keep = static_cast<__mmask16>((1u << kMr) - 1u);
  if (trans) {
    const __mmask16 live = tail_mask(rows);
    for (int64_t kk = 0; kk < k; ++kk)
      _mm512_mask_storeu_ps(ap + kk * kMr, keep,
                            _mm512_mul_ps(va, _mm512_maskz_loadu_ps(live, a + kk * lda)));
    return;
  }
  for (int64_t kk = 0; kk < k; kk += 16) {
    const int64_t steps = k - kk < 16 ? k - kk : 16;
    const __mmask16 mask = tail_mask(steps);
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      r[i] = i < rows ? _mm512_mul_ps(va, _mm512_maskz_loadu_ps(mask, a + i * lda + kk))
                      : _mm512_setzero_ps();
    transpose16(r);
#pragma GCC unroll 16
    for (int q = 0; q < 16; ++q)
      if (q < steps) _mm512_mask_storeu_ps(ap + (kk + q) * kMr, keep, r[q]);
  }
}

// B [K, N] f32 -> panels of 32 columns: plain row copies.
void pack_b_nn(const float* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
               float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    const __mmask16 m0 = tail_mask(nc - jp), m1 = tail_mask(nc - jp - 16);
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* src = b + (k0 + kk) * ldb + n0 + jp;
      _mm512_storeu_ps(panel + kk * kNr, _mm512_maskz_loadu_ps(m0, src));
      _mm512_storeu_ps(panel + kk * kNr + 16, _mm512_maskz_loadu_ps(m1, src + 16));
    }
  }
}

// The 14 x 32 register tile. Longer than the usual function limit on purpose: one loop nest
// whose fully unrolled body must keep all 28 accumulators in registers.
void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
           bool add) {
  __m512 acc[kMr][2];
#pragma GCC unroll 14
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 b0 = _mm512_loadu_ps(bp + kk * kNr);
    const __m512 b1 = _mm512_loadu_ps(bp + kk * kNr + 16);
    const float* a = ap + kk * kMr;
#pragma GCC unroll 14
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
  }
  const __mmask16 m0 = tail_mask(nr), m1 = tail_mask(nr - 16);
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

extern const GemmIsa kGemmIsaAvx512 = {"avx512", kMr, kNr, pack_a, pack_b_nt, pack_b_nn, micro};

}  // namespace lmstack::kernels
