// AVX-512 GEMV for decode: y[r, j] = x[r, :] · w[j, :] for a few rows r (M <= 6 per pass).
// Bandwidth-bound, so the design is about the weight stream: a block of R = 4 consecutive
// weight rows (one contiguous run of 4K elements) is read once, 16 elements per step,
// widened to f32 in registers (bf16: zero-extend and shift left 16; f16: vcvtph2ps) and
// multiplied into M x R accumulators with f32 FMA (vdpbf16ps is slower than FMA on this
// machine and would need x in bf16). The next row block is software-prefetched one block
// ahead so every DRAM page is in flight before the hardware prefetcher would find it.
#include <immintrin.h>

#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kRows = 4;  // weight rows per block

template <WeightType WT>
inline __m512 load_w(const void* w, int64_t at) {
  if constexpr (WT == WeightType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(w) + at);
  } else {
    const __m256i h =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + at));
    if constexpr (WT == WeightType::kBF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  }
}

template <WeightType WT>
inline __m512 load_w_tail(const void* w, int64_t at, __mmask16 mask) {
  if constexpr (WT == WeightType::kF32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(w) + at);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(w) + at);
    if constexpr (WT == WeightType::kBF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  }
}

template <WeightType WT>
constexpr int64_t kElemBytes = WT == WeightType::kF32 ? 4 : 2;

// [Σa0, Σa1, Σa2, Σa3] in 13 shuffles and adds, where four _mm512_reduce_add_ps take ~40:
// with K = 576 (smollm) a block's 36 steps of 24 FMAs had 24 full reductions after them.
// Interleave pairs (each 128-bit lane: partial sums of a0, a1, a0, a1), combine the pairs
// (each lane: a0, a1, a2, a3), then add the four lanes.
inline __m128 reduce4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
  const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
  const __m512 s = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// One block: rows [j, j + R) of w against rows [0, MT) of x; writes MT x R outputs.
template <WeightType WT, int MT, int R>
void gemv_block(const void* w, int64_t k, int64_t j, const float* x, float* y, int64_t ldy,
                const float* bias, bool accumulate, bool prefetch_next) {
  __m512 acc[MT][R];
  for (int r = 0; r < MT; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = _mm512_setzero_ps();
  const char* next = static_cast<const char*>(w) + (j + R) * k * kElemBytes<WT>;
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 xv[MT];
    for (int r = 0; r < MT; ++r) xv[r] = _mm512_loadu_ps(x + r * k + i);
    for (int c = 0; c < R; ++c) {
      if (prefetch_next && (i % (64 / kElemBytes<WT>)) == 0)  // one prefetch per 64 B line
        _mm_prefetch(next + (c * k + i) * kElemBytes<WT>, _MM_HINT_T0);
      const __m512 wv = load_w<WT>(w, (j + c) * k + i);
      for (int r = 0; r < MT; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  if (i < k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - i)) - 1u);
    __m512 xv[MT];
    for (int r = 0; r < MT; ++r) xv[r] = _mm512_maskz_loadu_ps(mask, x + r * k + i);
    for (int c = 0; c < R; ++c) {
      const __m512 wv = load_w_tail<WT>(w, (j + c) * k + i, mask);
      for (int r = 0; r < MT; ++r) acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  if constexpr (R == 4) {
    for (int r = 0; r < MT; ++r) {
      __m128 v = reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
      if (bias) v = _mm_add_ps(v, _mm_loadu_ps(bias + j));
      float* out = y + r * ldy + j;
      if (accumulate) v = _mm_add_ps(v, _mm_loadu_ps(out));
      _mm_storeu_ps(out, v);
    }
  } else {
    for (int r = 0; r < MT; ++r) {
      for (int c = 0; c < R; ++c) {
        float v = _mm512_reduce_add_ps(acc[r][c]);
        if (bias) v += bias[j + c];
        float& out = y[r * ldy + j + c];
        out = accumulate ? out + v : v;
      }
    }
  }
}

// One block of R weight rows at j against all M activation rows, in balanced groups of up to
// 6 (6 x 4 accumulators + 6 x + 1 w of 32 registers; M = 8 runs as 4 + 4, not 6 + 2; against
// groups of 4, M = 12 and 16 ~8% faster). Groups are the inner loop, so the block comes from
// memory once and the later groups read it from L1: with the groups outside the row loop,
// M = 16 streamed all the weights three times (BM_MidM M = 8..16: 1.6-1.9x slower).
template <WeightType WT, int R>
void gemv_block_all_rows(const void* w, int64_t k, int64_t j, const float* x, int64_t m, float* y,
                         int64_t ldy, const float* bias, bool accumulate, bool prefetch_next) {
  const int64_t groups = (m + 5) / 6;
  for (int64_t g = 0, r = 0; g < groups; ++g) {
    const int64_t rows = (m - r + (groups - g) - 1) / (groups - g);
    const float* xr = x + r * k;
    float* yr = y + r * ldy;
    const bool pf = prefetch_next && g == 0;  // the later groups find the next block in flight
    r += rows;
    switch (rows) {
      case 1:
        gemv_block<WT, 1, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
      case 2:
        gemv_block<WT, 2, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
      case 3:
        gemv_block<WT, 3, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
      case 4:
        gemv_block<WT, 4, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
      case 5:
        gemv_block<WT, 5, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
      default:
        gemv_block<WT, 6, R>(w, k, j, xr, yr, ldy, bias, accumulate, pf);
        break;
    }
  }
}

// M = 1: one weight row at a time, front to back with four accumulators (64 elements a
// step), so each thread reads one sequential stream that the hardware prefetcher follows. The
// 4-row blocks above interleave four streams a row apart, which pays for M > 1 (x reuse) but
// at M = 1 measured 26.8 GB/s against 34.1 GB/s for this over smollm-135m's f32 matrices
// (2 threads, Zen 4, one quiet round of a scratch benchmark; docs/bench_peers.md).
template <WeightType WT>
void gemv_rows_m1(const void* w, int64_t k, int64_t n_begin, int64_t n_end, const float* x,
                  float* y, const float* bias, bool accumulate) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const int64_t row = j * k;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= k; i += 64) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_w<WT>(w, row + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), load_w<WT>(w, row + i + 16), a1);
      a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), load_w<WT>(w, row + i + 32), a2);
      a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), load_w<WT>(w, row + i + 48), a3);
    }
    for (; i + 16 <= k; i += 16)
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), load_w<WT>(w, row + i), a0);
    if (i < k) {
      const __mmask16 mask = static_cast<__mmask16>((1u << (k - i)) - 1u);
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x + i), load_w_tail<WT>(w, row + i, mask),
                           a1);
    }
    float v = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    if (bias) v += bias[j];
    y[j] = accumulate ? y[j] + v : v;
  }
}

template <WeightType WT>
void gemv_typed(const void* w, int64_t k, int64_t n_begin, int64_t n_end, const float* x, int64_t m,
                float* y, int64_t ldy, const float* bias, bool accumulate) {
  if (m == 1) {
    gemv_rows_m1<WT>(w, k, n_begin, n_end, x, y, bias, accumulate);
    return;
  }
  int64_t j = n_begin;
  for (; j + kRows <= n_end; j += kRows)
    gemv_block_all_rows<WT, kRows>(w, k, j, x, m, y, ldy, bias, accumulate, j + 2 * kRows <= n_end);
  for (; j < n_end; ++j) gemv_block_all_rows<WT, 1>(w, k, j, x, m, y, ldy, bias, accumulate, false);
}

}  // namespace

void gemv_avx512(WeightType wt, const void* w, int64_t k, int64_t n_begin, int64_t n_end,
                 const float* x, int64_t m, float* y, int64_t ldy, const float* bias,
                 bool accumulate) {
  switch (wt) {
    case WeightType::kF32:
      gemv_typed<WeightType::kF32>(w, k, n_begin, n_end, x, m, y, ldy, bias, accumulate);
      break;
    case WeightType::kBF16:
      gemv_typed<WeightType::kBF16>(w, k, n_begin, n_end, x, m, y, ldy, bias, accumulate);
      break;
    case WeightType::kF16:
      gemv_typed<WeightType::kF16>(w, k, n_begin, n_end, x, m, y, ldy, bias, accumulate);
      break;
    default:  // block-quantized types never reach this kernel (see WeightType)
      break;
  }
}

}  // namespace lmstack::kernels
