// Reference causal attention over a paged KV cache: for each sequence, query and head, gather
// the keys at positions <= the query's position (and inside batch.window when it is set)
// through the block table (dequantized to f32 by kv_read_row), softmax the scaled
// scores (in double) and average the values. One thread, no tiling: the truth that the flash
// prefill and split-context decode variants (attention.cc) are tested against.
// Legend: T query rows, H query heads, Hkv kv heads, D head dim.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels::ref {

namespace {

// Row of kv head `kvh` for the sequence's token at position `pos`, as f32 (kv_read_row
// dequantizes bf16 and int8 pools).
void kv_row(float* dst, const PagedKv& kv, bool value, const int32_t* blocks, int64_t pos,
            int kvh) {
  const int64_t block = blocks[pos / kv.block_size];
  kv_read_row(dst, kv, value, block * kv.block_size + pos % kv.block_size, kvh);
}

}  // namespace

void paged_attention(ThreadPool&, float* out, const float* q, const PagedKv& kv,
                     const AttentionBatch& batch, int heads, float scale) {
  const int d = kv.head_dim;
  LMSTACK_CHECK(kv.kv_heads > 0 && heads % kv.kv_heads == 0, "heads {} kv_heads {}", heads,
                kv.kv_heads);
  const int group = heads / kv.kv_heads;
  std::vector<double> scores, acc(static_cast<size_t>(d));
  std::vector<float> row(static_cast<size_t>(d));
  for (int s = 0; s < batch.num_seqs; ++s) {
    const int64_t q_begin = batch.query_start[s], q_len = batch.query_start[s + 1] - q_begin;
    const int64_t ctx = batch.context_len[s];
    LMSTACK_CHECK(q_len >= 0 && q_len <= ctx, "sequence {}: {} queries, context {}", s, q_len, ctx);
    const int32_t* blocks = batch.block_table + static_cast<int64_t>(s) * batch.max_blocks_per_seq;
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t pos = ctx - q_len + i;
      for (int h = 0; h < heads; ++h) {
        const float* qh = q + ((q_begin + i) * heads + h) * d;
        const int kvh = h / group;
        const int64_t first = attention_window_start(pos, batch.window);
        scores.assign(static_cast<size_t>(pos + 1), 0.0);
        double max_s = -INFINITY;
        for (int64_t j = first; j <= pos; ++j) {
          kv_row(row.data(), kv, false, blocks, j, kvh);
          const float* kj = row.data();
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * kj[e];
          scores[static_cast<size_t>(j)] = dot * scale;
          max_s = std::max(max_s, dot * scale);
        }
        double sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = first; j <= pos; ++j) {
          const double p = std::exp(scores[static_cast<size_t>(j)] - max_s);
          sum += p;
          kv_row(row.data(), kv, true, blocks, j, kvh);
          const float* vj = row.data();
          for (int e = 0; e < d; ++e) acc[static_cast<size_t>(e)] += p * vj[e];
        }
        float* oh = out + ((q_begin + i) * heads + h) * d;
        for (int e = 0; e < d; ++e) oh[e] = static_cast<float>(acc[static_cast<size_t>(e)] / sum);
      }
    }
  }
}

// One (sequence b, query head h): row i's softmax over its keys in double, then per key j
//   dV_j += P_ij·dO_i,  dS_ij = scale·P_ij·(dO_i·V_j - dO_i·O_i),  dQ_i += dS_ij·K_j,
//   dK_j += dS_ij·Q_i.
namespace {
void attention_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* q,
                             const float* k, const float* v, const float* out, int64_t b,
                             int64_t tokens, int h, int heads, int kv_heads, int d, float scale,
                             int window) {
  const int kvh = h / (heads / kv_heads);
  auto q_at = [&](int64_t i) { return ((b * tokens + i) * heads + h) * d; };
  auto kv_at = [&](int64_t j) { return ((b * tokens + j) * kv_heads + kvh) * d; };
  std::vector<double> p(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t first = attention_window_start(i, window);
    double max_s = -INFINITY, sum = 0, delta = 0;
    for (int64_t j = first; j <= i; ++j) {
      double dot = 0;
      for (int e = 0; e < d; ++e) dot += static_cast<double>(q[q_at(i) + e]) * k[kv_at(j) + e];
      p[static_cast<size_t>(j)] = dot * scale;
      max_s = std::max(max_s, dot * scale);
    }
    for (int64_t j = first; j <= i; ++j)
      sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max_s));
    for (int e = 0; e < d; ++e) delta += static_cast<double>(dout[q_at(i) + e]) * out[q_at(i) + e];
    for (int64_t j = first; j <= i; ++j) {
      const double pij = p[static_cast<size_t>(j)] / sum;
      double dp = 0;
      for (int e = 0; e < d; ++e) dp += static_cast<double>(dout[q_at(i) + e]) * v[kv_at(j) + e];
      const double ds = scale * pij * (dp - delta);
      for (int e = 0; e < d; ++e) {
        dv[kv_at(j) + e] += static_cast<float>(pij * dout[q_at(i) + e]);
        dq[q_at(i) + e] += static_cast<float>(ds * k[kv_at(j) + e]);
        dk[kv_at(j) + e] += static_cast<float>(ds * q[q_at(i) + e]);
      }
    }
  }
}
}  // namespace

void causal_attention_backward(ThreadPool&, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                               float scale, int window) {
  LMSTACK_CHECK(kv_heads > 0 && heads % kv_heads == 0, "heads {} kv_heads {}", heads, kv_heads);
  for (int64_t b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      attention_backward_head(dq, dk, dv, dout, q, k, v, out, b, tokens, h, heads, kv_heads,
                              head_dim, scale, window);
}

}  // namespace lmstack::kernels::ref
