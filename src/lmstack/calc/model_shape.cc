// config.json -> ModelShape. Field names follow the Hugging Face transformers configuration
// classes (GPT2Config, LlamaConfig, MistralConfig, MixtralConfig, Qwen2Config, Qwen3Config and
// DeepSeek's DeepseekV2/V3Config); defaults are those classes' defaults.
#include "lmstack/calc/model_shape.h"

#include <algorithm>
#include <array>

#include "lmstack/core/file.h"

namespace lmstack::calc {
namespace {

constexpr std::array<const char*, 10> kModelTypes = {
    "gpt2",  "llama",     "mistral",   "mixtral",     "qwen2",
    "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"};

std::string known_types() {
  std::string s;
  for (const char* t : kModelTypes) s += std::string(s.empty() ? "" : ", ") + t;
  return s;
}

ModelShape gpt2_from_json(const Json& j, const std::string& src) {
  ModelShape m;
  m.vocab_size = require<int64_t>(j, "vocab_size", src);
  m.hidden_size = require<int64_t>(j, "n_embd", src);
  m.num_layers = require<int64_t>(j, "n_layer", src);
  m.num_heads = require<int64_t>(j, "n_head", src);
  m.num_kv_heads = m.num_heads;
  if (m.num_heads <= 0) throw_error<ConfigError>("{}: field 'n_head' must be > 0", src);
  m.head_dim = m.hidden_size / m.num_heads;
  m.max_position = require<int64_t>(j, "n_positions", src);
  m.intermediate_size = optional<int64_t>(j, "n_inner", 4 * m.hidden_size, src);
  m.tied_embeddings = optional<bool>(j, "tie_word_embeddings", true, src);
  m.gated_mlp = false;
  m.layer_norm = true;
  m.qkv_bias = m.o_bias = m.mlp_bias = true;
  m.learned_positions = true;
  return m;
}

void read_deepseek(const Json& j, const std::string& src, ModelShape& m) {
  m.num_experts = optional<int64_t>(j, "n_routed_experts", 0, src);
  m.num_shared_experts = optional<int64_t>(j, "n_shared_experts", 0, src);
  if (m.num_experts > 0) {
    m.experts_per_token = require<int64_t>(j, "num_experts_per_tok", src);
    m.moe_intermediate_size = require<int64_t>(j, "moe_intermediate_size", src);
    m.first_dense_layers = optional<int64_t>(j, "first_k_dense_replace", 0, src);
  }
  m.q_lora_rank = optional<int64_t>(j, "q_lora_rank", 0, src);
  m.kv_lora_rank = require<int64_t>(j, "kv_lora_rank", src);
  m.qk_nope_head_dim = require<int64_t>(j, "qk_nope_head_dim", src);
  m.qk_rope_head_dim = require<int64_t>(j, "qk_rope_head_dim", src);
  m.v_head_dim = require<int64_t>(j, "v_head_dim", src);
  m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
}

// Qwen2MoeConfig / Qwen3MoeConfig: a layer is sparse unless listed in mlp_only_layers or off
// the decoder_sparse_step grid; Qwen2-MoE adds one gated shared expert of its own width.
void read_qwen_moe(const Json& j, const std::string& type, const std::string& src, ModelShape& m) {
  m.num_experts = j.contains("num_experts") && !j["num_experts"].is_null()
                      ? require<int64_t>(j, "num_experts", src)
                      : require<int64_t>(j, "num_local_experts", src);
  m.experts_per_token = require<int64_t>(j, "num_experts_per_tok", src);
  m.moe_intermediate_size = require<int64_t>(j, "moe_intermediate_size", src);
  const int64_t step = optional<int64_t>(j, "decoder_sparse_step", 1, src);
  if (step <= 0) throw_error<ConfigError>("{}: 'decoder_sparse_step' must be > 0", src);
  const std::vector<int64_t> dense = optional<std::vector<int64_t>>(j, "mlp_only_layers", {}, src);
  m.first_dense_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l)
    if ((l + 1) % step != 0 || std::find(dense.begin(), dense.end(), l) != dense.end())
      ++m.first_dense_layers;
  if (type == "qwen2_moe") {
    m.shared_intermediate_size = optional<int64_t>(j, "shared_expert_intermediate_size", 5632, src);
    m.num_shared_experts = m.shared_intermediate_size > 0 ? 1 : 0;
    m.shared_expert_gate = m.num_shared_experts > 0;
  }
}

ModelShape llama_like_from_json(const Json& j, const std::string& type, const std::string& src) {
  ModelShape m;
  m.vocab_size = require<int64_t>(j, "vocab_size", src);
  m.hidden_size = require<int64_t>(j, "hidden_size", src);
  m.num_layers = require<int64_t>(j, "num_hidden_layers", src);
  m.num_heads = require<int64_t>(j, "num_attention_heads", src);
  m.num_kv_heads = optional<int64_t>(j, "num_key_value_heads", m.num_heads, src);
  m.intermediate_size = require<int64_t>(j, "intermediate_size", src);
  m.max_position = optional<int64_t>(j, "max_position_embeddings", 0, src);
  m.tied_embeddings = optional<bool>(j, "tie_word_embeddings", false, src);
  if (m.num_heads <= 0)
    throw_error<ConfigError>("{}: field 'num_attention_heads' must be > 0", src);
  m.head_dim = optional<int64_t>(j, "head_dim", m.hidden_size / m.num_heads, src);
  const bool qwen2 = type == "qwen2" || type == "qwen2_moe";
  m.qkv_bias = qwen2 ? optional<bool>(j, "qkv_bias", true, src)
                     : optional<bool>(j, "attention_bias", false, src);
  m.o_bias = !qwen2 && optional<bool>(j, "attention_bias", false, src);
  m.mlp_bias = optional<bool>(j, "mlp_bias", false, src);
  m.qk_norm = type == "qwen3" || type == "qwen3_moe";
  if (type == "qwen2_moe" || type == "qwen3_moe") read_qwen_moe(j, type, src, m);
  if (type == "mixtral") {
    m.num_experts = require<int64_t>(j, "num_local_experts", src);
    m.experts_per_token = require<int64_t>(j, "num_experts_per_tok", src);
    m.moe_intermediate_size = m.intermediate_size;
  }
  if (type == "deepseek_v2" || type == "deepseek_v3") read_deepseek(j, src, m);
  m.router_bias = type == "deepseek_v3";
  return m;
}

void check_positive(int64_t v, const char* field, const std::string& src) {
  if (v <= 0) throw_error<ConfigError>("{}: '{}' must be > 0, got {}", src, field, v);
}

}  // namespace

ModelShape ModelShape::from_hf_config(const Json& j, const std::string& source) {
  if (!j.is_object()) throw_error<ConfigError>("{}: config.json must be a JSON object", source);
  const std::string type = require<std::string>(j, "model_type", source);
  bool known = false;
  for (const char* t : kModelTypes) known = known || type == t;
  if (!known)
    throw_error<ConfigError>("{}: field 'model_type' is '{}'; calc knows: {}", source, type,
                             known_types());
  ModelShape m = type == "gpt2" ? gpt2_from_json(j, source) : llama_like_from_json(j, type, source);
  m.name = optional<std::string>(j, "_name_or_path", source, source);
  if (m.name.empty()) m.name = source;
  m.validate(source);
  return m;
}

void ModelShape::validate(const std::string& src) const {
  check_positive(vocab_size, "vocab_size", src);
  check_positive(hidden_size, "hidden_size", src);
  check_positive(num_layers, "num_layers", src);
  check_positive(num_heads, "num_heads", src);
  check_positive(intermediate_size, "intermediate_size", src);
  if (!is_mla()) {
    check_positive(num_kv_heads, "num_key_value_heads", src);
    check_positive(head_dim, "head_dim", src);
    if (num_heads % num_kv_heads != 0)
      throw_error<ConfigError>("{}: num_key_value_heads {} does not divide num_attention_heads {}",
                               src, num_kv_heads, num_heads);
  }
  if (is_moe()) {
    check_positive(experts_per_token, "num_experts_per_tok", src);
    check_positive(moe_intermediate_size, "moe_intermediate_size", src);
    if (experts_per_token > num_experts)
      throw_error<ConfigError>("{}: num_experts_per_tok {} exceeds the {} experts", src,
                               experts_per_token, num_experts);
    if (first_dense_layers >= num_layers)
      throw_error<ConfigError>("{}: first_k_dense_replace {} leaves no MoE layer of {}", src,
                               first_dense_layers, num_layers);
  }
}

ModelShape resolve_model(const std::string& name_or_path) {
  const bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                               name_or_path.ends_with(".json") || file_exists(name_or_path);
  if (!looks_like_path) return model_preset(name_or_path);
  const std::string path =
      is_directory(name_or_path) ? path_join(name_or_path, "config.json") : name_or_path;
  ModelShape m = ModelShape::from_hf_config(read_json_file(path), path);
  return m;
}

ModelShape model_from_json_field(const Json& model, const std::string& source) {
  if (model.is_string()) return model_preset(model.get<std::string>());
  return ModelShape::from_hf_config(model, source + ": model");
}

}  // namespace lmstack::calc
