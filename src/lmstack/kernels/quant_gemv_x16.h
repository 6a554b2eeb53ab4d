// The decode GEMVs over Q4_0x16, Q4_Kx16 and Q6_Kx16 weights (rows interleaved in groups of 16,
// quant_blocks.h), compiled into each ISA file after quant_gemv_impl.h, inside the same QG_NS
// (no include guard on purpose). Besides QG_NS and QG_VNNI, define QG_W512: 1 runs a group of
// 16 rows as one 512-bit vector, 0 as two 256-bit halves of 8 rows (the layouts serve both).
//
// One SIMD lane is one weight row. Q4_0x16, per 32-element block b: eight code vectors u_i (lane
// j: the 4 codes of row j at elements 4i..4i+3, nibbles masked out of the 4 words of 64 bytes) meet
// the activation bytes 4i..4i+3 broadcast to every lane, so vpdpbusd (or vpmaddubsw, exact
// in int16 here: 16 products of |code| <= 15 and |q| <= 128 stay below 2^15, then one
// vpmaddwd) yields the 16 rows' integer dot products at once. The 16 f16 row scales load as
// one vector: acc += float(isum) * (d_w * d_x) and, for Q4_0's offset 8 (sum((q - 8) x) =
// sum(q x) - 8 sum(x)), corr += d_w * sum32_x; out = acc - 8 corr, stored as one vector.
// The float sums run in a different order from row_q4_0 (quant_gemv_impl.h); the integer dot
// products are the same. Q4_Kx16 runs the same integer dots per 32-element sub-block (a
// chunk's code words give two sub-blocks, low and high nibbles) and decodes the 16 rows' 6-bit
// scales and mins as int32 lanes: acc += float(isum_j) * (d sc_j * d_x), corr += dmin m_j *
// sum32_x, out = acc - corr. Q6_Kx16 decodes 6-bit codes from each word's three vectors and
// scales per 16 elements: out = acc - 32 corr with corr += d sc * sum16_x.
#include <cstring>

#include "lmstack/kernels/pin.h"

namespace lmstack::kernels {
namespace {
namespace QG_NS {
namespace x16 {

#if QG_W512
using VecI = __m512i;
using VecF = __m512;
constexpr int kLanes = 16;
inline VecI load_i(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline VecI set1_i32(int32_t v) { return _mm512_set1_epi32(v); }
inline VecI zero_i() { return _mm512_setzero_si512(); }
inline VecI low_nibbles(VecI v) { return _mm512_and_si512(v, _mm512_set1_epi8(15)); }
inline VecI high_nibbles(VecI v) {
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15));
}
inline VecI add_i32(VecI a, VecI b) { return _mm512_add_epi32(a, b); }
// 16 bytes as 16 int32 lanes, and the shifts and masks of the Q4_K scale decoding on them.
inline VecI load_u8_lanes(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VecI load_i8_lanes(const uint8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VecI and_i(VecI a, int m) { return _mm512_and_si512(a, _mm512_set1_epi32(m)); }
inline VecI or_i(VecI a, VecI b) { return _mm512_or_si512(a, b); }
template <int S>
inline VecI srl_i32(VecI a) {
  return _mm512_srli_epi32(a, S);
}
template <int S>
inline VecI sll_i32(VecI a) {
  return _mm512_slli_epi32(a, S);
}
#if QG_VNNI
inline VecI dot4(VecI acc, VecI u, VecI s) { return _mm512_dpbusd_epi32(acc, u, s); }
#else
inline VecI madd_u8s8(VecI u, VecI s) { return _mm512_maddubs_epi16(u, s); }
// pin (pin.h): one chain per accumulator, not a tree of spilled products (AVX2 Q4_Kx16 GEMV).
inline VecI add_i16(VecI a, VecI b) { return pin(_mm512_add_epi16(a, b)); }
inline VecI widen_i16(VecI v) { return _mm512_madd_epi16(v, _mm512_set1_epi16(1)); }
#endif
inline VecF to_f(VecI v) { return _mm512_cvtepi32_ps(v); }
inline VecF load_f16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline VecF load_f(const float* p) { return _mm512_loadu_ps(p); }
inline void store_f(float* p, VecF v) { _mm512_storeu_ps(p, v); }
inline VecF set1_f(float v) { return _mm512_set1_ps(v); }
inline VecF zero_f() { return _mm512_setzero_ps(); }
inline VecF add_f(VecF a, VecF b) { return _mm512_add_ps(a, b); }
inline VecF sub_f(VecF a, VecF b) { return _mm512_sub_ps(a, b); }
inline VecF mul_f(VecF a, VecF b) { return _mm512_mul_ps(a, b); }
inline VecF fma_f(VecF a, VecF b, VecF c) { return _mm512_fmadd_ps(a, b, c); }
inline VecF fnma_f(VecF a, VecF b, VecF c) { return _mm512_fnmadd_ps(a, b, c); }
#else
using VecI = __m256i;
using VecF = __m256;
constexpr int kLanes = 8;
inline VecI load_i(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline VecI set1_i32(int32_t v) { return _mm256_set1_epi32(v); }
inline VecI zero_i() { return _mm256_setzero_si256(); }
inline VecI low_nibbles(VecI v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
inline VecI high_nibbles(VecI v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
inline VecI add_i32(VecI a, VecI b) { return _mm256_add_epi32(a, b); }
inline VecI load_u8_lanes(const uint8_t* p) {  // 8 bytes as 8 int32 lanes
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline VecI load_i8_lanes(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline VecI and_i(VecI a, int m) { return _mm256_and_si256(a, _mm256_set1_epi32(m)); }
inline VecI or_i(VecI a, VecI b) { return _mm256_or_si256(a, b); }
template <int S>
inline VecI srl_i32(VecI a) {
  return _mm256_srli_epi32(a, S);
}
template <int S>
inline VecI sll_i32(VecI a) {
  return _mm256_slli_epi32(a, S);
}
#if QG_VNNI
inline VecI dot4(VecI acc, VecI u, VecI s) { return _mm256_dpbusd_epi32(acc, u, s); }
#else
inline VecI madd_u8s8(VecI u, VecI s) { return _mm256_maddubs_epi16(u, s); }
inline VecI add_i16(VecI a, VecI b) { return pin(_mm256_add_epi16(a, b)); }  // as above
inline VecI widen_i16(VecI v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }
#endif
inline VecF to_f(VecI v) { return _mm256_cvtepi32_ps(v); }
inline VecF load_f16(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline VecF load_f(const float* p) { return _mm256_loadu_ps(p); }
inline void store_f(float* p, VecF v) { _mm256_storeu_ps(p, v); }
inline VecF set1_f(float v) { return _mm256_set1_ps(v); }
inline VecF zero_f() { return _mm256_setzero_ps(); }
inline VecF add_f(VecF a, VecF b) { return _mm256_add_ps(a, b); }
inline VecF sub_f(VecF a, VecF b) { return _mm256_sub_ps(a, b); }
inline VecF mul_f(VecF a, VecF b) { return _mm256_mul_ps(a, b); }
inline VecF fma_f(VecF a, VecF b, VecF c) { return _mm256_fmadd_ps(a, b, c); }
inline VecF fnma_f(VecF a, VecF b, VecF c) { return _mm256_fnmadd_ps(a, b, c); }
#endif

// Bytes ahead of the block being read that the group dots prefetch (past a group's end: the next
// group's scales and codes, which follow it in memory). Measured on Zen 4 (smollm-135m q4_0
// decode, one thread): 4096 gives 138-139 tok/s, 1024 131-135, none 113-131; at two threads
// within noise (~3%).
constexpr int64_t kPrefetchAhead = 4096;

// Activation bytes 4i..4i+3 of a block, the same in every lane.
inline VecI bcast4(const int8_t* xb, int i) {
  int32_t v;
  std::memcpy(&v, xb + 4 * i, 4);
  return set1_i32(v);
}

// Vectors per group: one of 16 lanes (512-bit), or two 8-row halves (256-bit).
constexpr int kHalves = qblock::kQ4_0x16Rows / kLanes;

// out[h][r] = the dot products of rows kLanes h .. of the group at `group` with activation row
// r < MT. Per block and row the activation broadcasts serve every half, and each code word is
// unpacked where it is used: holding a block's unpacked codes for the rows instead (sixteen
// vectors in 256-bit) spilled the AVX2 registers, and reading the group once per half read
// each code line in two passes (AVX2 q4_0 decode 239-250 -> 279-301 tok/s when merged).
template <int MT>
void q4_0_group_dot(const uint8_t* group, const QuantizedRows& x, VecF out[kHalves][MT]) {
  const int64_t nb = x.k / 32;
  VecF acc[kHalves][MT], corr[kHalves][MT];
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) acc[h][r] = corr[h][r] = zero_f();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + qblock::q4_0x16_codes_at(nb, b);
    for (int line = 0; line < 4; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchAhead + 64 * line), _MM_HINT_T0);
    const uint8_t* scales = group + qblock::q4_0x16_scales_at(nb, b);
    VecF dw[kHalves];
    for (int h = 0; h < kHalves; ++h) dw[h] = load_f16(scales + 2 * kLanes * h);
    for (int r = 0; r < MT; ++r) {
      const int8_t* xb = x.q + r * x.k + 32 * b;
      VecI isum[kHalves];
#if QG_VNNI
      VecI hi_sum[kHalves];  // a second chain: vpdpbusd's latency, not its throughput
      for (int h = 0; h < kHalves; ++h) isum[h] = hi_sum[h] = zero_i();
      for (int v = 0; v < 4; ++v) {
        const VecI lo_x = bcast4(xb, v), hi_x = bcast4(xb, v + 4);
        for (int h = 0; h < kHalves; ++h) {
          const VecI raw = load_i(blk + 64 * v + 4 * kLanes * h);
          isum[h] = dot4(isum[h], low_nibbles(raw), lo_x);
          hi_sum[h] = dot4(hi_sum[h], high_nibbles(raw), hi_x);
        }
      }
      for (int h = 0; h < kHalves; ++h) isum[h] = add_i32(isum[h], hi_sum[h]);
#else
      VecI s[kHalves];
      for (int h = 0; h < kHalves; ++h) s[h] = zero_i();
      for (int v = 0; v < 4; ++v) {
        const VecI lo_x = bcast4(xb, v), hi_x = bcast4(xb, v + 4);
        for (int h = 0; h < kHalves; ++h) {
          const VecI raw = load_i(blk + 64 * v + 4 * kLanes * h);
          s[h] = add_i16(
              s[h], add_i16(madd_u8s8(low_nibbles(raw), lo_x), madd_u8s8(high_nibbles(raw), hi_x)));
        }
      }
      for (int h = 0; h < kHalves; ++h) isum[h] = widen_i16(s[h]);
#endif
      const VecF xd = set1_f(x.d[r * nb + b]), xs = set1_f(x.sum32[r * nb + b]);
      for (int h = 0; h < kHalves; ++h) {
        acc[h][r] = fma_f(to_f(isum[h]), mul_f(dw[h], xd), acc[h][r]);
        corr[h][r] = fma_f(dw[h], xs, corr[h][r]);
      }
    }
  }
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) out[h][r] = fnma_f(set1_f(8.0f), corr[h][r], acc[h][r]);
}

// Lane-wise 6-bit scale and min of sub-block j < 8 of the kLanes rows from `scales` (byte t of
// lane l at 16 t + l): quant_blocks.h's q4k_scale_min on every lane at once.
inline void q4k_scale_min_lanes(const uint8_t* scales, int j, VecI* sc, VecI* m) {
  const auto byte = [&](int t) { return load_u8_lanes(scales + 16 * t); };
  if (j < 4) {
    *sc = and_i(byte(j), 63);
    *m = and_i(byte(j + 4), 63);
    return;
  }
  const VecI hi = byte(j + 4);
  *sc = or_i(and_i(hi, 15), sll_i32<4>(srl_i32<6>(byte(j - 4))));
  *m = or_i(srl_i32<4>(hi), sll_i32<4>(srl_i32<6>(byte(j))));
}

// The Q4_Kx16 counterpart of q4_0_group_dot. Per super-block and chunk p (64 elements: sub-
// blocks 2p and 2p + 1), per half: the two sub-blocks' scale and min vectors, then per
// activation row the 8 code words' low and high nibbles against activation bytes 4v.. and
// 32 + 4v.. (vpdpbusd, or vpmaddubsw summed in int16: 8 words x 2 products x 15 x 128 =
// 30,720 < 2^15), and one convert and FMA per sub-block.
template <int MT>
void q4_k_group_dot(const uint8_t* group, const QuantizedRows& x, VecF out[kHalves][MT]) {
  const int64_t nb = x.k / 32;
  VecF acc[kHalves][MT], corr[kHalves][MT];
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) acc[h][r] = corr[h][r] = zero_f();
  for (int64_t s = 0; s < nb / 8; ++s) {
    const uint8_t* sb = group + s * qblock::kQ4_Kx16SuperBytes;
    for (int p = 0; p < 4; ++p) {
      for (int line = 0; line < 9; ++line)  // a quarter of the super-block's 36 lines
        _mm_prefetch(reinterpret_cast<const char*>(sb + kPrefetchAhead + 576 * p + 64 * line),
                     _MM_HINT_T0);
      const uint8_t* words = sb + qblock::kQ4_Kx16CodesAt + 512 * p;
#pragma GCC unroll 2  // constant h: acc[h] and corr[h] in registers, not memory (AVX2: 7%)
      for (int h = 0; h < kHalves; ++h) {
        const VecF d = load_f16(sb + 2 * kLanes * h);
        const VecF dmin = load_f16(sb + qblock::kQ4_Kx16DminAt + 2 * kLanes * h);
        VecF step[2], shift[2];  // d sc_j and dmin m_j of sub-blocks 2p and 2p + 1
        for (int e = 0; e < 2; ++e) {
          VecI sc, m;
          q4k_scale_min_lanes(sb + qblock::kQ4_Kx16ScalesAt + kLanes * h, 2 * p + e, &sc, &m);
          step[e] = mul_f(d, to_f(sc));
          shift[e] = mul_f(dmin, to_f(m));
        }
        for (int r = 0; r < MT; ++r) {
          const int8_t* xb = x.q + r * x.k + 256 * s + 64 * p;
          VecI lo_sum, hi_sum;
#if QG_VNNI
          lo_sum = hi_sum = zero_i();
          for (int v = 0; v < 8; ++v) {
            const VecI raw = load_i(words + 64 * v + 4 * kLanes * h);
            lo_sum = dot4(lo_sum, low_nibbles(raw), bcast4(xb, v));
            hi_sum = dot4(hi_sum, high_nibbles(raw), bcast4(xb + 32, v));
          }
#else
          VecI lo16 = zero_i(), hi16 = zero_i();
          for (int v = 0; v < 8; ++v) {
            const VecI raw = load_i(words + 64 * v + 4 * kLanes * h);
            lo16 = add_i16(lo16, madd_u8s8(low_nibbles(raw), bcast4(xb, v)));
            hi16 = add_i16(hi16, madd_u8s8(high_nibbles(raw), bcast4(xb + 32, v)));
          }
          lo_sum = widen_i16(lo16);
          hi_sum = widen_i16(hi16);
#endif
          const int64_t b = r * nb + 8 * s + 2 * p;  // sub-block 2p's activation block
          acc[h][r] = fma_f(to_f(lo_sum), mul_f(step[0], set1_f(x.d[b])), acc[h][r]);
          acc[h][r] = fma_f(to_f(hi_sum), mul_f(step[1], set1_f(x.d[b + 1])), acc[h][r]);
          corr[h][r] = fma_f(shift[0], set1_f(x.sum32[b]), corr[h][r]);
          corr[h][r] = fma_f(shift[1], set1_f(x.sum32[b + 1]), corr[h][r]);
        }
      }
    }
  }
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) out[h][r] = sub_f(acc[h][r], corr[h][r]);
}

// Q6_K's 6-bit codes of elements 32c + 4v.. (c < 4) of one element half, one vector per c, from
// word v's three vectors at w: ql bytes 4v.. (c = 0 low nibbles, 2 high), ql bytes 32 + 4v..
// (c = 1, 3) and qh bytes 4v.. (bits 2c, 2c + 1 of each byte are c's high two bits). The
// 32-bit shifts move bits across bytes only where the 0x30 mask drops them.
inline void q6k_codes(const uint8_t* w, VecI c[4]) {
  const VecI l0 = load_i(w), l1 = load_i(w + 64), hb = load_i(w + 128);
  constexpr int kHigh = 0x30303030;
  c[0] = or_i(low_nibbles(l0), and_i(sll_i32<4>(hb), kHigh));
  c[1] = or_i(low_nibbles(l1), and_i(sll_i32<2>(hb), kHigh));
  c[2] = or_i(high_nibbles(l0), and_i(hb, kHigh));
  c[3] = or_i(high_nibbles(l1), and_i(srl_i32<2>(hb), kHigh));
}

// The Q6_Kx16 counterpart of q4_0_group_dot. Per super-block, element half e and activation
// row, two passes of four words: words 0-3 hold the first 16 elements of each 32-element group
// c, words 4-7 the second, so each pass ends with one integer dot per c under one int8 sub-
// scale: acc += float(isum) * (d sc * d_x), corr += d sc * sum16_x, out = acc - 32 corr. Without
// VNNI two words are summed in int16 before widening (2 x 2 products x 63 x 128 = 32,256 <
// 2^15).
template <int MT>
void q6_k_group_dot(const uint8_t* group, const QuantizedRows& x, VecF out[kHalves][MT]) {
  const int64_t nb = x.k / 32, nsb = nb / 8;
  VecF acc[kHalves][MT], corr[kHalves][MT];
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) acc[h][r] = corr[h][r] = zero_f();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* header = group + qblock::q6_kx16_header_at(nsb, s);
    const uint8_t* codes = group + qblock::q6_kx16_codes_at(nsb, s);
    if (s + 1 < nsb)  // the pair's second header sits before the first's codes, behind the stream
      for (int line = 0; line < 5; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(group + qblock::q6_kx16_header_at(nsb, s + 1) +
                                                   64 * line),
                     _MM_HINT_T0);
    for (int e = 0; e < 2; ++e) {
      for (int line = 0; line < 24; ++line)  // this half's 1536 code bytes, kPrefetchAhead on
        _mm_prefetch(reinterpret_cast<const char*>(codes + kPrefetchAhead + 1536 * e + 64 * line),
                     _MM_HINT_T0);
#pragma GCC unroll 2  // as in q4_k_group_dot
      for (int h = 0; h < kHalves; ++h) {
        const VecF d = load_f16(header + 2 * kLanes * h);
        for (int pass = 0; pass < 2; ++pass) {
          VecF step[4];  // d sc of these 16 elements of each group c, shared by the rows
          for (int c = 0; c < 4; ++c) {
            const int u = 8 * e + 2 * c + pass;
            step[c] = mul_f(
                d, to_f(load_i8_lanes(header + qblock::kQ6_Kx16ScalesAt + 16 * u + kLanes * h)));
          }
          for (int r = 0; r < MT; ++r) {
            const int8_t* xe = x.q + r * x.k + 256 * s + 128 * e;
            VecI isum[4];
            for (int c = 0; c < 4; ++c) isum[c] = zero_i();
#if QG_VNNI
            for (int v = 4 * pass; v < 4 * pass + 4; ++v) {
              VecI q[4];
              q6k_codes(codes + 1536 * e + 192 * v + 4 * kLanes * h, q);
              for (int c = 0; c < 4; ++c) isum[c] = dot4(isum[c], q[c], bcast4(xe + 32 * c, v));
            }
#else
            for (int v = 4 * pass; v < 4 * pass + 4; v += 2) {
              VecI q0[4], q1[4];
              q6k_codes(codes + 1536 * e + 192 * v + 4 * kLanes * h, q0);
              q6k_codes(codes + 1536 * e + 192 * (v + 1) + 4 * kLanes * h, q1);
              for (int c = 0; c < 4; ++c)
                isum[c] = add_i32(isum[c],
                                  widen_i16(add_i16(madd_u8s8(q0[c], bcast4(xe + 32 * c, v)),
                                                    madd_u8s8(q1[c], bcast4(xe + 32 * c, v + 1)))));
            }
#endif
            for (int c = 0; c < 4; ++c) {
              const int64_t b = r * nb + 8 * s + 4 * e + c;
              acc[h][r] = fma_f(to_f(isum[c]), mul_f(step[c], set1_f(x.d[b])), acc[h][r]);
              corr[h][r] = fma_f(step[c], set1_f(x.sum16[2 * b + pass]), corr[h][r]);
            }
          }
        }
      }
    }
  }
  for (int h = 0; h < kHalves; ++h)
    for (int r = 0; r < MT; ++r) out[h][r] = fnma_f(set1_f(32.0f), corr[h][r], acc[h][r]);
}

// Stores lanes of out[r] (rows j0..j0 + kLanes) that fall in [lo, hi): one vector when all do.
template <int MT>
void store_lanes(const VecF out[MT], int64_t j0, int64_t lo, int64_t hi, float* y, int64_t ldy,
                 const float* bias, bool accumulate) {
  if (j0 >= lo && j0 + kLanes <= hi) {
    for (int r = 0; r < MT; ++r) {
      VecF v = bias ? add_f(out[r], load_f(bias + j0)) : out[r];
      if (accumulate) v = add_f(v, load_f(y + r * ldy + j0));
      store_f(y + r * ldy + j0, v);
    }
    return;
  }
  for (int r = 0; r < MT; ++r) {
    float lanes[kLanes];
    store_f(lanes, out[r]);
    for (int l = 0; l < kLanes; ++l) {
      const int64_t j = j0 + l;
      if (j < lo || j >= hi) continue;
      const float v = lanes[l] + (bias ? bias[j] : 0.0f);
      float& dst = y[r * ldy + j];
      dst = accumulate ? dst + v : v;
    }
  }
}

// Rows [lo, hi) (inside the full groups) for activation rows [0, MT) of x, through the group
// dot of layout t (groups of 16 rows of row_bytes each).
template <int MT>
void group_rows(DType t, const uint8_t* w, int64_t row_bytes, int64_t lo, int64_t hi,
                const QuantizedRows& x, float* y, int64_t ldy, const float* bias, bool accumulate) {
  constexpr int kG = qblock::kQ4_0x16Rows;
  for (int64_t g = lo / kG; g * kG < hi; ++g) {
    const uint8_t* group = w + g * kG * row_bytes;
    VecF out[kHalves][MT];
    if (t == DType::kQ4_Kx16)
      q4_k_group_dot<MT>(group, x, out);
    else if (t == DType::kQ6_Kx16)
      q6_k_group_dot<MT>(group, x, out);
    else
      q4_0_group_dot<MT>(group, x, out);
    for (int h = 0; h < kHalves; ++h)
      store_lanes<MT>(out[h], g * kG + h * kLanes, lo, hi, y, ldy, bias, accumulate);
  }
}

}  // namespace x16

// quant_gemv.h's contract for w of an interleaved type t (q4_0x16, q4_Kx16, q6_Kx16) with n rows in
// all: the full groups here, the plain rows after them through gemv() of quant_gemv_impl.h.
void gemv_x16(DType t, const void* w, int64_t n, int64_t n_begin, int64_t n_end,
              const QuantizedRows& x, int64_t m, float* y, int64_t ldy, const float* bias,
              bool accumulate) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const DType base = row_interleaved_base(t);
  const int64_t row_bytes = dtype_bytes(base, x.k);
  const int64_t full = n / qblock::kQ4_0x16Rows * qblock::kQ4_0x16Rows;
  if (n_end > full) {
    const int64_t from = n_begin > full ? n_begin : full;
    gemv(base, wb + full * row_bytes, from - full, n_end - full, x, m, y + full, ldy,
         bias ? bias + full : nullptr, accumulate);
  }
  const int64_t hi = n_end < full ? n_end : full;
  if (n_begin >= hi) return;
  for (int64_t r = 0; r < m; r += kMaxRows) {
    const QuantizedRows xr = offset_rows(x, r);
    float* yr = y + r * ldy;
    switch (m - r >= kMaxRows ? kMaxRows : m - r) {
      case 1:
        x16::group_rows<1>(t, wb, row_bytes, n_begin, hi, xr, yr, ldy, bias, accumulate);
        break;
      case 2:
        x16::group_rows<2>(t, wb, row_bytes, n_begin, hi, xr, yr, ldy, bias, accumulate);
        break;
      case 3:
        x16::group_rows<3>(t, wb, row_bytes, n_begin, hi, xr, yr, ldy, bias, accumulate);
        break;
      default:
        x16::group_rows<4>(t, wb, row_bytes, n_begin, hi, xr, yr, ldy, bias, accumulate);
        break;
    }
  }
}

}  // namespace QG_NS
}  // namespace
}  // namespace lmstack::kernels
