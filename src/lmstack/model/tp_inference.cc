// TP inference: slicing a loaded model for one rank, and serve's batch mirroring (see
// tp_inference.h). The forward's collectives are in decoder.cc.
#include "lmstack/model/tp_inference.h"

#include <array>
#include <string>

#include "lmstack/core/error.h"

namespace lmstack::model {
namespace {

// Replicated tensors (norms, q/k norms, the output bias) are small: an owned copy each, so no
// tensor of the rank keeps the whole model's storage (or its file mapping) alive.
Tensor replicate(const Tensor& t) {
  return t.defined() ? t.clone(MemoryCategory::kWeights) : Tensor();
}

Tensor slice(const std::string& name, const Tensor& t, const TpLayout& l, int head_dim) {
  return t.defined() ? tp_slice_stored(name, t, l, head_dim) : Tensor();
}

LayerWeights shard_layer(const LayerWeights& w, int i, const TpLayout& l, int hd) {
  const std::string p = "layers." + std::to_string(i) + ".";
  LayerWeights s;
  s.attn_norm = replicate(w.attn_norm), s.attn_norm_bias = replicate(w.attn_norm_bias);
  s.mlp_norm = replicate(w.mlp_norm), s.mlp_norm_bias = replicate(w.mlp_norm_bias);
  s.q_norm = replicate(w.q_norm), s.k_norm = replicate(w.k_norm);
  s.wq = slice(p + "wq", w.wq, l, hd), s.bq = slice(p + "bq", w.bq, l, hd);
  s.wk = slice(p + "wk", w.wk, l, hd), s.bk = slice(p + "bk", w.bk, l, hd);
  s.wv = slice(p + "wv", w.wv, l, hd), s.bv = slice(p + "bv", w.bv, l, hd);
  s.wo = slice(p + "wo", w.wo, l, hd), s.bo = replicate(w.bo);  // bo: added by rank 0 only
  s.w_gate = slice(p + "w_gate", w.w_gate, l, hd);
  s.w_up = slice(p + "w_up", w.w_up, l, hd), s.b_up = slice(p + "b_up", w.b_up, l, hd);
  s.w_down = slice(p + "w_down", w.w_down, l, hd), s.b_down = replicate(w.b_down);
  return s;
}

}  // namespace

void check_tp_inference_config(const ModelConfig& c, int tp) {
  if (tp < 1) throw_error<ConfigError>("--tp {}: must be at least 1", tp);
  if (c.moe.enabled())
    throw_error<ConfigError>(
        "--tp: {} is a mixture of experts (num_experts = {}); tensor-parallel inference "
        "supports dense models only",
        c.architecture, c.moe.num_experts);
  if (c.mla.enabled())
    throw_error<ConfigError>(
        "--tp: {} uses multi-head latent attention (kv_lora_rank = {}); tensor-parallel "
        "inference supports Q/K/V attention only",
        c.architecture, c.mla.kv_lora_rank);
  (void)tp_layout(c, tp, 0);  // heads, KV heads, intermediate and vocab divisibility
}

TpShard tp_shard(const ModelConfig& full, const ModelWeights& whole, int tp, int rank) {
  check_tp_inference_config(full, tp);
  TpShard s;
  s.layout = tp_layout(full, tp, rank);
  s.config = tp_local_config(full, s.layout);
  const int hd = full.head_dim;
  s.weights.embed = slice("embed", whole.embed, s.layout, hd);
  s.weights.pos_embed = replicate(whole.pos_embed);
  for (size_t i = 0; i < whole.layers.size(); ++i)
    s.weights.layers.push_back(shard_layer(whole.layers[i], static_cast<int>(i), s.layout, hd));
  s.weights.final_norm = replicate(whole.final_norm);
  s.weights.final_norm_bias = replicate(whole.final_norm_bias);
  const bool tied = whole.lm_head.raw_data() == whole.embed.raw_data();
  s.weights.lm_head = tied ? s.weights.embed : slice("lm_head", whole.lm_head, s.layout, hd);
  return s;
}

// The header: kind, then kForward: tokens, sequences, block-table entries, its columns, logit
// rows; kCopies: the number of (src, dst) pairs.
enum MirrorKind : int32_t { kShutdown = 0, kForward = 1, kCopies = 2 };
using Header = std::array<int32_t, 6>;

void tp_send_batch(const TensorParallelGroup& g, const ForwardBatch& b) {
  Header head{kForward,
              b.num_tokens(),
              b.num_seqs(),
              static_cast<int32_t>(b.block_table.size()),
              b.max_blocks_per_seq,
              static_cast<int32_t>(b.logit_rows.size())};
  g.broadcast_i32(head.data(), static_cast<int64_t>(head.size()));
  std::vector<int32_t> body;
  for (const std::vector<int32_t>* v : {&b.tokens, &b.positions, &b.slots, &b.query_start,
                                        &b.context_len, &b.block_table, &b.logit_rows})
    body.insert(body.end(), v->begin(), v->end());
  g.broadcast_i32(body.data(), static_cast<int64_t>(body.size()));
}

void tp_send_block_copies(const TensorParallelGroup& g,
                          const std::vector<std::pair<int32_t, int32_t>>& copies) {
  Header head{kCopies, static_cast<int32_t>(copies.size())};
  g.broadcast_i32(head.data(), static_cast<int64_t>(head.size()));
  std::vector<int32_t> body;
  for (auto [src, dst] : copies) body.push_back(src), body.push_back(dst);
  g.broadcast_i32(body.data(), static_cast<int64_t>(body.size()));
}

void tp_send_shutdown(const TensorParallelGroup& g) {
  Header head{kShutdown};
  g.broadcast_i32(head.data(), static_cast<int64_t>(head.size()));
}

namespace {

void receive_batch(const TensorParallelGroup& g, const Header& head, ForwardBatch& b) {
  const auto n = [](int32_t v) { return static_cast<size_t>(v); };
  const size_t t = n(head[1]), s = n(head[2]);
  b.tokens.resize(t), b.positions.resize(t), b.slots.resize(t);
  b.query_start.resize(s + 1), b.context_len.resize(s);
  b.block_table.resize(n(head[3])), b.max_blocks_per_seq = head[4];
  b.logit_rows.resize(n(head[5]));
  std::vector<int32_t> body(3 * t + 2 * s + 1 + n(head[3]) + n(head[5]));
  g.broadcast_i32(body.data(), static_cast<int64_t>(body.size()));
  auto at = body.begin();
  for (std::vector<int32_t>* v : {&b.tokens, &b.positions, &b.slots, &b.query_start, &b.context_len,
                                  &b.block_table, &b.logit_rows}) {
    std::copy(at, at + static_cast<std::ptrdiff_t>(v->size()), v->begin());
    at += static_cast<std::ptrdiff_t>(v->size());
  }
}

}  // namespace

int64_t tp_follow(Decoder& decoder, KvCache& cache, const TensorParallelGroup& g) {
  ForwardBatch batch;
  std::vector<float> logits;
  int64_t forwards = 0;
  for (;;) {
    Header head{};
    g.broadcast_i32(head.data(), static_cast<int64_t>(head.size()));
    if (head[0] == kShutdown) return forwards;
    if (head[0] == kCopies) {
      std::vector<int32_t> pairs(2 * static_cast<size_t>(head[1]));
      g.broadcast_i32(pairs.data(), static_cast<int64_t>(pairs.size()));
      for (size_t i = 0; i < pairs.size(); i += 2) cache.copy_block(pairs[i], pairs[i + 1]);
      continue;
    }
    LMSTACK_CHECK(head[0] == kForward, "tp follower: unknown message kind {}", head[0]);
    receive_batch(g, head, batch);
    decoder.forward(batch, cache, logits);
    ++forwards;
  }
}

}  // namespace lmstack::model
