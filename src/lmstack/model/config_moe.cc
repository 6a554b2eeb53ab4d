// config.json <-> ModelConfig for the mixture-of-experts and latent-attention families:
// Mixtral (every layer sparse, top-k renormalized), Qwen2-MoE / Qwen3-MoE (decoder_sparse_step,
// mlp_only_layers, norm_topk_prob, Qwen2's sigmoid-gated shared expert) and DeepSeek-V2/V3
// (MLA, first_k_dense_replace, shared experts, group-limited routing, V3's sigmoid scores with
// e_score_correction_bias). Defaults are those of the transformers 4.57 / 5.x config classes.
#include <algorithm>

#include "lmstack/model/config_arch.h"

namespace lmstack::model::detail {
namespace {

// Qwen-MoE's layer rule (Qwen2MoeDecoderLayer): sparse when not in mlp_only_layers and
// (layer + 1) % decoder_sparse_step == 0.
void qwen_sparse_layers(const Json& j, const std::string& src, ModelConfig& c) {
  const int step = optional<int>(j, "decoder_sparse_step", 1, src);
  if (step <= 0)
    throw_error<ConfigError>("{}: field 'decoder_sparse_step' must be positive (got {})", src,
                             step);
  const std::vector<int> dense = optional<std::vector<int>>(j, "mlp_only_layers", {}, src);
  c.moe.sparse.assign(static_cast<size_t>(std::max(c.num_layers, 0)), 0);
  for (int l = 0; l < c.num_layers; ++l)
    c.moe.sparse[static_cast<size_t>(l)] =
        (l + 1) % step == 0 && std::find(dense.begin(), dense.end(), l) == dense.end();
}

void all_sparse_from(ModelConfig& c, int first) {
  c.moe.sparse.assign(static_cast<size_t>(std::max(c.num_layers, 0)), 0);
  for (int l = std::max(first, 0); l < c.num_layers; ++l) c.moe.sparse[static_cast<size_t>(l)] = 1;
}

Json dense_layer_list(const ModelConfig& c) {
  Json dense = Json::array();
  for (int l = 0; l < c.num_layers; ++l)
    if (!c.moe.is_sparse(l)) dense.push_back(l);
  return dense;
}

void refuse_sliding(const Json& j, const std::string& src) {
  if (optional<bool>(j, "use_sliding_window", false, src))
    throw_error<ConfigError>(
        "{}: use_sliding_window true is not implemented for {} (Qwen1.5-MoE and Qwen3-MoE "
        "checkpoints ship it false)",
        src, optional<std::string>(j, "model_type", "this model", src));
}

int first_dense_layers(const ModelConfig& c) {
  int n = 0;
  while (n < c.num_layers && !c.moe.is_sparse(n)) ++n;
  return n;
}

}  // namespace

void parse_mixtral(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama_common(j, src, c);
  c.head_dim = optional<int>(j, "head_dim", 0, src);
  // MixtralModel masks with sliding_window when set (MixtralConfig's default is None).
  c.sliding_window = optional<int>(j, "sliding_window", 0, src);
  c.moe.num_experts = require<int>(j, "num_local_experts", src);
  c.moe.top_k = require<int>(j, "num_experts_per_tok", src);
  c.moe.expert_intermediate = c.intermediate_size;  // every MLP is the MoE block
  c.moe.norm_topk_prob = true;  // softmax, top-k, divided by their sum (MixtralSparseMoeBlock)
  c.moe.aux_loss_coef = optional<float>(j, "router_aux_loss_coef", -1.0f, src);
  all_sparse_from(c, 0);
}

void write_mixtral(const ModelConfig& c, Json& j) {
  write_llama_common(c, j);
  j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
  j["num_local_experts"] = c.moe.num_experts;
  j["num_experts_per_tok"] = c.moe.top_k;
  j["router_jitter_noise"] = 0.0;
}

void parse_qwen_moe(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama_common(j, src, c);
  refuse_sliding(j, src);
  const bool qwen3 = c.arch == Arch::kQwen3Moe;
  if (qwen3) {
    c.qk_norm = true;
    c.head_dim = optional<int>(j, "head_dim", 128, src);  // Qwen3MoeConfig's default
  } else {
    c.head_dim = optional<int>(j, "head_dim", 0, src);
    c.qkv_bias = optional<bool>(j, "qkv_bias", true, src);  // Qwen2MoeAttention: q/k/v only
    c.o_bias = false;
  }
  // transformers 5.x's Qwen3MoeConfig writes num_local_experts; 4.57 and Qwen2-MoE num_experts.
  c.moe.num_experts = j.contains("num_experts") && !j["num_experts"].is_null()
                          ? require<int>(j, "num_experts", src)
                          : require<int>(j, "num_local_experts", src);
  c.moe.top_k = require<int>(j, "num_experts_per_tok", src);
  c.moe.expert_intermediate = require<int>(j, "moe_intermediate_size", src);
  c.moe.norm_topk_prob = optional<bool>(j, "norm_topk_prob", false, src);
  c.moe.aux_loss_coef = optional<float>(j, "router_aux_loss_coef", -1.0f, src);
  if (!qwen3) {
    c.moe.shared_intermediate = optional<int>(j, "shared_expert_intermediate_size", 5632, src);
    c.moe.shared_gate = c.moe.shared_intermediate > 0;
  }
  qwen_sparse_layers(j, src, c);
}

void write_qwen_moe(const ModelConfig& c, Json& j) {
  write_llama_common(c, j);
  const bool qwen3 = c.arch == Arch::kQwen3Moe;
  j["attention_bias"] = false;
  if (!qwen3) j["qkv_bias"] = c.qkv_bias;
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["num_experts"] = c.moe.num_experts;
  j["num_experts_per_tok"] = c.moe.top_k;
  j["moe_intermediate_size"] = c.moe.expert_intermediate;
  if (!qwen3) j["shared_expert_intermediate_size"] = c.moe.shared_intermediate;
  j["norm_topk_prob"] = c.moe.norm_topk_prob;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = dense_layer_list(c);
}

// DeepseekV2Config / DeepseekV3Config. Attention is MLA: num_key_value_heads is ignored by
// both (keys come per head from the latent), so lmstack sets it to num_heads; head_dim is the
// RoPE width, as transformers sets it.
void parse_deepseek(const Json& j, const std::string& src, ModelConfig& c) {
  const bool v3 = c.arch == Arch::kDeepseekV3;
  parse_llama_common(j, src, c);
  if (c.qkv_bias)
    throw_error<ConfigError>("{}: attention_bias true is not implemented for DeepSeek", src);
  MlaConfig& m = c.mla;
  m.q_lora_rank = optional<int>(j, "q_lora_rank", 0, src);
  m.kv_lora_rank = require<int>(j, "kv_lora_rank", src);
  m.qk_nope_head_dim = require<int>(j, "qk_nope_head_dim", src);
  m.qk_rope_head_dim = require<int>(j, "qk_rope_head_dim", src);
  m.v_head_dim = require<int>(j, "v_head_dim", src);
  m.rope_interleave = v3 ? optional<bool>(j, "rope_interleave", true, src) : true;
  c.head_dim = m.qk_rope_head_dim;
  c.num_kv_heads = c.num_heads;
  MoeConfig& e = c.moe;
  e.num_experts = optional<int>(j, "n_routed_experts", 0, src);
  if (e.num_experts == 0) {  // a dense DeepSeek: every MLP is intermediate_size wide
    e = MoeConfig{};
    return;
  }
  if (optional<int>(j, "moe_layer_freq", 1, src) != 1)
    throw_error<ConfigError>(
        "{}: moe_layer_freq other than 1 is not implemented (transformers "
        "ignores it too)",
        src);
  e.top_k = require<int>(j, "num_experts_per_tok", src);
  e.expert_intermediate = require<int>(j, "moe_intermediate_size", src);
  e.shared_intermediate = optional<int>(j, "n_shared_experts", 0, src) * e.expert_intermediate;
  e.routed_scale = optional<float>(j, "routed_scaling_factor", 1.0f, src);
  e.aux_loss_coef = optional<float>(j, "aux_loss_alpha", -1.0f, src);
  all_sparse_from(c, optional<int>(j, "first_k_dense_replace", 0, src));
  if (v3) {  // DeepseekV3TopkRouter: sigmoid, bias for selection, top-2 group sums
    const std::string scoring = optional<std::string>(j, "scoring_func", "sigmoid", src);
    if (scoring != "sigmoid")
      throw_error<ConfigError>("{}: scoring_func '{}' is not sigmoid (DeepSeek-V3)", src, scoring);
    e.score = RouterScore::kSigmoid;
    e.score_bias = true;
    e.group_top2_sum = true;
    e.norm_topk_prob = optional<bool>(j, "norm_topk_prob", true, src);
    e.num_groups = optional<int>(j, "n_group", 1, src);
    e.topk_groups = optional<int>(j, "topk_group", 1, src);
    return;
  }
  // DeepseekV2MoEGate: softmax; norm_topk_prob is read but not applied by transformers.
  e.norm_topk_prob = false;
  const std::string method = optional<std::string>(j, "topk_method", "greedy", src);
  if (method == "group_limited_greedy") {
    e.num_groups = optional<int>(j, "n_group", 1, src);
    e.topk_groups = optional<int>(j, "topk_group", 1, src);
  } else if (method != "greedy") {
    throw_error<ConfigError>(
        "{}: topk_method '{}' is not implemented for DeepSeek-V2 (greedy, group_limited_greedy)",
        src, method);
  }
}

void write_deepseek(const ModelConfig& c, Json& j) {
  const bool v3 = c.arch == Arch::kDeepseekV3;
  write_llama_common(c, j);
  const MlaConfig& m = c.mla;
  j["num_key_value_heads"] = c.num_heads;
  j["head_dim"] = m.qk_rope_head_dim;
  j["q_lora_rank"] = m.q_lora_rank > 0 ? Json(m.q_lora_rank) : Json(nullptr);
  j["kv_lora_rank"] = m.kv_lora_rank;
  j["qk_nope_head_dim"] = m.qk_nope_head_dim;
  j["qk_rope_head_dim"] = m.qk_rope_head_dim;
  j["v_head_dim"] = m.v_head_dim;
  if (v3) j["rope_interleave"] = m.rope_interleave;
  const MoeConfig& e = c.moe;
  j["n_routed_experts"] = e.enabled() ? Json(e.num_experts) : Json(nullptr);
  if (!e.enabled()) return;
  j["num_experts_per_tok"] = e.top_k;
  j["moe_intermediate_size"] = e.expert_intermediate;
  j["n_shared_experts"] = e.shared_intermediate / e.expert_intermediate;
  j["routed_scaling_factor"] = e.routed_scale;
  j["first_k_dense_replace"] = first_dense_layers(c);
  j["moe_layer_freq"] = 1;
  j["n_group"] = e.num_groups;
  j["topk_group"] = e.topk_groups;
  j["norm_topk_prob"] = e.norm_topk_prob;
  if (v3)
    j["scoring_func"] = "sigmoid";
  else
    j["topk_method"] = e.num_groups > 1 ? "group_limited_greedy" : "greedy";
}

void validate_moe_mla(const ModelConfig& c, const std::string& src) {
  const auto positive = [&](int v, const char* field) {
    if (v <= 0) throw_error<ConfigError>("{}: field '{}' must be positive (got {})", src, field, v);
  };
  const MoeConfig& e = c.moe;
  if (e.enabled()) {
    positive(e.top_k, "num_experts_per_tok");
    positive(e.expert_intermediate, "moe_intermediate_size");
    positive(e.num_groups, "n_group");
    positive(e.topk_groups, "topk_group");
    if (e.top_k > e.num_experts)
      throw_error<ConfigError>("{}: num_experts_per_tok {} exceeds the {} experts", src, e.top_k,
                               e.num_experts);
    if (e.num_experts % e.num_groups != 0 || e.topk_groups > e.num_groups)
      throw_error<ConfigError>("{}: n_group {} must divide the {} experts and be >= topk_group {}",
                               src, e.num_groups, e.num_experts, e.topk_groups);
    if (e.top_k > e.topk_groups * (e.num_experts / e.num_groups))
      throw_error<ConfigError>("{}: top-{} cannot be chosen from {} groups of {} experts", src,
                               e.top_k, e.topk_groups, e.num_experts / e.num_groups);
    if (e.group_top2_sum && e.num_experts / e.num_groups < 2)
      throw_error<ConfigError>("{}: DeepSeek-V3 routing needs at least 2 experts per group", src);
    if (e.num_sparse_layers() == 0)
      throw_error<ConfigError>("{}: the configuration leaves no MoE layer", src);
  }
  const MlaConfig& m = c.mla;
  if (m.enabled()) {
    positive(m.qk_nope_head_dim, "qk_nope_head_dim");
    positive(m.qk_rope_head_dim, "qk_rope_head_dim");
    positive(m.v_head_dim, "v_head_dim");
    if (m.q_lora_rank < 0) positive(m.q_lora_rank, "q_lora_rank");
  }
}

int64_t moe_mla_num_parameters(const ModelConfig& c) {
  const int64_t C = c.hidden_size, V = c.vocab_size, H = c.num_heads;
  const MlaConfig& m = c.mla;
  int64_t attn = C * c.q_dim() + 2 * C * c.kv_dim() + c.q_dim() * C;
  if (c.qkv_bias) attn += c.q_dim() + 2 * c.kv_dim();
  if (c.o_bias) attn += C;
  if (c.qk_norm) attn += 2 * static_cast<int64_t>(c.head_dim);
  if (m.enabled()) {
    const int64_t qk = m.qk_head_dim(), r = m.kv_lora_rank;
    attn =
        m.q_lora_rank > 0 ? C * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * H * qk : C * H * qk;
    attn += C * (r + m.qk_rope_head_dim) + r + r * H * (m.qk_nope_head_dim + m.v_head_dim) +
            H * m.v_head_dim * C;
  }
  const MoeConfig& e = c.moe;
  int64_t total = V * C + C + (c.tie_word_embeddings ? 0 : V * C);
  for (int l = 0; l < c.num_layers; ++l) {
    total += 2 * C + attn;
    if (!e.is_sparse(l)) {
      total += 3 * C * c.intermediate_size;
      continue;
    }
    total += e.num_experts * (3 * C * e.expert_intermediate + C);  // experts + router rows
    total += 3 * C * e.shared_intermediate + (e.shared_gate ? C : 0) +
             (e.score_bias ? e.num_experts : 0);
  }
  return total;
}

}  // namespace lmstack::model::detail
