// AVX2+FMA pieces of the blocked GEMM (driver: gemm_driver.cc), for machines without
// AVX-512: a 6 x 16 microkernel (12 ymm accumulators + 2 B vectors + one broadcast of 16
// registers; 2 B loads and 6 broadcasts per 12 FMAs) and A/B packers built on 8 x 8
// in-register transposes that convert bf16/f16 to f32 once per call. Compiled for the
// x86-64-v3 baseline (AVX2, FMA, F16C).
#include <immintrin.h>

#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

// Up to 8 elements of one row of B [N, K] (or A) as f32, zero past `n`. A ragged 16-bit
// tail goes through a zeroed stack copy: AVX2 has no masked 16-bit load.
template <WeightType WT>
inline __m256 load_row8(const void* b, int64_t at, int64_t n) {
  if constexpr (WT == WeightType::kF32) {
    const float* src = static_cast<const float*>(b) + at;
    if (n >= 8) return _mm256_loadu_ps(src);
    const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(src, live);
  } else {
    const uint16_t* src = static_cast<const uint16_t*>(b) + at;
    uint16_t tail[8] = {};
    if (n < 8) {
      for (int64_t i = 0; i < n; ++i) tail[i] = src[i];
      src = tail;
    }
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    if constexpr (WT == WeightType::kBF16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}

// In-place 8 x 8 f32 transpose: r[i] lane j becomes r[j] lane i (32-bit and 64-bit
// interleaves within 128-bit lanes, then the lanes swapped across).
inline void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // s[4h + c] = column c (low lane) and c + 4 (high lane)
    s[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    s[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xee);
    s[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    s[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[c + 4] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}

// The low kMr = 6 lanes of v at dst: a 4-lane and a 2-lane plain store (vmaskmovps, the masked
// store, is microcoded on AMD).
inline void store6(float* dst, __m256 v) {
  static_assert(kMr == 6);
  _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
  _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
}

// One A panel, ap[kk * MR + ii] = alpha * op(A)(ii, kk), zero rows past `rows`. Row-major A
// goes through 8 x 8 transposes (6 live lanes stored), as the B packer does.
void pack_a(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha, float* ap) {
  const __m256 va = _mm256_set1_ps(alpha);
  if (trans) {
    for (int64_t kk = 0; kk < k; ++kk)
      store6(ap + kk * kMr, _mm256_mul_ps(va, load_row8<WeightType::kF32>(a, kk * lda, rows)));
    return;
  }
  for (int64_t kk = 0; kk < k; kk += 8) {
    const int64_t steps = k - kk < 8 ? k - kk : 8;
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      r[i] = i < rows ? _mm256_mul_ps(va, load_row8<WeightType::kF32>(a, i * lda + kk, steps))
                      : _mm256_setzero_ps();
    transpose8(r);
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q)
      if (q < steps) store6(ap + (kk + q) * kMr, r[q]);
  }
}

// B [N, K] -> 16-column panels, each 8-column half built from 8 x 8 tiles read row-wise
// (contiguous in K) and transposed into k-major order, converting bf16/f16 on the way.
template <WeightType WT>
void pack_b_nt_typed(const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
                     float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    for (int h = 0; h < 2; ++h) {
      const int64_t first = jp + h * 8;
      const int64_t rows = nc - first < 8 ? nc - first : 8;  // may be <= 0: zero half
      const int64_t row0 = (n0 + first) * ldb + k0;
      for (int64_t kk = 0; kk < kc; kk += 8) {
        const int64_t steps = kc - kk < 8 ? kc - kk : 8;
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          r[i] = i < rows ? load_row8<WT>(b, row0 + i * ldb + kk, steps) : _mm256_setzero_ps();
        transpose8(r);
        float* dst = panel + kk * kNr + h * 8;
#pragma GCC unroll 8
        for (int q = 0; q < 8; ++q)
          if (q < steps) _mm256_storeu_ps(dst + q * kNr, r[q]);
      }
    }
  }
}

void pack_b_nt(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
               int64_t kc, float* bp) {
  with_float_weight_type(wt,
                         [&]<WeightType WT>() { pack_b_nt_typed<WT>(b, ldb, n0, nc, k0, kc, bp); });
}

void pack_b_nn(const float* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
               float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* src = b + (k0 + kk) * ldb + n0 + jp;
      for (int64_t jj = 0; jj < kNr; ++jj) panel[kk * kNr + jj] = jp + jj < nc ? src[jj] : 0.0f;
    }
  }
}

// Stores one 8-wide row piece of n (<= 8) valid lanes, adding the old values if asked.
inline void store8(float* dst, __m256 v, int64_t n, bool add) {
  if (n >= 8) {
    if (add) v = _mm256_add_ps(v, _mm256_loadu_ps(dst));
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  for (int64_t j = 0; j < n; ++j) dst[j] = add ? dst[j] + buf[j] : buf[j];
}

void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
           bool add) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(bp + kk * kNr);
    const __m256 b1 = _mm256_loadu_ps(bp + kk * kNr + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m256 av = _mm256_broadcast_ss(ap + kk * kMr + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {  // constant bounds keep acc[] in registers
    if (i >= mr) break;
    store8(c + i * ldc, acc[i][0], nr, add);
    if (nr > 8) store8(c + i * ldc + 8, acc[i][1], nr - 8, add);
  }
}

}  // namespace

extern const GemmIsa kGemmIsaAvx2 = {"avx2", kMr, kNr, pack_a, pack_b_nt, pack_b_nn, micro};

}  // namespace lmstack::kernels
