// Writing the mixture-of-experts and latent-attention models as GGUF, with the keys and
// tensor layout of llama.cpp's convert_hf_to_gguf.py (LlamaModel for Mixtral, Qwen2MoeModel /
// Qwen3MoeModel, DeepseekV2Model for V2 and V3): experts stacked into 3-D
// blk.N.ffn_{gate,up,down}_exps [E, F, C] of the file's matrix type, routers (ffn_gate_inp,
// ffn_gate_inp_shexp) and exp_probs_b in f32, and MLA's kv_b_proj split into attn_k_b
// [H, r, nope] (each head's W_UK transposed) and attn_v_b [H, v, r], with the absorbed-MQA
// keys (head_count_kv 1, key_length r + rope dims, value_length r, *_mla the per-head dims).
// gguf_moe.cc reads all of it back.
#include <cstring>

#include "lmstack/kernels/quant.h"
#include "lmstack/model/gguf_internal.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"

namespace lmstack::model::gguf_detail {
namespace {

void write_deepseek_keys(GgufWriter& w, const std::string& a, const ModelConfig& c) {
  const MlaConfig& m = c.mla;
  const MoeConfig& e = c.moe;
  const bool v3 = c.arch == Arch::kDeepseekV3;
  if (v3 && !m.rope_interleave)
    throw_error<ConfigError>(
        "convert: DeepSeek-V3 with rope_interleave false has no llama.cpp form (its deepseek2 "
        "RoPE rotates interleaved pairs)");
  auto u32 = [&](const char* key, int64_t v) {
    w.set(a + "." + key, GgufValue::u32(static_cast<uint32_t>(v)));
  };
  // The dense keys written before are the per-head ones; llama.cpp wants absorbed MQA.
  u32("attention.head_count_kv", 1);
  u32("rope.dimension_count", m.qk_rope_head_dim);
  u32("attention.key_length", m.kv_lora_rank + m.qk_rope_head_dim);
  u32("attention.value_length", m.kv_lora_rank);
  u32("attention.key_length_mla", m.qk_head_dim());
  u32("attention.value_length_mla", m.v_head_dim);
  int dense = 0;
  while (dense < c.num_layers && !e.is_sparse(dense)) ++dense;
  u32("leading_dense_block_count", dense);
  if (m.q_lora_rank > 0) u32("attention.q_lora_rank", m.q_lora_rank);
  u32("attention.kv_lora_rank", m.kv_lora_rank);
  if (!e.enabled()) return;
  u32("expert_feed_forward_length", e.expert_intermediate);
  u32("expert_count", e.num_experts);
  u32("expert_used_count", e.top_k);
  u32("expert_shared_count", e.shared_intermediate / e.expert_intermediate);
  w.set(a + ".expert_weights_scale", GgufValue::f32(e.routed_scale));
  if (e.norm_topk_prob) w.set(a + ".expert_weights_norm", GgufValue::boolean(true));
  u32("expert_group_count", e.num_groups);
  u32("expert_group_used_count", e.topk_groups);
  u32("expert_gating_func", v3 ? 2 : 1);  // llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE
}

// [E, rows, cols] of the experts' matrices, each converted like any matrix.
Tensor stack(MatrixConverter& conv, const std::vector<Tensor>& experts, const std::string& name) {
  std::vector<Tensor> parts;
  for (const Tensor& t : experts) parts.push_back(conv(t, name));
  const int64_t E = std::ssize(parts), rows = parts[0].dim(0), cols = parts[0].dim(1);
  return concat_rows(parts).reshape(Shape{E, rows, cols});
}

void add_moe_mlp(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                 const MoeLayerWeights& m) {
  w.add_tensor(blk(i, "ffn_gate_inp.weight"), as_f32(m.router));
  if (c.moe.score_bias) w.add_tensor(blk(i, "exp_probs_b.bias"), as_f32(m.score_bias));
  w.add_tensor(blk(i, "ffn_gate_exps.weight"), stack(conv, m.w_gate, blk(i, "ffn_gate_exps")));
  w.add_tensor(blk(i, "ffn_up_exps.weight"), stack(conv, m.w_up, blk(i, "ffn_up_exps")));
  w.add_tensor(blk(i, "ffn_down_exps.weight"), stack(conv, m.w_down, blk(i, "ffn_down_exps")));
  if (c.moe.shared_gate)
    w.add_tensor(blk(i, "ffn_gate_inp_shexp.weight"), as_f32(m.shared_expert_gate));
  if (c.moe.shared_intermediate > 0) {
    auto mat = [&](const char* s, const Tensor& t) { w.add_tensor(blk(i, s), conv(t, blk(i, s))); };
    mat("ffn_gate_shexp.weight", m.shared_gate);
    mat("ffn_up_shexp.weight", m.shared_up);
    mat("ffn_down_shexp.weight", m.shared_down);
  }
}

// attn_k_b [H, r, nope] and attn_v_b [H, v, r] from kv_b_proj [H·(nope + v), r].
void add_split_kv_b(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                    const Tensor& kv_b) {
  const MlaConfig& m = c.mla;
  const int64_t H = c.num_heads, r = m.kv_lora_rank, nope = m.qk_nope_head_dim, v = m.v_head_dim;
  std::vector<float> all(static_cast<size_t>(kv_b.numel()));
  kernels::dequantize_rows(kv_b, 0, kv_b.dim(0), all.data());
  std::vector<float> kb(static_cast<size_t>(H * r * nope)), vb(static_cast<size_t>(H * v * r));
  for (int64_t h = 0; h < H; ++h) {
    const float* head = all.data() + h * (nope + v) * r;
    for (int64_t d = 0; d < nope; ++d)
      for (int64_t k = 0; k < r; ++k)
        kb[static_cast<size_t>((h * r + k) * nope + d)] = head[d * r + k];
    std::memcpy(vb.data() + h * v * r, head + nope * r, static_cast<size_t>(v * r) * sizeof(float));
  }
  const std::string kn = blk(i, "attn_k_b.weight"), vn = blk(i, "attn_v_b.weight");
  const Tensor k2 = Tensor::from_f32(Shape{H * r, nope}, kb, MemoryCategory::kBuffers);
  const Tensor v2 = Tensor::from_f32(Shape{H * v, r}, vb, MemoryCategory::kBuffers);
  w.add_tensor(kn, conv(k2, kn).reshape(Shape{H, r, nope}));
  w.add_tensor(vn, conv(v2, vn).reshape(Shape{H, v, r}));
}

void add_mla_attention(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                       const LayerWeights& l) {
  const MlaLayerWeights& m = *l.mla;
  auto mat = [&](const char* s, const Tensor& t) { w.add_tensor(blk(i, s), conv(t, blk(i, s))); };
  if (c.mla.q_lora_rank > 0) {
    mat("attn_q_a.weight", m.q_a);
    w.add_tensor(blk(i, "attn_q_a_norm.weight"), as_f32(m.q_a_norm));
    mat("attn_q_b.weight", l.wq);
  } else {
    mat("attn_q.weight", l.wq);
  }
  mat("attn_kv_a_mqa.weight", m.kv_a);
  w.add_tensor(blk(i, "attn_kv_a_norm.weight"), as_f32(m.kv_a_norm));
  add_split_kv_b(w, conv, c, i, m.kv_b);
  mat("attn_output.weight", l.wo);
}

}  // namespace

void write_moe_mla_keys(GgufWriter& w, const ModelConfig& c) {
  const std::string a = gguf_arch_name(c.arch);
  const MoeConfig& e = c.moe;
  if (c.mla.enabled()) {
    write_deepseek_keys(w, a, c);
    return;
  }
  auto u32 = [&](const char* key, int64_t v) {
    w.set(a + "." + key, GgufValue::u32(static_cast<uint32_t>(v)));
  };
  u32("expert_count", e.num_experts);
  u32("expert_used_count", e.top_k);
  if (c.arch == Arch::kMixtral) return;  // feed_forward_length is the expert width
  u32("expert_feed_forward_length", e.expert_intermediate);
  if (e.shared_intermediate > 0) u32("expert_shared_feed_forward_length", e.shared_intermediate);
  // llama.cpp's graphs: qwen3moe always renormalizes the top-k, qwen2moe never; the key is
  // written only where the model differs, and lmstack's loader honours it.
  if (e.norm_topk_prob != (c.arch == Arch::kQwen3Moe))
    w.set(a + ".expert_weights_norm", GgufValue::boolean(e.norm_topk_prob));
}

void add_moe_mla_layer(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                       const LayerWeights& l) {
  if (c.mla.enabled())
    add_mla_attention(w, conv, c, i, l);
  else
    add_llama_attention(w, conv, c, i, l, c.arch == Arch::kMixtral);
  w.add_tensor(blk(i, "ffn_norm.weight"), as_f32(l.mlp_norm));
  if (c.moe.is_sparse(i)) {
    add_moe_mlp(w, conv, c, i, *l.moe);
    return;
  }
  auto mat = [&](const char* s, const Tensor& t) { w.add_tensor(blk(i, s), conv(t, blk(i, s))); };
  mat("ffn_gate.weight", l.w_gate);
  mat("ffn_up.weight", l.w_up);
  mat("ffn_down.weight", l.w_down);
}

}  // namespace lmstack::model::gguf_detail
