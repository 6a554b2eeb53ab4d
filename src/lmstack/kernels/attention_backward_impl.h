// The body of attention_backward_item for one vector type V (VecAvx2 here, VecAvx512 where
// the including file is built with AVX-512). For query row i of head g, with the keys j it
// sees (first <= j <= i; attention_window_start):
//   s_j = scale·q_i·k_j,  P_ij = e^(s_j - max) / Σ e^(s - max),  Δ_i = dO_i·O_i,
//   dV_j += P_ij·dO_i,  dS_ij = scale·P_ij·(dO_i·V_j - Δ_i),  dQ_i += Σ_j dS_ij·K_j,
//   dK_j += dS_ij·Q_i                       (Dao 2023, Alg. 2; ref::causal_attention_backward)
// Every j-loop runs over keys, W at a time, on K, V, dK and dV held transposed ([D][Tp]), so
// no product needs a horizontal sum; lanes outside [first, i] get P = dS = 0. Only dQ runs
// over D, from K rows padded to Dp. Internal linkage: each including file gets its own copy.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/attention_backward_leaf.h"

namespace lmstack::kernels {
namespace {

struct VecAvx2 {
  using T = __m256;
  static constexpr int kW = 8;
  static T zero() { return _mm256_setzero_ps(); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, T x) { _mm256_store_ps(p, x); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T exp(T x) { return exp_avx2(x); }
  // x where lo <= lane <= hi, else fill.
  static T keep(T x, int lo, int hi, float fill) {
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 in =
        _mm256_and_ps(_mm256_cmp_ps(lane, _mm256_set1_ps(static_cast<float>(lo)), _CMP_GE_OQ),
                      _mm256_cmp_ps(lane, _mm256_set1_ps(static_cast<float>(hi)), _CMP_LE_OQ));
    return _mm256_blendv_ps(_mm256_set1_ps(fill), x, in);
  }
  static float hsum(T x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float hmax(T x) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
  }
};

#ifdef __AVX512F__
struct VecAvx512 {
  using T = __m512;
  static constexpr int kW = 16;
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, T x) { _mm512_store_ps(p, x); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T exp(T x) { return exp_avx512(x); }
  static T keep(T x, int lo, int hi, float fill) {
    const auto below = lo <= 0 ? 0u : (lo >= 16 ? 0xFFFFu : (1u << lo) - 1);
    const auto upto = hi >= 15 ? 0xFFFFu : (hi < 0 ? 0u : (2u << hi) - 1);
    return _mm512_mask_blend_ps(static_cast<__mmask16>(upto & ~below), _mm512_set1_ps(fill), x);
  }
  static float hsum(T x) { return _mm512_reduce_add_ps(x); }
  static float hmax(T x) { return _mm512_reduce_max_ps(x); }
};
#endif

// Query rows are taken kTile at a time (consecutive positions of one head): each dK/dV
// element loaded then carries kTile FMAs, and each K row kTile dQ updates (one row at a time,
// the [D][Tp] dK/dV rows would stream through L2 twice per query for one FMA each).
constexpr int kTile = 4;

// Views of the scratch area for one item.
template <class V>
struct BackwardScratch {
  int64_t tp, dp;
  float *kt, *vt, *dkt, *dvt;  // [D][Tp]
  float* kp;                   // [T][Dp]: K rows, zero-padded
  float *s, *dp_row, *ds;      // [kTile][Tp]: scores then P, dO·V, dS
  float* acc;                  // [kTile][Dp]: dQ rows

  BackwardScratch(float* base, int tokens, int d) {
    tp = (tokens + V::kW - 1) / V::kW * V::kW, dp = (d + V::kW - 1) / V::kW * V::kW;
    float* at = base;
    auto take = [&](int64_t n) {
      float* p = at;
      at += (n + 15) / 16 * 16;  // keep every view 64-byte aligned
      return p;
    };
    kt = take(d * tp), vt = take(d * tp), dkt = take(d * tp), dvt = take(d * tp);
    kp = take(tokens * dp), s = take(kTile * tp), dp_row = take(kTile * tp);
    ds = take(kTile * tp), acc = take(kTile * dp);
  }
};

// Transposes this item's K and V into kt/vt (zero past T), pads K rows into kp, zeroes dkt/dvt.
template <class V>
void pack_item(const AttentionBackwardItem& it, const BackwardScratch<V>& w) {
  const size_t tbytes = static_cast<size_t>(it.d * w.tp) * sizeof(float);
  std::memset(w.kt, 0, tbytes), std::memset(w.vt, 0, tbytes);
  std::memset(w.dkt, 0, tbytes), std::memset(w.dvt, 0, tbytes);
  std::memset(w.kp, 0, static_cast<size_t>(it.tokens * w.dp) * sizeof(float));
  for (int j = 0; j < it.tokens; ++j) {
    const float* kj = it.k + j * it.kv_row;
    const float* vj = it.v + j * it.kv_row;
    for (int e = 0; e < it.d; ++e) w.kt[e * w.tp + j] = kj[e], w.vt[e * w.tp + j] = vj[e];
    std::memcpy(w.kp + j * w.dp, kj, static_cast<size_t>(it.d) * sizeof(float));
  }
}

// s_j = q·k_j and dp_j = dO·v_j for U key blocks from j: 2U independent FMA chains (one
// pair of chains per block would wait on the FMA latency D times per block).
template <class V, int U>
void scores_blocks(const AttentionBackwardItem& it, const BackwardScratch<V>& w, const float* qi,
                   const float* doi, float* s_row, float* dp_row, int j) {
  using T = typename V::T;
  T s[U], dp[U];
  for (int u = 0; u < U; ++u) s[u] = V::zero(), dp[u] = V::zero();
  for (int e = 0; e < it.d; ++e) {
    const T qe = V::set1(qi[e]), de = V::set1(doi[e]);
    const float* kt = w.kt + e * w.tp + j;
    const float* vt = w.vt + e * w.tp + j;
    for (int u = 0; u < U; ++u) {
      s[u] = V::fma(qe, V::load(kt + u * V::kW), s[u]);
      dp[u] = V::fma(de, V::load(vt + u * V::kW), dp[u]);
    }
  }
  for (int u = 0; u < U; ++u)
    V::store(s_row + j + u * V::kW, s[u]), V::store(dp_row + j + u * V::kW, dp[u]);
}

// Row r of the tile, query i of head g, over the tile's key blocks [j0, j_end): leaves
// P_ij in s_row and dS_ij in ds_row, both 0 outside the keys [first, i] this row sees.
template <class V>
void row_softmax(const AttentionBackwardItem& it, const BackwardScratch<V>& w, int r, int g, int i,
                 int j0, int j_end) {
  using T = typename V::T;
  const float* qi = it.q + i * it.q_row + g * it.d;
  const float* doi = it.dout + i * it.q_row + g * it.d;
  const float* oi = it.out + i * it.q_row + g * it.d;
  float* s_row = w.s + r * w.tp;
  float* dp_row = w.dp_row + r * w.tp;
  float* ds_row = w.ds + r * w.tp;
  const int first = it.window > 0 ? std::max(0, i - it.window + 1) : 0;  // window start
  int j = j0;
  for (; j + 4 * V::kW <= j_end; j += 4 * V::kW)
    scores_blocks<V, 4>(it, w, qi, doi, s_row, dp_row, j);
  for (; j < j_end; j += V::kW) scores_blocks<V, 1>(it, w, qi, doi, s_row, dp_row, j);
  T vmax = V::set1(-INFINITY);
  const T vscale = V::set1(it.scale);
  for (j = j0; j < j_end; j += V::kW) {
    const T s = V::keep(V::mul(V::load(s_row + j), vscale), first - j, i - j, -INFINITY);
    V::store(s_row + j, s);
    vmax = V::max(vmax, s);
  }
  const T mx = V::set1(V::hmax(vmax));
  T sum = V::zero();
  for (j = j0; j < j_end; j += V::kW) {
    const T e = V::keep(V::exp(V::sub(V::load(s_row + j), mx)), first - j, i - j, 0.0f);
    V::store(s_row + j, e);
    sum = V::add(sum, e);
  }
  float delta = 0;
  for (int e = 0; e < it.d; ++e) delta += doi[e] * oi[e];
  const T vinv = V::set1(1.0f / V::hsum(sum)), vdelta = V::set1(delta);
  for (j = j0; j < j_end; j += V::kW) {
    const T p = V::mul(V::load(s_row + j), vinv);
    V::store(s_row + j, p);
    V::store(ds_row + j, V::mul(V::mul(p, V::sub(V::load(dp_row + j), vdelta)), vscale));
  }
}

// dK_j += Σ_r dS_rj·Q_r and dV_j += Σ_r P_rj·dO_r on the transposed accumulators.
template <class V, int R>
void tile_dk_dv(const AttentionBackwardItem& it, const BackwardScratch<V>& w, int g, int i0, int j0,
                int j_end) {
  using T = typename V::T;
  const float *q[R], *dout[R];
  for (int r = 0; r < R; ++r)
    q[r] = it.q + (i0 + r) * it.q_row + g * it.d,
    dout[r] = it.dout + (i0 + r) * it.q_row + g * it.d;
  for (int j = j0; j < j_end; j += V::kW) {
    T ds[R], p[R];
    for (int r = 0; r < R; ++r)
      ds[r] = V::load(w.ds + r * w.tp + j), p[r] = V::load(w.s + r * w.tp + j);
    for (int e = 0; e < it.d; ++e) {
      float* dk = w.dkt + e * w.tp + j;
      float* dv = w.dvt + e * w.tp + j;
      T k_acc = V::load(dk), v_acc = V::load(dv);
      for (int r = 0; r < R; ++r) {
        k_acc = V::fma(V::set1(q[r][e]), ds[r], k_acc);
        v_acc = V::fma(V::set1(dout[r][e]), p[r], v_acc);
      }
      V::store(dk, k_acc), V::store(dv, v_acc);
    }
  }
}

// dQ_r += Σ_j dS_rj·K_j, two vectors of D at a time for all R rows (2R chains).
template <class V, int R>
void tile_dq(const AttentionBackwardItem& it, const BackwardScratch<V>& w, int g, int i0,
             int first) {
  using T = typename V::T;
  const int last = i0 + R - 1;
  for (int64_t c = 0; c < w.dp; c += 2 * V::kW) {
    const bool two = c + V::kW < w.dp;
    T acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = V::zero(), acc[r][1] = V::zero();
    for (int j = first; j <= last; ++j) {
      const float* kj = w.kp + j * w.dp + c;
      const T k0 = V::load(kj), k1 = two ? V::load(kj + V::kW) : V::zero();
      for (int r = 0; r < R; ++r) {
        const T ds = V::set1(w.ds[r * w.tp + j]);
        acc[r][0] = V::fma(ds, k0, acc[r][0]), acc[r][1] = V::fma(ds, k1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      V::store(w.acc + r * w.dp + c, acc[r][0]);
      if (two) V::store(w.acc + r * w.dp + c + V::kW, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* dqi = it.dq + (i0 + r) * it.q_row + g * it.d;
    for (int e = 0; e < it.d; ++e) dqi[e] += w.acc[r * w.dp + e];
  }
}

// Query rows i0 .. i0 + R - 1 of head g.
template <class V, int R>
void backward_tile(const AttentionBackwardItem& it, const BackwardScratch<V>& w, int g, int i0) {
  const int first = it.window > 0 ? std::max(0, i0 - it.window + 1) : 0;
  const int j0 = first / V::kW * V::kW, j_end = (i0 + R - 1) / V::kW * V::kW + V::kW;
  for (int r = 0; r < R; ++r) row_softmax(it, w, r, g, i0 + r, j0, j_end);
  tile_dk_dv<V, R>(it, w, g, i0, j0, j_end);
  tile_dq<V, R>(it, w, g, i0, first);
}

template <class V>
void backward_item(const AttentionBackwardItem& it) {
  const BackwardScratch<V> w(it.scratch, it.tokens, it.d);
  pack_item(it, w);
  for (int g = 0; g < it.group; ++g) {
    int i = 0;
    for (; i + kTile <= it.tokens; i += kTile) backward_tile<V, kTile>(it, w, g, i);
    for (; i < it.tokens; ++i) backward_tile<V, 1>(it, w, g, i);
  }
  for (int j = 0; j < it.tokens; ++j) {
    float* dkj = it.dk + j * it.kv_row;
    float* dvj = it.dv + j * it.kv_row;
    for (int e = 0; e < it.d; ++e) dkj[e] += w.dkt[e * w.tp + j], dvj[e] += w.dvt[e * w.tp + j];
  }
}

}  // namespace
}  // namespace lmstack::kernels
