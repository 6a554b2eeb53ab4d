// AVX2 inner loops of flash attention (contracts in attention_leaf.h), the fallback for
// machines without AVX-512: 8-lane vectors, register tiles of up to 2 query rows × 4 keys for
// the scores and 2 rows × 4 vectors (32 floats of D) for P·V. D tails use masked loads.
// Legend: R query rows, N keys of a chunk, D head dim.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/attention_leaf.h"
#include "lmstack/kernels/pin.h"

namespace lmstack::kernels {
namespace {

// Lane mask with the first min(remaining, 8) lanes set.
inline __m256i mask_for(int64_t remaining) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const auto r = static_cast<int>(remaining < 8 ? remaining : 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), lanes);
}

// 8 values of a K or V row as f32: an f32 row as is, a bf16 row widened in the register (the
// bits shifted up 16, exact), so decode reads a bf16 pool without a widened copy in L1.
// `tail`: only the first `count` values exist (AVX2 has no masked 16-bit load, so a bf16
// tail goes through a zeroed copy).
inline __m256 load_kv(const float* x, bool tail, __m256i mask, int) {
  return tail ? _mm256_maskload_ps(x, mask) : _mm256_loadu_ps(x);
}
inline __m256 load_kv(const uint16_t* x, bool tail, __m256i, int count) {
  __m128i h;
  if (tail) {
    uint16_t buf[8] = {};
    std::memcpy(buf, x, static_cast<size_t>(count) * sizeof(uint16_t));
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(buf));
  } else {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane i of the result is the sum of the 8 lanes of a[i] (a hadd tree).
inline __m256 reduce_8(const __m256* a) {
  const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
  const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
  // u0 holds per-128-bit-lane sums of a[0..3], u1 of a[4..7]: add the two lanes.
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// One 8-lane step of the R × K dot-product tile at offset e; full steps use plain loads.
template <int R, int K, bool kTail, class T>
__attribute__((always_inline)) inline void dot_step(__m256 (&acc)[R][K], const float* q,
                                                    const T* const* k, int d, int e) {
  const __m256i m = mask_for(d - e);
  __m256 kv[K];
#pragma GCC unroll 16
  for (int j = 0; j < K; ++j) {
    // Kept in a register (pin.h): GCC otherwise folds the load into each row's FMA, loading
    // every key vector R times (10 loads per 8 FMAs at R = 2, load-bound on Zen 4).
    kv[j] = pin(load_kv(k[j] + e, kTail, m, d - e));
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256 qv = kTail ? _mm256_maskload_ps(q + r * d + e, m) : _mm256_loadu_ps(q + r * d + e);
#pragma GCC unroll 16
    for (int j = 0; j < K; ++j) acc[r][j] = _mm256_fmadd_ps(qv, kv[j], acc[r][j]);
  }
}

// R rows × K keys of dot products; the accumulators stay in registers until the reduce.
template <int R, int K, class T>
void dot_tile(float* s, int64_t ld_s, const float* q, const T* const* k, int d) {
  __m256 acc[R][K];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < K; ++j) acc[r][j] = _mm256_setzero_ps();
  int e = 0;
  for (; e + 8 <= d; e += 8) dot_step<R, K, false>(acc, q, k, d, e);
  if (e < d) dot_step<R, K, true>(acc, q, k, d, e);
  if constexpr (K == 4 && R <= 2) {
    // One transposed reduction for the tile (a lone row padded with zeros).
    __m256 flat[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) flat[i] = i < 4 * R ? acc[i / 4 % R][i % 4] : _mm256_setzero_ps();
    const __m256 sums = reduce_8(flat);
    _mm_storeu_ps(s, _mm256_castps256_ps128(sums));
    if constexpr (R > 1) _mm_storeu_ps(s + ld_s, _mm256_extractf128_ps(sums, 1));
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < K; ++j) s[r * ld_s + j] = hsum(acc[r][j]);
  }
}

template <int R, class T>
void dot_rows(float* s, int64_t ld_s, const float* q, const T* const* k, int n, int d) {
  int j = 0;
  for (; j + 4 <= n; j += 4) dot_tile<R, 4, T>(s + j, ld_s, q, k + j, d);
  for (; j < n; ++j) dot_tile<R, 1, T>(s + j, ld_s, q, k + j, d);
}

// Loads vector c of a row: plain for whole vectors, masked for the last one of a ragged D.
template <bool kTail>
__attribute__((always_inline)) inline __m256 load_part(const float* x, __m256i tail_mask,
                                                       bool last) {
  return kTail && last ? _mm256_maskload_ps(x, tail_mask) : _mm256_loadu_ps(x);
}

// o rows (R of them) over NV vectors of 8 starting at e0: o = alpha·o + p·V. kTail: the last
// vector is partial (only one mask register is live, which keeps the tile in 16 registers).
template <int R, int NV, bool kTail, class T>
void accumulate_tile(float* o, const float* alpha, const float* p, int64_t ld_p, const T* const* v,
                     int n, int d, int e0) {
  const int tail_count = d - e0 - 8 * (NV - 1);
  const __m256i tail = mask_for(tail_count);
  __m256 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      acc[r][c] = _mm256_mul_ps(_mm256_set1_ps(alpha[r]),
                                load_part<kTail>(o + r * d + e0 + 8 * c, tail, c == NV - 1));
  for (int j = 0; j < n; ++j) {
    __m256 vv[NV];
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      vv[c] = load_kv(v[j] + e0 + 8 * c, kTail && c == NV - 1, tail, tail_count);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 pr = _mm256_set1_ps(p[r * ld_p + j]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) {
      float* dst = o + r * d + e0 + 8 * c;
      if (kTail && c == NV - 1)
        _mm256_maskstore_ps(dst, tail, acc[r][c]);
      else
        _mm256_storeu_ps(dst, acc[r][c]);
    }
}

template <int R, int NV, class T>
void accumulate_span(float* o, const float* alpha, const float* p, int64_t ld_p, const T* const* v,
                     int n, int d, int e0) {
  if (d - e0 >= 8 * NV)
    accumulate_tile<R, NV, false>(o, alpha, p, ld_p, v, n, d, e0);
  else
    accumulate_tile<R, NV, true>(o, alpha, p, ld_p, v, n, d, e0);
}

template <int R, class T>
void accumulate_rows(float* o, const float* alpha, const float* p, int64_t ld_p, const T* const* v,
                     int n, int d) {
  for (int e0 = 0; e0 < d; e0 += 32) {
    const int vectors = (d - e0 + 7) / 8;
    if (vectors >= 4)
      accumulate_span<R, 4, T>(o, alpha, p, ld_p, v, n, d, e0);
    else if (vectors == 3)
      accumulate_span<R, 3, T>(o, alpha, p, ld_p, v, n, d, e0);
    else if (vectors == 2)
      accumulate_span<R, 2, T>(o, alpha, p, ld_p, v, n, d, e0);
    else
      accumulate_span<R, 1, T>(o, alpha, p, ld_p, v, n, d, e0);
  }
}

template <class T>
void scores(float* s, int64_t ld_s, const float* q, int rows, const T* const* k, int n, int d) {
  int r = 0;
  for (; r + 2 <= rows; r += 2) dot_rows<2>(s + r * ld_s, ld_s, q + r * d, k, n, d);
  if (r < rows) dot_rows<1>(s + r * ld_s, ld_s, q + r * d, k, n, d);
}

template <class T>
void accumulate(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                const T* const* v, int n, int d) {
  int r = 0;
  for (; r + 2 <= rows; r += 2)
    accumulate_rows<2>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
  if (r < rows) accumulate_rows<1>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
}

}  // namespace

void attention_scores_avx2(float* s, int64_t ld_s, const float* q, int rows, const float* const* k,
                           int n, int d) {
  scores(s, ld_s, q, rows, k, n, d);
}

void attention_scores_bf16_avx2(float* s, int64_t ld_s, const float* q, int rows,
                                const uint16_t* const* k, int n, int d) {
  scores(s, ld_s, q, rows, k, n, d);
}

// Whole vectors use plain loads and stores: vmaskmovps is microcoded on AMD Zen (Agner Fog's
// instruction tables list it as many micro-ops there), so masks are kept to the ragged ends.
float attention_softmax_row_avx2(float* s, int n_valid, int n, float* m, float* l) {
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = neg_inf;
  int j = 0;
  for (; j + 8 <= n_valid; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
  if (j < n_valid) {
    const __m256i valid = mask_for(n_valid - j);
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(s + j, valid),
                                                _mm256_castsi256_ps(valid)));
  }
  const float m_old = *m;
  const float chunk_max = hmax(vmax);
  const float m_new = chunk_max > m_old ? chunk_max : m_old;
  const __m256 vm = _mm256_set1_ps(m_new);
  __m256 vsum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n_valid; j += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  for (; j < n; j += 8) {                         // the ragged valid tail, then zeros up to n
    const __m256i valid = mask_for(n_valid - j);  // all clear once j >= n_valid
    const __m256 e = _mm256_and_ps(exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(s + j, valid), vm)),
                                   _mm256_castsi256_ps(valid));
    if (j + 8 <= n)
      _mm256_storeu_ps(s + j, e);
    else
      _mm256_maskstore_ps(s + j, mask_for(n - j), e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const float alpha = std::exp(m_old - m_new);  // e^-inf = 0 on the first chunk
  *l = *l * alpha + hsum(vsum);
  *m = m_new;
  return alpha;
}

void attention_accumulate_avx2(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                               const float* const* v, int n, int d) {
  accumulate(o, alpha, p, ld_p, rows, v, n, d);
}

void attention_accumulate_bf16_avx2(float* o, const float* alpha, const float* p, int64_t ld_p,
                                    int rows, const uint16_t* const* v, int n, int d) {
  accumulate(o, alpha, p, ld_p, rows, v, n, d);
}

// bf16 -> f32 is a 16-bit left shift of each lane; int8 widens to int32, then one f32
// multiply by the row's scale. Whole vectors of 8, then the tail element by element (AVX2
// has no masked 16- or 8-bit loads), with the same single rounding.
void kv_load_bf16_avx2(float* dst, const uint16_t* const* rows, int n, int d) {
  for (int j = 0; j < n; ++j, dst += d) {
    const uint16_t* src = rows[j];
    int e = 0;
    for (; e + 8 <= d; e += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + e));
      const __m256i wide = _mm256_cvtepu16_epi32(h);
      _mm256_storeu_ps(dst + e, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
    }
    for (; e < d; ++e) {
      const uint32_t bits = static_cast<uint32_t>(src[e]) << 16;
      __builtin_memcpy(dst + e, &bits, sizeof(float));
    }
  }
}

void kv_load_i8_avx2(float* dst, const int8_t* const* rows, const float* scales, int n, int d) {
  for (int j = 0; j < n; ++j, dst += d) {
    const int8_t* q = rows[j];
    const float scale = scales[j];
    const __m256 vs = _mm256_set1_ps(scale);
    int e = 0;
    for (; e + 8 <= d; e += 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + e));
      _mm256_storeu_ps(dst + e, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), vs));
    }
    for (; e < d; ++e) dst[e] = static_cast<float>(q[e]) * scale;
  }
}

}  // namespace lmstack::kernels
