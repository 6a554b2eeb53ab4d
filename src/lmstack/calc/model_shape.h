// ModelShape: the numbers of a decoder-only transformer that calc needs (sizes, GQA, MoE, MLA),
// read from a Hugging Face config.json or taken from a compiled-in preset (presets_models.cc).
// calc links only core, so this is its own small reader, not model/config.h; it accepts the
// gpt2, llama, mistral, mixtral, qwen2, qwen3, qwen2_moe, qwen3_moe and deepseek_v2/v3 model
// types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::calc {

struct ModelShape {
  std::string name;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;       // MHA: num_heads; GQA: fewer; MQA: 1 (MLA: unused)
  int64_t head_dim = 0;           // hidden_size / num_heads unless the config says otherwise
  int64_t intermediate_size = 0;  // dense MLP width
  int64_t max_position = 0;
  bool tied_embeddings = false;
  bool gated_mlp = true;           // SwiGLU gate/up/down (3 matrices) vs GELU fc/proj (2)
  bool layer_norm = false;         // LayerNorm (weight + bias) vs RMSNorm (weight)
  bool qkv_bias = false;           // Qwen2, GPT-2
  bool o_bias = false;             // GPT-2
  bool mlp_bias = false;           // GPT-2
  bool learned_positions = false;  // GPT-2 wpe
  bool qk_norm = false;            // Qwen3: RMSNorm(head_dim) on q and k

  // Mixture of experts (0 experts = dense). DeepSeek: the first `first_dense_layers` layers are
  // dense; the rest have `num_experts` routed + `num_shared_experts` always-on experts.
  int64_t num_experts = 0;
  int64_t experts_per_token = 0;
  int64_t num_shared_experts = 0;
  int64_t moe_intermediate_size = 0;     // width of one expert
  int64_t first_dense_layers = 0;        // dense layers (Qwen-MoE: those mlp_only_layers and
                                         // decoder_sparse_step leave dense, wherever they are)
  int64_t shared_intermediate_size = 0;  // one shared expert's width (0: moe_intermediate_size)
  bool shared_expert_gate = false;       // Qwen2-MoE: a [1, h] sigmoid gate on the shared expert
  bool router_bias = false;              // DeepSeek-V3 e_score_correction_bias

  // Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank == 0 means no MLA.
  int64_t q_lora_rank = 0;  // 0 = plain q projection
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool is_moe() const { return num_experts > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  int64_t num_moe_layers() const { return is_moe() ? num_layers - first_dense_layers : 0; }
  // Per-head widths of the attention matmuls Q·Kᵀ and P·V.
  int64_t qk_head_dim() const { return is_mla() ? qk_nope_head_dim + qk_rope_head_dim : head_dim; }
  int64_t v_dim() const { return is_mla() ? v_head_dim : head_dim; }

  // Parses config.json. ConfigError naming `source` and the field when one is missing or has
  // the wrong type, the model_type is unknown (listing the known ones), or the shape is
  // impossible (kv heads not dividing heads, a non-positive size).
  static ModelShape from_hf_config(const Json& j, const std::string& source);
  // Throws ConfigError (naming `source`) if a size is non-positive or heads do not divide.
  void validate(const std::string& source) const;
};

// A compiled-in preset by name (case-insensitive; aliases like "gpt2" accepted).
// ConfigError listing every known name when there is none.
ModelShape model_preset(const std::string& name);
// Canonical preset names, in table order.
std::vector<std::string> model_preset_names();
// A preset name, or a path to config.json (or a directory holding one).
ModelShape resolve_model(const std::string& name_or_path);
// The `model` field of a run-metrics file: a preset name or a config.json object.
ModelShape model_from_json_field(const Json& model, const std::string& source);

}  // namespace lmstack::calc
