// AVX-512 inner loops of flash attention (contracts in attention_leaf.h). Scores use a
// register tile of up to 4 query rows × 4 keys, each accumulating a 16-lane partial dot
// product over D, so each loaded vector feeds 4 FMAs; P·V uses up to 4 rows × 4 vectors of D
// (64 floats), so each loaded V vector feeds 4 FMAs. D tails use masked loads. Leaf
// functions only: no STL (see norm_avx512.cc).
// Legend: R query rows, N keys of a chunk, D head dim.
#include <immintrin.h>

#include <cstdint>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/attention_leaf.h"

namespace lmstack::kernels {
namespace {

inline __mmask16 mask_for(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

// 16 values of a K or V row as f32: an f32 row as is, a bf16 row widened in the register (the
// bits shifted up 16, exact), so decode reads a bf16 pool without a widened copy in L1.
inline __m512 load_kv(const float* x, __mmask16 m) { return _mm512_maskz_loadu_ps(m, x); }
inline __m512 load_kv(const uint16_t* x, __mmask16 m) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

// Lane i of the result is the sum of the 16 lanes of a[i]: a transpose-and-add tree, 30
// shuffles and 15 adds for 16 sums instead of 16 separate horizontal reductions.
inline __m512 reduce_16(const __m512* a) {
  __m512 t[8], u[4];
  // Per 128-bit lane: pairs (a[2k], a[2k+1]) interleaved, half summed.
  for (int k = 0; k < 8; ++k)
    t[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k], a[2 * k + 1]),
                         _mm512_unpackhi_ps(a[2 * k], a[2 * k + 1]));
  // Per 128-bit lane: the lane sums of a[4k .. 4k+3].
  for (int k = 0; k < 4; ++k)
    u[k] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * k], t[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Add the four 128-bit lanes: first pairwise within u[0..1] and u[2..3], then across.
  const __m512 w0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
  const __m512 w1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, 0x88), _mm512_shuffle_f32x4(w0, w1, 0xdd));
}

// One 16-lane step of the R × K dot-product tile at offset e.
template <int R, int K, class T>
__attribute__((always_inline)) inline void dot_step(__m512 (&acc)[R][K], const float* q,
                                                    const T* const* k, int d, int e, __mmask16 m) {
  __m512 kv[K];
#pragma GCC unroll 16
  for (int j = 0; j < K; ++j) kv[j] = load_kv(k[j] + e, m);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + r * d + e);
#pragma GCC unroll 16
    for (int j = 0; j < K; ++j) acc[r][j] = _mm512_fmadd_ps(qv, kv[j], acc[r][j]);
  }
}

// R rows × K keys of dot products over d. The accumulators stay in registers: nothing takes
// their address until the loop is done (reduce_16 reads a copy).
template <int R, int K, class T>
void dot_tile(float* s, int64_t ld_s, const float* q, const T* const* k, int d) {
  __m512 acc[R][K];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < K; ++j) acc[r][j] = _mm512_setzero_ps();
  int e = 0;
  for (; e + 16 <= d; e += 16) dot_step<R, K>(acc, q, k, d, e, static_cast<__mmask16>(0xffff));
  if (e < d) dot_step<R, K>(acc, q, k, d, e, mask_for(d - e));
  if constexpr (K == 4 && R <= 4) {
    // One transposed reduction for the whole tile, rows past R padded with zeros: for
    // decode's 1-3 rows per kv head this replaces 4-12 separate horizontal sums.
    __m512 flat[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) flat[i] = i < 4 * R ? acc[i / 4 % R][i % 4] : _mm512_setzero_ps();
    const __m512 sums = reduce_16(flat);
    // Lanes 4r .. 4r+3 are row r (the immediates must be literal even without unrolling).
    _mm_storeu_ps(s, _mm512_extractf32x4_ps(sums, 0));
    if constexpr (R > 1) _mm_storeu_ps(s + ld_s, _mm512_extractf32x4_ps(sums, 1));
    if constexpr (R > 2) _mm_storeu_ps(s + 2 * ld_s, _mm512_extractf32x4_ps(sums, 2));
    if constexpr (R > 3) _mm_storeu_ps(s + 3 * ld_s, _mm512_extractf32x4_ps(sums, 3));
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < K; ++j) s[r * ld_s + j] = _mm512_reduce_add_ps(acc[r][j]);
  }
}

template <int R, class T>
void dot_rows(float* s, int64_t ld_s, const float* q, const T* const* k, int n, int d) {
  int j = 0;
  for (; j + 4 <= n; j += 4) dot_tile<R, 4, T>(s + j, ld_s, q, k + j, d);
  for (; j < n; ++j) dot_tile<R, 1, T>(s + j, ld_s, q, k + j, d);
}

// o rows (R of them) over NV vectors of 16 starting at e0: o = alpha·o + p·V.
template <int R, int NV, class T>
void accumulate_tile(float* o, const float* alpha, const float* p, int64_t ld_p, const T* const* v,
                     int n, int d, int e0) {
  __mmask16 masks[NV];
#pragma GCC unroll 16
  for (int c = 0; c < NV; ++c) masks[c] = mask_for(d - e0 - 16 * c);
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 a = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      acc[r][c] = _mm512_mul_ps(a, _mm512_maskz_loadu_ps(masks[c], o + r * d + e0 + 16 * c));
  }
  for (int j = 0; j < n; ++j) {
    __m512 vv[NV];
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) vv[c] = load_kv(v[j] + e0 + 16 * c, masks[c]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 pr = _mm512_set1_ps(p[r * ld_p + j]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      _mm512_mask_storeu_ps(o + r * d + e0 + 16 * c, masks[c], acc[r][c]);
}

template <int R, class T>
void accumulate_rows(float* o, const float* alpha, const float* p, int64_t ld_p, const T* const* v,
                     int n, int d) {
  for (int e0 = 0; e0 < d; e0 += 64) {
    const int vectors = (d - e0 + 15) / 16;
    if (vectors >= 4)
      accumulate_tile<R, 4, T>(o, alpha, p, ld_p, v, n, d, e0);
    else if (vectors == 3)
      accumulate_tile<R, 3, T>(o, alpha, p, ld_p, v, n, d, e0);
    else if (vectors == 2)
      accumulate_tile<R, 2, T>(o, alpha, p, ld_p, v, n, d, e0);
    else
      accumulate_tile<R, 1, T>(o, alpha, p, ld_p, v, n, d, e0);
  }
}

template <class T>
void scores(float* s, int64_t ld_s, const float* q, int rows, const T* const* k, int n, int d) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) dot_rows<4>(s + r * ld_s, ld_s, q + r * d, k, n, d);
  if (rows - r == 3) dot_rows<3>(s + r * ld_s, ld_s, q + r * d, k, n, d);
  if (rows - r == 2) dot_rows<2>(s + r * ld_s, ld_s, q + r * d, k, n, d);
  if (rows - r == 1) dot_rows<1>(s + r * ld_s, ld_s, q + r * d, k, n, d);
}

template <class T>
void accumulate(float* o, const float* alpha, const float* p, int64_t ld_p, int rows,
                const T* const* v, int n, int d) {
  int r = 0;
  for (; r + 4 <= rows; r += 4)
    accumulate_rows<4>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
  if (rows - r == 3) accumulate_rows<3>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
  if (rows - r == 2) accumulate_rows<2>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
  if (rows - r == 1) accumulate_rows<1>(o + r * d, alpha + r, p + r * ld_p, ld_p, v, n, d);
}

}  // namespace

void attention_scores_avx512(float* s, int64_t ld_s, const float* q, int rows,
                             const float* const* k, int n, int d) {
  scores(s, ld_s, q, rows, k, n, d);
}

void attention_scores_bf16_avx512(float* s, int64_t ld_s, const float* q, int rows,
                                  const uint16_t* const* k, int n, int d) {
  scores(s, ld_s, q, rows, k, n, d);
}

float attention_softmax_row_avx512(float* s, int n_valid, int n, float* m, float* l) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = neg_inf;
  for (int j = 0; j < n_valid; j += 16)
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, mask_for(n_valid - j), s + j));
  const float m_old = *m;
  const float chunk_max = _mm512_reduce_max_ps(vmax);
  const float m_new = chunk_max > m_old ? chunk_max : m_old;
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 vsum = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    const __mmask16 valid = j < n_valid ? mask_for(n_valid - j) : static_cast<__mmask16>(0);
    const __m512 e = _mm512_maskz_mov_ps(
        valid, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, s + j), vm)));
    _mm512_mask_storeu_ps(s + j, mask_for(n - j), e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const float alpha = __builtin_expf(m_old - m_new);  // e^-inf = 0 on the first chunk
  *l = *l * alpha + _mm512_reduce_add_ps(vsum);
  *m = m_new;
  return alpha;
}

void attention_accumulate_avx512(float* o, const float* alpha, const float* p, int64_t ld_p,
                                 int rows, const float* const* v, int n, int d) {
  accumulate(o, alpha, p, ld_p, rows, v, n, d);
}

void attention_accumulate_bf16_avx512(float* o, const float* alpha, const float* p, int64_t ld_p,
                                      int rows, const uint16_t* const* v, int n, int d) {
  accumulate(o, alpha, p, ld_p, rows, v, n, d);
}

// bf16 -> f32 is a 16-bit left shift of each lane; int8 widens to int32, then one f32
// multiply by the row's scale. Masked loads and stores only for the tail of a ragged D: with a
// masked store in every step, perf put most of this loop's time on the store (Zen 4), and
// the loop was a third of AttentionDecodeSmall's bf16 time; unmasked, the kernel ran 6%
// faster (before decode read bf16 in place).
void kv_load_bf16_avx512(float* dst, const uint16_t* const* rows, int n, int d) {
  const auto widen = [](__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  };
  for (int j = 0; j < n; ++j, dst += d) {
    int e = 0;
    for (; e + 16 <= d; e += 16)
      _mm512_storeu_ps(dst + e,
                       widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[j] + e))));
    if (e < d) {
      const __mmask16 m = mask_for(d - e);
      _mm512_mask_storeu_ps(dst + e, m, widen(_mm256_maskz_loadu_epi16(m, rows[j] + e)));
    }
  }
}

void kv_load_i8_avx512(float* dst, const int8_t* const* rows, const float* scales, int n, int d) {
  for (int j = 0; j < n; ++j, dst += d) {
    const __m512 vs = _mm512_set1_ps(scales[j]);
    const auto widen = [&](__m128i b) {
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), vs);
    };
    int e = 0;
    for (; e + 16 <= d; e += 16)
      _mm512_storeu_ps(dst + e,
                       widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[j] + e))));
    if (e < d) {
      const __mmask16 m = mask_for(d - e);
      _mm512_mask_storeu_ps(dst + e, m, widen(_mm_maskz_loadu_epi8(m, rows[j] + e)));
    }
  }
}

}  // namespace lmstack::kernels
