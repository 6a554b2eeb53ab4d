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

}  // namespace lmstack::kernels::ref
