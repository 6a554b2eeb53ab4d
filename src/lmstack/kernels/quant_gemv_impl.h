// The quantized GEMV leaf kernels, written once over 256-bit integer SIMD and compiled into
// each ISA file (quant_gemv_avx512.cc twice: with VNNI and without; quant_gemv_avx2.cc) inside
// a per-include namespace QG_NS, all with internal linkage, so no copy leaks into another
// file's code (no include guard on purpose). Before including, define QG_NS and QG_VNNI (1:
// vpdpbusd; 0: vpmaddubsw + vpmaddwd, exact here since |u| <= 128 and |s| <= 127 keep each
// pair sum below 2^15).
//
// Per weight block of 32 and activation row r: isum = sum(u * s) over 8 int32 lanes (u the
// unsigned weight codes, s the int8 activations), acc_r += float(isum) * (w_scale * x_scale)
// lane-wise, and offsets (Q4_0's 8, Q6_K's 32, Q4_K's mins, int4 zero points) are folded in
// through the activation block sums: sum((q - o) x) = sum(q x) - o sum(x). Q4_K, Q6_K and
// int4 take eight blocks at a time instead: their int32 dots reduce together (reduce_8), then
// one convert and one FMA with the eight blocks' scale products as a vector.
#include <immintrin.h>

#include <cstring>

#include "lmstack/kernels/quant_blocks.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {
namespace {
namespace QG_NS {

constexpr int kMaxRows = 4;  // activation rows per pass over a weight row

inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if QG_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}

inline float f16(const uint8_t* p) { return _cvtsh_ss(qblock::load_u16(p)); }

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i load_x(const QuantizedRows& x, int r, int64_t at) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + r * x.k + at));
}

// 16 bytes of Q4_0-style nibbles -> 32 codes: low nibbles (elements 0..15), then high.
inline __m256i unpack_nibbles16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
  return _mm256_and_si256(both, _mm256_set1_epi8(15));
}

// acc[r] += float(dot(u, x block b of row r)) * (scale * d_x[r, b]) for r < MT.
template <int MT>
inline void accumulate_block(__m256 acc[MT], __m256i u, const QuantizedRows& x, int64_t b,
                             float scale) {
  const int64_t nb = x.k / 32;
  for (int r = 0; r < MT; ++r) {
    const __m256i isum = dot_u8s8(_mm256_setzero_si256(), u, load_x(x, r, 32 * b));
    const __m256 s = _mm256_set1_ps(scale * x.d[r * nb + b]);
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), s, acc[r]);
  }
}

// Q8_0: signed weights, so the sign moves onto the activations (|w| * sign(x, w)).
template <int MT>
inline void q8_0_block(__m256 acc[MT], const uint8_t* w, const QuantizedRows& x, int64_t b) {
  const int64_t nb = x.k / 32;
  const __m256i wv = load32(w + 2);
  const __m256i u = _mm256_abs_epi8(wv);
  const float dw = f16(w);
  for (int r = 0; r < MT; ++r) {
    const __m256i s = _mm256_sign_epi8(load_x(x, r, 32 * b), wv);
    const __m256i isum = dot_u8s8(_mm256_setzero_si256(), u, s);
    acc[r] =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * x.d[r * nb + b]), acc[r]);
  }
}

// Two accumulator sets, even and odd blocks, so consecutive blocks' FMAs do not wait on each
// other's 4-cycle latency (one chain capped Q4_0 at ~8 weights per cycle).
template <int MT>
void row_q8_0(const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  const int64_t nb = x.k / 32;
  __m256 acc0[MT], acc1[MT];
  for (int r = 0; r < MT; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, w += 2 * qblock::kQ8_0Bytes) {
    q8_0_block<MT>(acc0, w, x, b);
    q8_0_block<MT>(acc1, w + qblock::kQ8_0Bytes, x, b + 1);
  }
  if (b < nb) q8_0_block<MT>(acc0, w, x, b);
  for (int r = 0; r < MT; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

// Q4_0: codes 0..15 with offset 8. Eight blocks at a time: their f16 scales are gathered into
// one vector and multiplied by the activation scales once, so each block needs just one
// broadcast load of its combined scale; the offset term sum(d_w * sum_x) is a vector FMA.
template <int MT>
void row_q4_0(const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  constexpr int kB = qblock::kQ4_0Bytes;
  const int64_t nb = x.k / 32;
  __m256 acc0[MT], acc1[MT], corr[MT];
  for (int r = 0; r < MT; ++r) acc0[r] = acc1[r] = corr[r] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8, w += 8 * kB) {
    const __m256 dw = _mm256_cvtph_ps(_mm_set_epi16(
        static_cast<short>(qblock::load_u16(w + 7 * kB)),
        static_cast<short>(qblock::load_u16(w + 6 * kB)),
        static_cast<short>(qblock::load_u16(w + 5 * kB)),
        static_cast<short>(qblock::load_u16(w + 4 * kB)),
        static_cast<short>(qblock::load_u16(w + 3 * kB)),
        static_cast<short>(qblock::load_u16(w + 2 * kB)),
        static_cast<short>(qblock::load_u16(w + kB)), static_cast<short>(qblock::load_u16(w))));
    alignas(32) float scale[MT][8];
    for (int r = 0; r < MT; ++r) {
      _mm256_store_ps(scale[r], _mm256_mul_ps(dw, _mm256_loadu_ps(x.d + r * nb + b)));
      corr[r] = _mm256_fmadd_ps(dw, _mm256_loadu_ps(x.sum32 + r * nb + b), corr[r]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const __m256i q = unpack_nibbles16(w + i * kB + 2);
      for (int r = 0; r < MT; ++r) {
        const __m256i isum = dot_u8s8(_mm256_setzero_si256(), q, load_x(x, r, 32 * (b + i)));
        __m256& acc = i % 2 ? acc1[r] : acc0[r];
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_broadcast_ss(&scale[r][i]), acc);
      }
    }
  }
  float tail_corr[MT] = {};
  for (; b < nb; ++b, w += kB) {
    const float d0 = f16(w);
    accumulate_block<MT>(acc0, unpack_nibbles16(w + 2), x, b, d0);
    for (int r = 0; r < MT; ++r) tail_corr[r] += d0 * x.sum32[r * nb + b];
  }
  for (int r = 0; r < MT; ++r)
    out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r])) - 8.0f * (hsum(corr[r]) + tail_corr[r]);
}

// Lane j of the result is the sum of the 8 lanes of a[j] (a hadd tree, 9 instructions for 8
// sums): the per-block integer dots of a super-block, reduced together.
// reduce_8 in two steps: reduce_4 leaves the per-128-bit-lane sums of a[0..3], and
// join_halves adds the lanes of two of them into reduce_8's result.
inline __m256i reduce_4(const __m256i a[4]) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a[0], a[1]), _mm256_hadd_epi32(a[2], a[3]));
}
inline __m256i join_halves(__m256i u0, __m256i u1) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                          _mm256_permute2x128_si256(u0, u1, 0x31));
}
inline __m256i reduce_8(const __m256i a[8]) { return join_halves(reduce_4(a), reduce_4(a + 4)); }

// 8 unsigned bytes (one per sub-block) as 8 floats.
inline __m256 bytes_to_ps(uint64_t v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(v))));
}

// int4_g<G>: groups of G / 32 Q4_0-style chunks sharing one scale s and zero point z, x =
// s (q - z). Eight chunks (256 values) at a time, as Q4_K below: their integer dots reduce
// together, then one convert and one FMA with the vector s_c . d_x[c]; the zero-point term is
// one FMA of (s z)_c with the activations' block sums. A ragged tail (K not a multiple of
// 256) goes chunk by chunk.
template <int MT, int G>
void row_int4(const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  constexpr int kChunks = G / 32, kGroupBytes = qblock::kInt4HeaderBytes + G / 2;
  const int64_t nb = x.k / 32;
  const auto group = [&](int64_t chunk) { return w + chunk / kChunks * kGroupBytes; };
  const auto codes = [&](int64_t chunk) {
    return unpack_nibbles16(group(chunk) + qblock::kInt4HeaderBytes + 16 * (chunk % kChunks));
  };
  __m256 acc[MT], corr[MT];
  for (int r = 0; r < MT; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    alignas(32) float scale[8], scale_zero[8];
    __m256i q[8];
    static_assert(8 % kChunks == 0, "eight chunks hold whole groups");
    for (int c0 = 0; c0 < 8; c0 += kChunks) {
      const uint8_t* g = group(b + c0);  // b + c0 is the group's first chunk
      const float sc = f16(g), sz = sc * static_cast<float>(g[2]);
      for (int c = c0; c < c0 + kChunks; ++c) {
        scale[c] = sc;
        scale_zero[c] = sz;
        q[c] = unpack_nibbles16(g + qblock::kInt4HeaderBytes + 16 * (c - c0));
      }
    }
    const __m256 vs = _mm256_load_ps(scale), vsz = _mm256_load_ps(scale_zero);
    for (int r = 0; r < MT; ++r) {
      __m256i isum[8];
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c)
        isum[c] = dot_u8s8(_mm256_setzero_si256(), q[c], load_x(x, r, 32 * (b + c)));
      const __m256 xd = _mm256_mul_ps(vs, _mm256_loadu_ps(x.d + r * nb + b));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce_8(isum)), xd, acc[r]);
      corr[r] = _mm256_fmadd_ps(vsz, _mm256_loadu_ps(x.sum32 + r * nb + b), corr[r]);
    }
  }
  float tail_corr[MT] = {};
  for (; b < nb; ++b) {
    const uint8_t* g = group(b);
    const float sc = f16(g);
    accumulate_block<MT>(acc, codes(b), x, b, sc);
    for (int r = 0; r < MT; ++r)
      tail_corr[r] += sc * static_cast<float>(g[2]) * x.sum32[r * nb + b];
  }
  for (int r = 0; r < MT; ++r) out[r] = hsum(_mm256_sub_ps(acc[r], corr[r])) - tail_corr[r];
}

// Q4_K: super-blocks of 256 with 8 sub-blocks of 32, each x = d sc_j q - dmin m_j. Per
// super-block and row the 8 sub-block dots stay integers until one transposed reduction, then
// one convert and one FMA with the vector (d sc_j · d_x[j]); the scales decode as vectors and
// the min term is a vector FMA with the activations' block sums. (Per sub-block convert,
// scalar scale and broadcast, as before, held one core to ~7 GB/s from L2.)
template <int MT>
void row_q4_k(const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  const int64_t nb = x.k / 32;
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[MT], corr[MT];
  for (int r = 0; r < MT; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b += 8, w += qblock::kQ4_KBytes) {
    uint64_t sc, mins;
    qblock::q4k_scales_mins(w + qblock::kQ4_KScalesAt, &sc, &mins);
    uint32_t d_dmin;  // the two f16 scales, converted together
    std::memcpy(&d_dmin, w, 4);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d_dmin)));
    const __m256 step = _mm256_mul_ps(_mm256_broadcastss_ps(dm), bytes_to_ps(sc));
    const __m256 shift =
        _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dm)), bytes_to_ps(mins));
    __m256i q[8];  // 32 bytes of codes hold sub-block 2p (low nibbles) and 2p + 1 (high)
    for (int p = 0; p < 4; ++p) {
      const __m256i v = load32(w + qblock::kQ4_KQsAt + 32 * p);
      q[2 * p] = _mm256_and_si256(v, m4);
      q[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    for (int r = 0; r < MT; ++r) {
      __m256i isum[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        isum[j] = dot_u8s8(_mm256_setzero_si256(), q[j], load_x(x, r, 32 * (b + j)));
      const __m256 xd = _mm256_loadu_ps(x.d + r * nb + b);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(reduce_8(isum)), _mm256_mul_ps(step, xd), acc[r]);
      corr[r] = _mm256_fmadd_ps(shift, _mm256_loadu_ps(x.sum32 + r * nb + b), corr[r]);
    }
  }
  for (int r = 0; r < MT; ++r) out[r] = hsum(_mm256_sub_ps(acc[r], corr[r]));
}

// Q6_K's scales of 32-block t (scale 2t for its first 16 elements, 2t + 1 for the rest) as
// int16 lanes for vpmaddwd: lanes 0-7 (elements 0-15) sc[2t], lanes 8-15 sc[2t + 1]. lo and hi
// are the 16 scales widened to int16 and paired with themselves (vpunpck{l,h}wd), so each
// 32-bit element holds one scale twice: lo = sc 0-3 | sc 8-11, hi = sc 4-7 | sc 12-15.
// (t is a constant wherever the caller's loop over t unrolls.)
inline __m256i q6k_block_scales(int t, __m256i lo, __m256i hi) {
  const int e = (t % 2) * 2 + (t / 4) * 4;  // 32-bit element of sc[2t] in lo or hi
  const __m256i idx = _mm256_setr_epi32(e, e, e, e, e + 1, e + 1, e + 1, e + 1);
  return _mm256_permutevar8x32_epi32((t / 2) % 2 ? hi : lo, idx);
}

// Q6_K: super-blocks of 256, 6-bit codes (offset 32) with one int8 scale per 16 elements. The
// scale multiplies the int16 pair sums in vpmaddwd (|pair| <= 2·63·128, |scale| <= 128: no
// overflow), so a super-block's 8 block dots reduce together as integers, then one convert
// and one FMA with the vector d · d_x[t] (as Q4_K).
template <int MT>
void row_q6_k(const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  const int64_t nb = x.k / 32, n16 = x.k / 16;
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(0x30);
  __m256 acc[MT], corr[MT];
  for (int r = 0; r < MT; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b += 8, w += qblock::kQ6_KBytes) {
    const __m256 vd = _mm256_set1_ps(f16(w + qblock::kQ6_KDAt));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + qblock::kQ6_KScalesAt));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
    const __m256i sc_lo = _mm256_unpacklo_epi16(sc16, sc16),
                  sc_hi = _mm256_unpackhi_epi16(sc16, sc16);
    // Per 128-element half: its four code vectors, then each row's four block dots reduced
    // to one vector (reduce_4). Decoding all eight first kept 8 codes and 8 dots live, more
    // than AVX2's 16 registers: the accumulators went to the stack (perf, AVX2 q6_K).
    __m256i halves[MT][2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load32(w + 64 * h), l1 = load32(w + 64 * h + 32);
      const __m256i hb = load32(w + qblock::kQ6_KQhAt + 32 * h);
      __m256i q[4];
      q[0] =
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
      q[1] =
          _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
      q[2] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m2));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
      for (int r = 0; r < MT; ++r) {
        __m256i isum[4];
        for (int t = 0; t < 4; ++t)
          isum[t] =
              _mm256_madd_epi16(_mm256_maddubs_epi16(q[t], load_x(x, r, 32 * (b + 4 * h + t))),
                                q6k_block_scales(4 * h + t, sc_lo, sc_hi));
        halves[r][h] = reduce_4(isum);
      }
    }
    // The 16 scales times d as floats: the offset term is two FMAs with the half-block sums.
    const __m256 step_lo = _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
    const __m256 step_hi =
        _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8))));
    for (int r = 0; r < MT; ++r) {
      const __m256 xd = _mm256_mul_ps(vd, _mm256_loadu_ps(x.d + r * nb + b));
      acc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(join_halves(halves[r][0], halves[r][1])), xd, acc[r]);
      const float* s16 = x.sum16 + r * n16 + 2 * b;
      corr[r] = _mm256_fmadd_ps(step_lo, _mm256_loadu_ps(s16), corr[r]);
      corr[r] = _mm256_fmadd_ps(step_hi, _mm256_loadu_ps(s16 + 8), corr[r]);
    }
  }
  for (int r = 0; r < MT; ++r)
    out[r] = hsum(_mm256_fnmadd_ps(_mm256_set1_ps(32.0f), corr[r], acc[r]));
}

template <int MT>
void row_dot(DType t, const uint8_t* w, const QuantizedRows& x, float out[MT]) {
  switch (t) {
    case DType::kQ8_0:
      return row_q8_0<MT>(w, x, out);
    case DType::kQ4_0:
      return row_q4_0<MT>(w, x, out);
    case DType::kQ4_K:
      return row_q4_k<MT>(w, x, out);
    case DType::kQ6_K:
      return row_q6_k<MT>(w, x, out);
    case DType::kInt4G32:
      return row_int4<MT, 32>(w, x, out);
    case DType::kInt4G64:
      return row_int4<MT, 64>(w, x, out);
    default:
      return row_int4<MT, 128>(w, x, out);
  }
}

// Rows [n_begin, n_end) for activation rows [r0, r0 + MT): one sequential stream per thread,
// left to the hardware prefetchers. Prefetching the whole next row at each row's start (a
// burst of row_bytes / 64 prefetcht0) made decode slower on Zen 4: `lmstack bench decode`,
// medians of 5 runs alternating with and without it, tinyllama q6_K AVX2 31.2 -> 34.4 tok/s,
// smollm-135m q8_0 194.7 -> 206.0 (native). (The x16 kernels' prefetch, a fixed distance ahead
// inside the stream, does pay: tinyllama q6_K native without it fell from 31-50 to 26-30.)
template <int MT>
void gemv_rows(DType t, const uint8_t* w, int64_t row_bytes, int64_t n_begin, int64_t n_end,
               const QuantizedRows& x, float* y, int64_t ldy, const float* bias, bool accumulate) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const uint8_t* row = w + j * row_bytes;
    float out[MT];
    row_dot<MT>(t, row, x, out);
    for (int r = 0; r < MT; ++r) {
      const float v = out[r] + (bias ? bias[j] : 0.0f);
      float& dst = y[r * ldy + j];
      dst = accumulate ? dst + v : v;
    }
  }
}

// Bytes of one weight row of k elements (dtype_bytes, without leaving this file).
inline int64_t row_bytes_of(DType t, int64_t k) {
  switch (t) {
    case DType::kQ8_0:
      return k / 32 * qblock::kQ8_0Bytes;
    case DType::kQ4_0:
      return k / 32 * qblock::kQ4_0Bytes;
    case DType::kQ4_K:
      return k / 256 * qblock::kQ4_KBytes;
    case DType::kQ6_K:
      return k / 256 * qblock::kQ6_KBytes;
    case DType::kInt4G32:
      return k / 32 * (qblock::kInt4HeaderBytes + 16);
    case DType::kInt4G64:
      return k / 64 * (qblock::kInt4HeaderBytes + 32);
    default:
      return k / 128 * (qblock::kInt4HeaderBytes + 64);
  }
}

inline QuantizedRows offset_rows(const QuantizedRows& x, int64_t r) {
  return {x.q + r * x.k,
          x.d + r * (x.k / 32),
          x.sum32 + r * (x.k / 32),
          x.sum16 + r * (x.k / 16),
          x.k,
          x.qu ? x.qu + r * x.k : nullptr};
}

void gemv(DType t, const void* w, int64_t n_begin, int64_t n_end, const QuantizedRows& x, int64_t m,
          float* y, int64_t ldy, const float* bias, bool accumulate) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t row_bytes = row_bytes_of(t, x.k);
  for (int64_t r = 0; r < m; r += kMaxRows) {
    const QuantizedRows xr = offset_rows(x, r);
    float* yr = y + r * ldy;
    switch (m - r >= kMaxRows ? kMaxRows : m - r) {
      case 1:
        gemv_rows<1>(t, wb, row_bytes, n_begin, n_end, xr, yr, ldy, bias, accumulate);
        break;
      case 2:
        gemv_rows<2>(t, wb, row_bytes, n_begin, n_end, xr, yr, ldy, bias, accumulate);
        break;
      case 3:
        gemv_rows<3>(t, wb, row_bytes, n_begin, n_end, xr, yr, ldy, bias, accumulate);
        break;
      default:
        gemv_rows<4>(t, wb, row_bytes, n_begin, n_end, xr, yr, ldy, bias, accumulate);
        break;
    }
  }
}

}  // namespace QG_NS
}  // namespace
}  // namespace lmstack::kernels
