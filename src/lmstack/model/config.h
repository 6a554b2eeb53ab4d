// ModelConfig: the architecture-independent description of a decoder-only transformer, read
// from a Hugging Face config.json. New llama-like models need only new flags here (the
// CTranslate2 "spec" idea); model/decoder.cc runs every architecture from these fields.
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/dtype.h"
#include "lmstack/core/json.h"
#include "lmstack/model/mla_config.h"
#include "lmstack/model/moe_config.h"

namespace lmstack::model {

// Append-only: new architectures go after kGpt2 (config.cc has one table row per value).
enum class Arch : uint8_t {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kGpt2,
  kMixtral,
  kQwen2Moe,
  kQwen3Moe,
  kDeepseekV2,
  kDeepseekV3
};
enum class NormKind : uint8_t { kRmsNorm, kLayerNorm };
enum class MlpKind : uint8_t { kSwiGlu, kGeluTanh };  // gate/up/down vs fc/proj

// rope_scaling (transformers < 5) or rope_parameters (>= 5) from config.json. "default" = no
// scaling; "llama3" = Llama 3.1's frequency- dependent scaling; "linear" = positions divided by
// factor; "yarn" = YaRN (Peng et al. 2023): frequencies blended between interpolated and
// extrapolated over a ramp set by beta_fast/beta_slow, cos/sin scaled by an attention factor
// (model/rope_scaling.h derives the tables and scales).
struct RopeScaling {
  std::string type = "default";
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;  // yarn: 0 = max_position_embeddings (transformers 4.x)
  // YaRN only; 0 = absent (transformers' `or` defaults: beta_fast 32, beta_slow 1).
  float beta_fast = 0.0f, beta_slow = 0.0f;
  float mscale = 0.0f, mscale_all_dim = 0.0f;
  float attention_factor = 0.0f;  // 0: derived from factor, mscale, mscale_all_dim
  bool truncate = true;
};

struct ModelConfig {
  std::string architecture;  // HF class name, e.g. "LlamaForCausalLM"
  Arch arch = Arch::kLlama;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads for MHA, 1 for MQA
  int head_dim = 0;      // hidden_size / num_heads unless config.json says otherwise
  int max_position = 0;  // max_position_embeddings (n_positions for gpt2)
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  NormKind norm = NormKind::kRmsNorm;
  MlpKind mlp = MlpKind::kSwiGlu;
  bool qkv_bias = false;           // Qwen2: biases on q/k/v projections
  bool o_bias = false;             // GPT-2: bias on the output projection
  bool mlp_bias = false;           // GPT-2: biases in the MLP
  bool qk_norm = false;            // Qwen3: RMSNorm on q and k per head
  bool learned_positions = false;  // GPT-2: wpe instead of RoPE
  // Sliding-window attention (kernels::AttentionBatch::window): a query sees the last
  // sliding_window positions, itself included. layer_window[l] is layer l's window (0 = full
  // attention; from Qwen2's max_window_layers or layer_types); empty = every layer uses
  // sliding_window (Mistral).
  int sliding_window = 0;
  std::vector<int> layer_window;
  MoeConfig moe;  // routed experts (Mixtral, Qwen-MoE, DeepSeek); !moe.enabled(): dense MLPs
  MlaConfig mla;  // DeepSeek multi-head latent attention; !mla.enabled(): Q/K/V projections
  DType dtype = DType::kF32;  // torch_dtype of the stored weights
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;

  // Parses config.json (HF field names per architecture). Throws ConfigError naming `source`
  // and the field for a missing/mistyped field, an unknown architecture (listing the known
  // ones), or an impossible shape (heads not dividing hidden size, kv heads not dividing heads).
  static ModelConfig from_json(const Json& j, const std::string& source);
  // Writes config.json in HF form (round-trips through from_json).
  Json to_json() const;

  // The window of layer l (0 = full causal attention).
  int attention_window(int l) const {
    return layer_window.empty() ? sliding_window : layer_window[static_cast<size_t>(l)];
  }
  // True when every layer is windowed, so KV older than the window is dead for all of them.
  bool every_layer_windowed() const {
    for (int l = 0; l < num_layers; ++l)
      if (attention_window(l) == 0) return false;
    return num_layers > 0;
  }

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // Parameters by the formula of calc (embedding, attention, MLP, norms, lm_head).
  int64_t num_parameters() const;
};

// The architectures from_json accepts, by HF class name.
std::vector<std::string> known_architectures();

}  // namespace lmstack::model
