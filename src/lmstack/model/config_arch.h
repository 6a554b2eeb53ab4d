// Internal to model/: the config.json readers and writers that config.cc's architecture table
// shares with config_moe.cc (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3). Not a public contract.
#pragma once

#include <string>

#include "lmstack/core/json.h"
#include "lmstack/model/config.h"

namespace lmstack::model::detail {

// config.cc: the LlamaConfig fields every llama-like architecture shares, and RoPE.
void parse_llama_common(const Json& j, const std::string& src, ModelConfig& c);
void write_llama_common(const ModelConfig& c, Json& j);
void parse_rope(const Json& j, const std::string& src, ModelConfig& c);

// config_moe.cc: one reader and writer per family (field names as transformers' MixtralConfig,
// Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV2Config and DeepseekV3Config spell them).
void parse_mixtral(const Json& j, const std::string& src, ModelConfig& c);
void write_mixtral(const ModelConfig& c, Json& j);
void parse_qwen_moe(const Json& j, const std::string& src, ModelConfig& c);
void write_qwen_moe(const ModelConfig& c, Json& j);
void parse_deepseek(const Json& j, const std::string& src, ModelConfig& c);
void write_deepseek(const ModelConfig& c, Json& j);

// ConfigError naming `src` for an impossible MoE or MLA shape (top-k above the experts, groups
// not dividing them, a non-positive width, an odd RoPE width). No-op for dense models.
void validate_moe_mla(const ModelConfig& c, const std::string& src);
// ModelConfig::num_parameters for MoE or MLA models, tensor by tensor as hf_tensor_specs.
int64_t moe_mla_num_parameters(const ModelConfig& c);

}  // namespace lmstack::model::detail
