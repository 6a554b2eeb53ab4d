// Loading the mixture-of-experts and latent-attention GGUF architectures, with the keys and
// tensors llama.cpp's convert_hf_to_gguf.py writes and src/llama-model.cpp reads:
//   "llama" with {arch}.expert_count (Mixtral), "qwen2moe", "qwen3moe", "deepseek2"
//   (DeepSeek-V2 when expert_gating_func is softmax or absent, as llama.cpp defaults it;
//   DeepSeek-V3 when sigmoid). Experts are 3-D stacks blk.N.ffn_{gate,up,down}_exps
//   ([E, F, C], each expert a 2-D slice viewed in place, quantized or not); the router
//   ffn_gate_inp and V3's exp_probs_b.bias are read as f32.
// DeepSeek MLA: llama.cpp stores it as absorbed MQA (head_count_kv 1, key_length = kv_lora_rank
// + rope dims, value_length = kv_lora_rank, key_length_mla / value_length_mla the per-head
// dims), with kv_b_proj either whole (attn_kv_b, files before 2025) or split into attn_k_b
// [H, r, nope] (transposed) and attn_v_b [H, v, r]; the split form is put back into kv_b
// [H·(nope + v), r] in f32. Every {arch}.* key that lmstack does not read is refused: it would
// describe something (YaRN, MTP layers, other routing) that lmstack would silently not run.
#include <algorithm>
#include <array>
#include <cstring>

#include "lmstack/kernels/quant.h"
#include "lmstack/model/gguf_internal.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"

namespace lmstack::model::gguf_detail {
namespace {

// The {arch}.* keys these loaders read (llama.cpp's LLM_KV names, without the prefix).
constexpr std::array<const char*, 34> kKnownKeys = {
    "vocab_size",
    "context_length",
    "embedding_length",
    "block_count",
    "feed_forward_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.layer_norm_rms_epsilon",
    "attention.key_length",
    "attention.value_length",
    "attention.key_length_mla",
    "attention.value_length_mla",
    "attention.q_lora_rank",
    "attention.kv_lora_rank",
    "attention.sliding_window",
    "rope.freq_base",
    "rope.dimension_count",
    "rope.scaling.type",
    "rope.scaling.factor",
    "rope.scaling.original_context_length",
    "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
    "expert_shared_count",
    "expert_weights_scale",
    "expert_weights_norm",
    "expert_gating_func",
    "expert_group_count",
    "expert_group_used_count",
    "leading_dense_block_count",
};

void refuse_unknown_keys(const GgufFile& f, const std::string& a) {
  const std::string prefix = a + ".";
  for (const auto& [key, value] : f.metadata()) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string rest = key.substr(prefix.size());
    if (std::none_of(kKnownKeys.begin(), kKnownKeys.end(),
                     [&](const char* k) { return rest == k; }))
      throw_error<ConfigError>(
          "{}: metadata key '{}' is not supported for {} (lmstack would not run what it "
          "describes)",
          f.path(), key, a);
  }
}

std::string arch_of(const GgufFile& f) { return f.get_string("general.architecture"); }

int64_t req(const GgufFile& f, const std::string& a, const char* key) {
  return f.get_int(a + "." + key);
}

// The llama-layout fields: shapes, norm epsilon, RoPE (only plain or linear RoPE).
void common_fields(const GgufFile& f, const std::string& a, Json& j) {
  j["hidden_size"] = req(f, a, "embedding_length");
  j["intermediate_size"] = req(f, a, "feed_forward_length");
  j["num_hidden_layers"] = req(f, a, "block_count");
  j["num_attention_heads"] = req(f, a, "attention.head_count");
  j["max_position_embeddings"] = req(f, a, "context_length");
  j["rms_norm_eps"] = f.get_float(a + ".attention.layer_norm_rms_epsilon");
  j["rope_theta"] = f.get_float(a + ".rope.freq_base", 10000.0);
  j["rope_scaling"] = rope_scaling_from_gguf(f, a);
}

// llama / qwen2moe / qwen3moe attention: GQA with one head dim for keys, values and RoPE.
void gqa_fields(const GgufFile& f, const std::string& a, Json& j) {
  const int64_t heads = j["num_attention_heads"].get<int64_t>();
  const int64_t hidden = j["hidden_size"].get<int64_t>();
  j["num_key_value_heads"] = f.get_int(a + ".attention.head_count_kv", heads);
  const int64_t hd = f.get_int(a + ".attention.key_length", heads > 0 ? hidden / heads : 0);
  if (f.get_int(a + ".attention.value_length", hd) != hd ||
      f.get_int(a + ".rope.dimension_count", hd) != hd)
    throw_error<ConfigError>(
        "{}: {}.attention.value_length / rope.dimension_count differ from key_length {} "
        "(partial rotary embeddings are not supported)",
        f.path(), a, hd);
  j["head_dim"] = hd;
}

// Qwen-MoE's dense layers: those without a router (mlp_only_layers).
Json layers_without_router(const GgufFile& f, int64_t layers) {
  Json dense = Json::array();
  for (int64_t l = 0; l < layers; ++l)
    if (!f.has_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight")) dense.push_back(l);
  return dense;
}

void qwen_moe_fields(const GgufFile& f, const std::string& a, Json& j) {
  const bool qwen3 = a == "qwen3moe";
  j["architectures"] = {qwen3 ? "Qwen3MoeForCausalLM" : "Qwen2MoeForCausalLM"};
  gqa_fields(f, a, j);
  j["num_experts"] = req(f, a, "expert_count");
  j["num_experts_per_tok"] = req(f, a, "expert_used_count");
  j["moe_intermediate_size"] = req(f, a, "expert_feed_forward_length");
  // llama.cpp's qwen3moe graph always renormalizes the top-k, qwen2moe never.
  j["norm_topk_prob"] = f.get_bool(a + ".expert_weights_norm", qwen3);
  if (!qwen3) {
    j["shared_expert_intermediate_size"] = f.get_int(a + ".expert_shared_feed_forward_length", 0);
    j["qkv_bias"] = f.has_tensor("blk.0.attn_q.bias");
  }
  j["use_sliding_window"] = false;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = layers_without_router(f, j["num_hidden_layers"].get<int64_t>());
}

void deepseek_mla_fields(const GgufFile& f, const std::string& a, Json& j) {
  const int64_t rope = req(f, a, "rope.dimension_count");
  const int64_t r = req(f, a, "attention.kv_lora_rank");
  const int64_t q = f.get_int(a + ".attention.q_lora_rank", 0);
  int64_t qk = 0, v = 0;
  if (f.has(a + ".attention.key_length_mla")) {  // absorbed-MQA keys (llama.cpp since 2025)
    qk = req(f, a, "attention.key_length_mla");
    v = req(f, a, "attention.value_length_mla");
    if (f.get_int(a + ".attention.key_length", r + rope) != r + rope ||
        f.get_int(a + ".attention.value_length", r) != r)
      throw_error<FormatError>(
          "{}: {}.attention.key_length / value_length must be kv_lora_rank + rope dims ({}) / "
          "kv_lora_rank ({}) next to key_length_mla",
          f.path(), a, r + rope, r);
  } else {  // older files: the per-head dims
    qk = req(f, a, "attention.key_length");
    v = req(f, a, "attention.value_length");
  }
  if (qk <= rope)
    throw_error<ConfigError>("{}: key length {} leaves no non-RoPE dims beside {} RoPE dims",
                             f.path(), qk, rope);
  j["num_key_value_heads"] = j["num_attention_heads"];
  j["q_lora_rank"] = q > 0 ? Json(q) : Json(nullptr);
  j["kv_lora_rank"] = r;
  j["qk_rope_head_dim"] = rope;
  j["qk_nope_head_dim"] = qk - rope;
  j["v_head_dim"] = v;
}

void deepseek_fields(const GgufFile& f, const std::string& a, Json& j) {
  const int64_t gating = f.get_int(a + ".expert_gating_func", 1);  // llama.cpp: absent = softmax
  if (gating != 1 && gating != 2)
    throw_error<ConfigError>(
        "{}: {}.expert_gating_func {} is not supported (1 softmax: DeepSeek-V2, 2 sigmoid: V3)",
        f.path(), a, gating);
  const bool v3 = gating == 2;
  j["architectures"] = {v3 ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  deepseek_mla_fields(f, a, j);
  if (v3) j["rope_interleave"] = true;  // llama.cpp's deepseek2 RoPE rotates pairs (2i, 2i+1)
  if (!f.has(a + ".expert_count")) {
    j["n_routed_experts"] = nullptr;
    return;
  }
  j["n_routed_experts"] = req(f, a, "expert_count");
  j["num_experts_per_tok"] = req(f, a, "expert_used_count");
  j["moe_intermediate_size"] = req(f, a, "expert_feed_forward_length");
  j["n_shared_experts"] = f.get_int(a + ".expert_shared_count", 0);
  j["routed_scaling_factor"] = f.get_float(a + ".expert_weights_scale", 1.0);
  j["first_k_dense_replace"] = f.get_int(a + ".leading_dense_block_count", 0);
  const int64_t groups = f.get_int(a + ".expert_group_count", 1);
  j["n_group"] = groups;
  j["topk_group"] = f.get_int(a + ".expert_group_used_count", groups);
  const bool norm = f.get_bool(a + ".expert_weights_norm", false);
  if (v3) {
    j["scoring_func"] = "sigmoid";
    j["norm_topk_prob"] = norm;
    return;
  }
  // DeepSeek-V2 as transformers runs it: no renormalization, a group's score is its best
  // expert. (llama.cpp's graph scores a group by its best two whatever the gating.)
  if (norm)
    throw_error<ConfigError>(
        "{}: {}.expert_weights_norm true with softmax gating is not supported (DeepSeek-V2 does "
        "not renormalize)",
        f.path(), a);
  j["topk_method"] = groups > 1 ? "group_limited_greedy" : "greedy";
}

}  // namespace

bool is_moe_gguf(const GgufFile& f) {
  const std::string a = arch_of(f);
  return a == "qwen2moe" || a == "qwen3moe" || a == "deepseek2" ||
         (a == "llama" && f.has(a + ".expert_count"));
}

void moe_config_fields(const GgufFile& f, Json& j) {
  const std::string a = arch_of(f);
  refuse_unknown_keys(f, a);
  common_fields(f, a, j);
  if (a == "llama") {  // Mixtral: every MLP is the MoE block, feed_forward_length its width
    j["architectures"] = {"MixtralForCausalLM"};
    gqa_fields(f, a, j);
    j["num_local_experts"] = req(f, a, "expert_count");
    j["num_experts_per_tok"] = req(f, a, "expert_used_count");
  } else if (a == "deepseek2") {
    deepseek_fields(f, a, j);
  } else {
    qwen_moe_fields(f, a, j);
  }
}

namespace {

// Expert e of a [E, F, C] stack, as a [F, C] view.
Tensor expert(const Tensor& stack, int e) {
  return stack.slice(e, e + 1).reshape(Shape{stack.dim(1), stack.dim(2)});
}

std::vector<float> to_f32(const Tensor& t) {
  const Tensor m = t.reshape(Shape{t.numel() / t.dim(t.rank() - 1), t.dim(t.rank() - 1)});
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::dequantize_rows(m, 0, m.dim(0), out.data());
  return out;
}

// kv_b_proj [H·(nope + v), r] from llama.cpp's attn_k_b [H, r, nope] (W_UK transposed per
// head) and attn_v_b [H, v, r].
Tensor kv_b_from_split(const ModelConfig& c, TensorSource& src, int i) {
  const MlaConfig& m = c.mla;
  const int64_t H = c.num_heads, r = m.kv_lora_rank, nope = m.qk_nope_head_dim, v = m.v_head_dim;
  const std::vector<float> kb = to_f32(src.tensor(blk(i, "attn_k_b.weight"), Shape{H, r, nope}));
  const std::vector<float> vb = to_f32(src.tensor(blk(i, "attn_v_b.weight"), Shape{H, v, r}));
  std::vector<float> out(static_cast<size_t>(H * (nope + v) * r));
  for (int64_t h = 0; h < H; ++h) {
    float* head = out.data() + h * (nope + v) * r;
    for (int64_t d = 0; d < nope; ++d)
      for (int64_t k = 0; k < r; ++k)
        head[d * r + k] = kb[static_cast<size_t>((h * r + k) * nope + d)];
    std::memcpy(head + nope * r, vb.data() + h * v * r, static_cast<size_t>(v * r) * sizeof(float));
  }
  return Tensor::from_f32(Shape{H * (nope + v), r}, out, MemoryCategory::kWeights);
}

void load_mla_attention(const ModelConfig& c, TensorSource& src, int i, LayerWeights& l) {
  const MlaConfig& m = c.mla;
  const int64_t C = c.hidden_size, H = c.num_heads, r = m.kv_lora_rank;
  l.mla = std::make_shared<MlaLayerWeights>();
  MlaLayerWeights& w = *l.mla;
  if (m.q_lora_rank > 0) {
    w.q_a = src.matrix(blk(i, "attn_q_a.weight"), Shape{m.q_lora_rank, C});
    w.q_a_norm = src.small(blk(i, "attn_q_a_norm.weight"), Shape{m.q_lora_rank});
    l.wq = src.matrix(blk(i, "attn_q_b.weight"), Shape{H * m.qk_head_dim(), m.q_lora_rank});
  } else {
    l.wq = src.matrix(blk(i, "attn_q.weight"), Shape{H * m.qk_head_dim(), C});
  }
  w.kv_a = src.matrix(blk(i, "attn_kv_a_mqa.weight"), Shape{r + m.qk_rope_head_dim, C});
  w.kv_a_norm = src.small(blk(i, "attn_kv_a_norm.weight"), Shape{r});
  const std::string kv_b = blk(i, "attn_kv_b.weight");
  if (src.has(kv_b)) {  // files before the split (or with both: the split ones are redundant)
    w.kv_b = src.matrix(kv_b, Shape{H * (m.qk_nope_head_dim + m.v_head_dim), r});
    for (const char* s : {"attn_k_b.weight", "attn_v_b.weight"})
      if (src.has(blk(i, s))) src.mark_used(blk(i, s));
  } else {
    w.kv_b = kv_b_from_split(c, src, i);
  }
  l.wo = src.matrix(blk(i, "attn_output.weight"), Shape{C, H * m.v_head_dim});
}

void load_moe_mlp(const ModelConfig& c, TensorSource& src, int i, LayerWeights& l) {
  const MoeConfig& m = c.moe;
  const int64_t C = c.hidden_size, E = m.num_experts, F = m.expert_intermediate;
  l.moe = std::make_shared<MoeLayerWeights>();
  MoeLayerWeights& w = *l.moe;
  w.router = src.small(blk(i, "ffn_gate_inp.weight"), Shape{E, C});
  if (m.score_bias) w.score_bias = src.small(blk(i, "exp_probs_b.bias"), Shape{E});
  const Tensor gate = src.tensor(blk(i, "ffn_gate_exps.weight"), Shape{E, F, C});
  const Tensor up = src.tensor(blk(i, "ffn_up_exps.weight"), Shape{E, F, C});
  const Tensor down = src.tensor(blk(i, "ffn_down_exps.weight"), Shape{E, C, F});
  for (int e = 0; e < m.num_experts; ++e) {
    w.w_gate.push_back(expert(gate, e));
    w.w_up.push_back(expert(up, e));
    w.w_down.push_back(expert(down, e));
  }
  const int64_t S = m.shared_intermediate;
  if (S > 0) {
    w.shared_gate = src.matrix(blk(i, "ffn_gate_shexp.weight"), Shape{S, C});
    w.shared_up = src.matrix(blk(i, "ffn_up_shexp.weight"), Shape{S, C});
    w.shared_down = src.matrix(blk(i, "ffn_down_shexp.weight"), Shape{C, S});
  }
  if (m.shared_gate) {  // convert writes HF's [1, C]; llama.cpp also accepts [C]
    const std::string name = blk(i, "ffn_gate_inp_shexp.weight");
    const bool flat = src.has(name) && src.shape_of(name).rank() == 1;
    w.shared_expert_gate = src.small(name, flat ? Shape{C} : Shape{1, C}).reshape(Shape{1, C});
  }
}

}  // namespace

void load_moe_mla_layer(const ModelConfig& c, TensorSource& src, int i, bool permuted,
                        LayerWeights& l) {
  if (c.mla.enabled())
    load_mla_attention(c, src, i, l);
  else
    load_llama_attention(c, src, i, permuted, l);
  l.mlp_norm = src.small(blk(i, "ffn_norm.weight"), Shape{c.hidden_size});
  if (c.moe.is_sparse(i))
    load_moe_mlp(c, src, i, l);
  else
    load_dense_mlp(c, src, i, c.intermediate_size, l);
}

}  // namespace lmstack::model::gguf_detail
