// The generic decoder forward (see decoder.h). Per layer, pre-norm residual blocks:
//   x += Wo · Attn(RoPE(Wq·n1(x)), RoPE(Wk·n1(x)), Wv·n1(x))      (Vaswani et al. 2017)
//   x += Wdown · (silu(Wgate·n2(x)) ⊙ Wup·n2(x))   [SwiGLU]  or  Wproj · gelu(Wfc·n2(x)) [GPT-2]
// then logits = lm_head · norm(x) for the requested rows only. Names of the intermediate
// buffers (h, q, k, v, attn, gate, up) follow the HF modules they mirror.
#include "lmstack/model/decoder.h"

#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/timer.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/rope_scaling.h"

namespace lmstack::model {
namespace {

const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

void ForwardBatch::add_sequence(const std::vector<int32_t>& new_tokens, int num_cached,
                                const std::vector<int32_t>& blocks, int block_size,
                                bool want_logits, bool all_logits) {
  const int n = static_cast<int>(new_tokens.size());
  LMSTACK_CHECK(n > 0, "a sequence in a batch needs at least one new token");
  LMSTACK_CHECK(static_cast<int64_t>(blocks.size()) * block_size >= num_cached + n,
                "{} blocks of {} cannot hold {} tokens", blocks.size(), block_size, num_cached + n);
  if (query_start.empty()) query_start.push_back(0);
  const int first_row = query_start.back();
  for (int i = 0; i < n; ++i) {
    const int pos = num_cached + i;
    tokens.push_back(new_tokens[static_cast<size_t>(i)]);
    positions.push_back(pos);
    slots.push_back(blocks[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size);
    if (all_logits) logit_rows.push_back(first_row + i);
  }
  if (want_logits && !all_logits) logit_rows.push_back(first_row + n - 1);
  query_start.push_back(first_row + n);
  context_len.push_back(num_cached + n);
  // Re-pack the block table when this sequence needs more columns than the others.
  const int width = std::max(max_blocks_per_seq, static_cast<int>(blocks.size()));
  if (width != max_blocks_per_seq) {
    std::vector<int32_t> wider(static_cast<size_t>(width) * (context_len.size() - 1), 0);
    for (size_t s = 0; s + 1 < context_len.size(); ++s)
      std::memcpy(&wider[s * static_cast<size_t>(width)],
                  &block_table[s * static_cast<size_t>(max_blocks_per_seq)],
                  static_cast<size_t>(max_blocks_per_seq) * sizeof(int32_t));
    block_table = std::move(wider);
    max_blocks_per_seq = width;
  }
  const size_t row = block_table.size();
  block_table.resize(row + static_cast<size_t>(width), 0);
  std::memcpy(&block_table[row], blocks.data(), blocks.size() * sizeof(int32_t));
}

Decoder::Decoder(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool)
    : config_(config), weights_(weights), pool_(pool) {
  if (!config.learned_positions) {
    inv_freq_ = rope_inv_freq(config);
  }
  moe_stats_.tokens_per_expert.assign(
      static_cast<size_t>(config.num_layers) * static_cast<size_t>(config.moe.num_experts), 0);
}

int64_t Decoder::activation_bytes() const {
  return static_cast<int64_t>(x_.size() + h_.size() + q_.size() + k_.size() + v_.size() +
                              attn_.size() + gate_.size() + up_.size());
}

void Decoder::ensure_scratch(int64_t tokens) {
  if (tokens <= scratch_tokens_) return;
  const auto alloc = [&](int64_t width) {
    return HostBuffer(static_cast<size_t>(tokens * width) * sizeof(float),
                      MemoryCategory::kActivations);
  };
  const ModelConfig& c = config_;
  x_ = alloc(c.hidden_size);
  h_ = alloc(std::max<int64_t>(c.hidden_size, c.q_dim()));
  q_ = alloc(c.q_dim());
  k_ = alloc(c.kv_dim());
  v_ = alloc(c.kv_dim());
  attn_ = alloc(c.q_dim());
  gate_ = alloc(c.intermediate_size);
  up_ = alloc(c.intermediate_size);
  scratch_tokens_ = tokens;
}

void Decoder::norm(float* y, const float* x, const Tensor& weight, const Tensor& bias,
                   int64_t rows) {
  if (config_.norm == NormKind::kLayerNorm)
    kernels::layernorm(y, x, weight.data<float>(), ptr_or_null(bias), rows, config_.hidden_size,
                       config_.norm_eps);
  else
    kernels::rmsnorm(y, x, weight.data<float>(), rows, config_.hidden_size, config_.norm_eps);
}

void Decoder::embed(const ForwardBatch& batch, float* x) {
  const int64_t t = batch.num_tokens();
  if (tp_.enabled())
    embed_vocab_parallel(batch, x);
  else
    kernels::embedding_lookup(x, weights_.embed, batch.tokens.data(), t);
  if (!config_.learned_positions) return;
  for (int32_t p : batch.positions)
    if (p < 0 || p >= config_.max_position)
      throw_error<RequestError>("position {} is outside the model's {} learned positions", p,
                                config_.max_position);
  // h_ is free before the first layer: it holds the position embeddings.
  float* pos = static_cast<float*>(h_.data());
  kernels::embedding_lookup(pos, weights_.pos_embed, batch.positions.data(), t);
  kernels::add_inplace(x, pos, t * config_.hidden_size);
}

// Megatron's vocabulary-parallel embedding: rank r holds rows [r·V/T, (r+1)·V/T); each token's
// row is found on exactly one rank, the others contribute zeros, and the sum is the lookup.
void Decoder::embed_vocab_parallel(const ForwardBatch& batch, float* x) {
  const int64_t t = batch.num_tokens(), width = config_.hidden_size;
  const int32_t local = config_.vocab_size, begin = tp_.rank * local;
  for (int64_t i = 0; i < t; ++i) {
    const int32_t id = batch.tokens[static_cast<size_t>(i)];
    if (id < 0 || id >= vocab_size())
      throw_error<RequestError>("token id {} at position {} is outside the vocabulary [0, {})", id,
                                i, vocab_size());
  }
  std::memset(x, 0, static_cast<size_t>(t * width) * sizeof(float));
  for (int64_t i = 0; i < t; ++i) {
    const int32_t row = batch.tokens[static_cast<size_t>(i)] - begin;
    if (row >= 0 && row < local) kernels::embedding_lookup(x + i * width, weights_.embed, &row, 1);
  }
  tp_.all_reduce_sum(x, t * width);
}

// x += W·in + bias. Under TP, W holds this rank's input columns (row-parallel): each rank's
// product is a partial sum, all-reduced before the residual add; the bias is added once (rank
// 0). h_ is free here (its normed input was consumed by the column-parallel layers).
void Decoder::row_parallel_add(float* x, const float* in, const Tensor& w, const Tensor& bias,
                               int64_t t) {
  if (!tp_.enabled()) {
    kernels::linear(pool_, x, in, w, t, ptr_or_null(bias), /*accumulate=*/true);
    return;
  }
  float* partial = static_cast<float*>(h_.data());
  kernels::linear(pool_, partial, in, w, t, tp_.rank == 0 ? ptr_or_null(bias) : nullptr);
  tp_.all_reduce_sum(partial, t * config_.hidden_size);
  kernels::add_inplace(x, partial, t * config_.hidden_size);
}

// logits[rows, V] = lm_head · h. Under TP each rank computes its vocabulary columns
// [rows, V/T]; the all-gather stacks them rank-major, re-laid out here row by row.
void Decoder::lm_head(std::vector<float>& logits, const float* h, int64_t rows) {
  if (!tp_.enabled()) {
    kernels::linear(pool_, logits.data(), h, weights_.lm_head, rows);
    return;
  }
  const int64_t local = config_.vocab_size, n = rows * local;
  tp_local_logits_.resize(static_cast<size_t>(n));
  tp_gathered_.resize(static_cast<size_t>(n * tp_.size));
  kernels::linear(pool_, tp_local_logits_.data(), h, weights_.lm_head, rows);
  tp_.all_gather(tp_local_logits_.data(), tp_gathered_.data(), n);
  for (int r = 0; r < tp_.size; ++r)
    for (int64_t row = 0; row < rows; ++row)
      std::memcpy(logits.data() + row * vocab_size() + r * local,
                  tp_gathered_.data() + r * n + row * local,
                  static_cast<size_t>(local) * sizeof(float));
}

void Decoder::attention_block(int l, const ForwardBatch& batch, KvCache& cache, float* x) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  const int64_t t = batch.num_tokens();
  float* h = static_cast<float*>(h_.data());
  float* q = static_cast<float*>(q_.data());
  float* k = static_cast<float*>(k_.data());
  float* v = static_cast<float*>(v_.data());
  float* attn = static_cast<float*>(attn_.data());
  norm(h, x, w.attn_norm, w.attn_norm_bias, t);
  observe(l, LinearInput::kQkv, h, t, c.hidden_size);
  if (w.mla) {  // DeepSeek multi-head latent attention (mla.h)
    mla_attention(pool_, x, h, batch, cache, l, c, w.wq, w.wo, *w.mla, inv_freq_.data(), mla_);
    return;
  }
  const kernels::LinearOut qkv[] = {
      {q, &w.wq, ptr_or_null(w.bq)}, {k, &w.wk, ptr_or_null(w.bk)}, {v, &w.wv, ptr_or_null(w.bv)}};
  kernels::linear_many(pool_, h, t, qkv);  // one parallel region for the three in decode
  if (c.qk_norm) {                         // Qwen3: RMSNorm over each head's D dims, before RoPE
    kernels::rmsnorm(q, q, w.q_norm.data<float>(), t * c.num_heads, c.head_dim, c.norm_eps);
    kernels::rmsnorm(k, k, w.k_norm.data<float>(), t * c.num_kv_heads, c.head_dim, c.norm_eps);
  }
  if (!c.learned_positions) {
    kernels::rope(q, batch.positions.data(), t, c.num_heads, c.head_dim, c.head_dim,
                  inv_freq_.data(), kernels::RopeStyle::kRotateHalf);
    kernels::rope(k, batch.positions.data(), t, c.num_kv_heads, c.head_dim, c.head_dim,
                  inv_freq_.data(), kernels::RopeStyle::kRotateHalf);
  }
  const kernels::PagedKv kv = cache.layer(l);
  kernels::kv_write(kv, k, v, batch.slots.data(), t);
  kernels::AttentionBatch ab;
  ab.num_seqs = batch.num_seqs();
  ab.query_start = batch.query_start.data();
  ab.context_len = batch.context_len.data();
  ab.block_table = batch.block_table.data();
  ab.max_blocks_per_seq = batch.max_blocks_per_seq;
  ab.window = c.attention_window(l);
  const float scale = attention_scale(c);
  kernels::paged_attention(pool_, attn, q, kv, ab, c.num_heads, scale);
  observe(l, LinearInput::kO, attn, t, c.q_dim());
  row_parallel_add(x, attn, w.wo, w.bo, t);
}

void Decoder::mlp_block(int l, int64_t t, float* x) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
  float* h = static_cast<float*>(h_.data());
  float* gate = static_cast<float*>(gate_.data());
  float* up = static_cast<float*>(up_.data());
  norm(h, x, w.mlp_norm, w.mlp_norm_bias, t);
  observe(l, LinearInput::kGateUp, h, t, c.hidden_size);
  if (w.moe) {  // a sparse layer: routed (+ shared) experts (moe.h)
    moe_forward(pool_, x, h, t, l, c, *w.moe, moe_scratch_, &moe_stats_);
    if (router_observer_) router_observer_(l, moe_scratch_.routing, t);
    return;
  }
  if (c.mlp == MlpKind::kSwiGlu) {
    const kernels::LinearOut gate_up[] = {{up, &w.w_up, ptr_or_null(w.b_up)}, {gate, &w.w_gate}};
    kernels::linear_many(pool_, h, t, gate_up);
    kernels::silu_mul(up, gate, up, t * c.intermediate_size);
  } else {
    kernels::linear(pool_, up, h, w.w_up, t, ptr_or_null(w.b_up));
    kernels::gelu_tanh(up, up, t * c.intermediate_size);
  }
  observe(l, LinearInput::kDown, up, t, c.intermediate_size);
  row_parallel_add(x, up, w.w_down, w.b_down, t);
}

void Decoder::forward(const ForwardBatch& batch, KvCache& cache, std::vector<float>& logits,
                      const TraceFn& trace) {
  const ModelConfig& c = config_;
  const int64_t t = batch.num_tokens();
  LMSTACK_CHECK(t > 0 && batch.positions.size() == static_cast<size_t>(t) &&
                    batch.slots.size() == static_cast<size_t>(t),
                "malformed batch of {} tokens", t);
  ensure_scratch(t);
  float* x = static_cast<float*>(x_.data());
  embed(batch, x);
  const int64_t trace_row = batch.logit_rows.empty() ? t - 1 : batch.logit_rows[0];
  for (int l = 0; l < c.num_layers; ++l) {
    Timer timer;
    attention_block(l, batch, cache, x);
    mlp_block(l, t, x);
    if (trace) {
      double sq = 0;
      for (int64_t i = 0; i < c.hidden_size; ++i) {
        const double e = x[trace_row * c.hidden_size + i];
        sq += e * e;
      }
      trace({l, timer.ms(), std::sqrt(sq)});
    }
  }
  // Final norm and lm_head only for the rows whose logits are wanted.
  const int64_t rows = static_cast<int64_t>(batch.logit_rows.size());
  logits.resize(static_cast<size_t>(rows * vocab_size()));
  if (rows == 0) return;
  float* h = static_cast<float*>(h_.data());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(h + r * c.hidden_size, x + batch.logit_rows[static_cast<size_t>(r)] * c.hidden_size,
                static_cast<size_t>(c.hidden_size) * sizeof(float));
  norm(h, h, weights_.final_norm, weights_.final_norm_bias, rows);
  lm_head(logits, h, rows);
}

}  // namespace lmstack::model
