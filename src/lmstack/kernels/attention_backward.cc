// Causal self-attention over dense [B, T, H, D] tensors for training: the forward through
// paged_attention (one block of T tokens per sequence), and the backward with the softmax
// statistics recomputed per query (FlashAttention-2 backward, Dao 2023, Alg. 2):
//   P_ij = e^(s_ij - lse_i),  Δ_i = dO_i·O_i,  dV_j += Σ_i P_ij·dO_i,
//   dS_ij = P_ij·(dO_i·V_j - Δ_i),  dQ_i += scale·Σ_j dS_ij·K_j,  dK_j += scale·Σ_i dS_ij·Q_i.
// j runs over the keys query i sees (j <= i, and j > i - window under a sliding window): a
// masked key has P_ij = 0 and so no gradient.
// Work is split over (sequence, kv head), so the G query heads sharing a kv head (GQA)
// accumulate into its dK/dV on one thread without atomics.
// Legend: B sequences, T tokens, H query heads, Hkv kv heads, G = H / Hkv, D head dim.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

float dot(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += a·x
void axpy(float* y, float a, const float* x, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

struct Dims {
  int64_t tokens;
  int heads, kv_heads, d;
  float scale;
  int window;  // 0: full causal; else query i sees keys i - window < j <= i
};

// Gradients of one (sequence b, kv head) pair: all its query heads, all queries.
void backward_item(const Dims& dm, int64_t b, int kvh, float* dq, float* dk, float* dv,
                   const float* dout, const float* q, const float* k, const float* v,
                   const float* out, std::vector<float>& p) {
  const int g = dm.heads / dm.kv_heads, d = dm.d;
  const int64_t t_n = dm.tokens;
  auto q_at = [&](int64_t i, int h) { return ((b * t_n + i) * dm.heads + h) * d; };
  auto kv_at = [&](int64_t j) { return ((b * t_n + j) * dm.kv_heads + kvh) * d; };
  p.resize(static_cast<size_t>(t_n));
  for (int h = kvh * g; h < (kvh + 1) * g; ++h) {
    for (int64_t i = 0; i < t_n; ++i) {
      const float* qi = q + q_at(i, h);
      const float* doi = dout + q_at(i, h);
      const int64_t first = attention_window_start(i, dm.window);
      float max_s = -INFINITY;
      for (int64_t j = first; j <= i; ++j) {
        p[static_cast<size_t>(j)] = dm.scale * dot(qi, k + kv_at(j), d);
        max_s = std::max(max_s, p[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = first; j <= i; ++j) {
        p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max_s);
        sum += p[static_cast<size_t>(j)];
      }
      const auto inv_sum = static_cast<float>(1.0 / sum);
      const float delta = dot(doi, out + q_at(i, h), d);
      for (int64_t j = first; j <= i; ++j) {
        const float pij = p[static_cast<size_t>(j)] * inv_sum;
        const float ds = pij * (dot(doi, v + kv_at(j), d) - delta) * dm.scale;
        axpy(dv + kv_at(j), pij, doi, d);
        axpy(dq + q_at(i, h), ds, k + kv_at(j), d);
        axpy(dk + kv_at(j), ds, qi, d);
      }
    }
  }
}

}  // namespace

void causal_attention(ThreadPool& pool, float* out, const float* q, const float* k, const float* v,
                      int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                      float scale, int window) {
  std::vector<int32_t> query_start(static_cast<size_t>(batch + 1)),
      context(static_cast<size_t>(batch), static_cast<int32_t>(tokens)),
      table(static_cast<size_t>(batch));
  for (int64_t b = 0; b <= batch; ++b)
    query_start[static_cast<size_t>(b)] = static_cast<int32_t>(b * tokens);
  for (int64_t b = 0; b < batch; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  // [B, T, Hkv, D] is a pool of B blocks of T tokens; paged_attention only reads k and v.
  const PagedKv kv{const_cast<float*>(k),
                   const_cast<float*>(v),
                   batch,
                   static_cast<int>(tokens),
                   kv_heads,
                   head_dim};
  const AttentionBatch ab{
      static_cast<int>(batch), query_start.data(), context.data(), table.data(), 1, window};
  paged_attention(pool, out, q, kv, ab, heads, scale);
}

void causal_attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                               float scale, int window) {
  LMSTACK_CHECK(kv_heads > 0 && heads % kv_heads == 0, "heads {} kv_heads {}", heads, kv_heads);
  const Dims dm{tokens, heads, kv_heads, head_dim, scale, window};
  pool.parallel_for(batch * kv_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> p;
    for (int64_t item = begin; item < end; ++item)
      backward_item(dm, item / kv_heads, static_cast<int>(item % kv_heads), dq, dk, dv, dout, q, k,
                    v, out, p);
  });
}

}  // namespace lmstack::kernels
