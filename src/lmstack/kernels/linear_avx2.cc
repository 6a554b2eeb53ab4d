// AVX2+FMA GEMV for decode (the fallback for machines without AVX-512): the scheme of
// linear_avx512.cc at 8 lanes. A block of 4 weight rows is streamed once, widened to f32 in
// registers (bf16: zero-extend and shift; f16: F16C vcvtph2ps), and FMA'd into M x 4
// accumulators; the K tail (< 8) goes through a zero-padded stack copy since AVX2 has no
// masked 16-bit loads. Compiled for the x86-64-v3 baseline, so no ISA-specific file needed.
#include <immintrin.h>

#include <cstring>

#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kRows = 4;

template <WeightType WT>
inline __m256 load_w8(const void* w, int64_t at) {
  if constexpr (WT == WeightType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(w) + at);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w) + at));
    if constexpr (WT == WeightType::kBF16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}

// The last `n` (< 8) elements at `at`, zero-padded to 8.
template <WeightType WT>
inline __m256 load_w8_tail(const void* w, int64_t at, int64_t n) {
  constexpr size_t kBytes = WT == WeightType::kF32 ? 4 : 2;
  alignas(32) unsigned char buf[8 * kBytes] = {};
  std::memcpy(buf, static_cast<const unsigned char*>(w) + at * static_cast<int64_t>(kBytes),
              static_cast<size_t>(n) * kBytes);
  return load_w8<WT>(buf, 0);
}

inline __m256 load_x8_tail(const float* x, int64_t n) {
  alignas(32) float buf[8] = {};
  std::memcpy(buf, x, static_cast<size_t>(n) * sizeof(float));
  return _mm256_load_ps(buf);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [Σa0, Σa1, Σa2, Σa3] in 5 operations (three horizontal adds leave each 128-bit lane's
// four sums, one add joins the lanes), where four hsum calls take 20.
inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

template <WeightType WT, int MT, int R>
void gemv_block(const void* w, int64_t k, int64_t j, const float* x, float* y, int64_t ldy,
                const float* bias, bool accumulate) {
  __m256 acc[MT][R];
  for (int r = 0; r < MT; ++r)
    for (int c = 0; c < R; ++c) acc[r][c] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 xv[MT];
    for (int r = 0; r < MT; ++r) xv[r] = _mm256_loadu_ps(x + r * k + i);
    for (int c = 0; c < R; ++c) {
      const __m256 wv = load_w8<WT>(w, (j + c) * k + i);
      for (int r = 0; r < MT; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  if (i < k) {
    __m256 xv[MT];
    for (int r = 0; r < MT; ++r) xv[r] = load_x8_tail(x + r * k + i, k - i);
    for (int c = 0; c < R; ++c) {
      const __m256 wv = load_w8_tail<WT>(w, (j + c) * k + i, k - i);
      for (int r = 0; r < MT; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
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
        float v = hsum(acc[r][c]);
        if (bias) v += bias[j + c];
        float& out = y[r * ldy + j + c];
        out = accumulate ? out + v : v;
      }
    }
  }
}

// One block of R weight rows at j against all M activation rows, two at a time (2 x 4
// accumulators + 2 x + 1 w of 16 registers). The pairs are the inner loop, so the block comes
// from memory once and the later pairs read it from L1 (with the pairs outside the row loop,
// M = 16 streamed all the weights eight times).
template <WeightType WT, int R>
void gemv_block_all_rows(const void* w, int64_t k, int64_t j, const float* x, int64_t m, float* y,
                         int64_t ldy, const float* bias, bool accumulate) {
  for (int64_t r = 0; r < m; r += 2) {
    if (m - r == 1)
      gemv_block<WT, 1, R>(w, k, j, x + r * k, y + r * ldy, ldy, bias, accumulate);
    else
      gemv_block<WT, 2, R>(w, k, j, x + r * k, y + r * ldy, ldy, bias, accumulate);
  }
}

// M = 1: one weight row at a time, front to back with four accumulators (32 elements a step):
// one sequential stream per thread, as linear_avx512.cc's gemv_rows_m1 explains.
template <WeightType WT>
void gemv_rows_m1(const void* w, int64_t k, int64_t n_begin, int64_t n_end, const float* x,
                  float* y, const float* bias, bool accumulate) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const int64_t row = j * k;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load_w8<WT>(w, row + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), load_w8<WT>(w, row + i + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), load_w8<WT>(w, row + i + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), load_w8<WT>(w, row + i + 24), a3);
    }
    for (; i + 8 <= k; i += 8)
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), load_w8<WT>(w, row + i), a0);
    if (i < k)
      a1 = _mm256_fmadd_ps(load_x8_tail(x + i, k - i), load_w8_tail<WT>(w, row + i, k - i), a1);
    float v = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
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
    gemv_block_all_rows<WT, kRows>(w, k, j, x, m, y, ldy, bias, accumulate);
  for (; j < n_end; ++j) gemv_block_all_rows<WT, 1>(w, k, j, x, m, y, ldy, bias, accumulate);
}

}  // namespace

void gemv_avx2(WeightType wt, const void* w, int64_t k, int64_t n_begin, int64_t n_end,
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
