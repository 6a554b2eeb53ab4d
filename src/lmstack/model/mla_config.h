// MlaConfig: the multi-head latent attention fields of a ModelConfig (DeepSeek-V2/V3,
// Liu et al. 2024 §2.1), as config.json spells them. The attention math is model/mla.cc.
#pragma once

namespace lmstack::model {

struct MlaConfig {
  int q_lora_rank = 0;       // 0: queries from one q_proj; else q_a_proj -> RMSNorm -> q_b_proj
  int kv_lora_rank = 0;      // d_c, the width of the cached latent c_KV (0: not MLA)
  int qk_nope_head_dim = 0;  // per-head query/key dims without RoPE (from W_UK)
  int qk_rope_head_dim = 0;  // d_R: decoupled RoPE dims; the RoPE key is shared by all heads
  int v_head_dim = 0;        // per-head value dims (from W_UV)
  // DeepSeek-V2 (complex-number rotation) and V3 with rope_interleave (transformers'
  // default for V3) rotate interleaved pairs (2i, 2i+1); V3 with rope_interleave false
  // rotates halves. (V3's de-interleave permutes q_pe and k_pe alike, so q·k is unchanged.)
  bool rope_interleave = true;
  bool enabled() const { return kv_lora_rank > 0; }
  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // Values per token per layer in the paged cache: c_KV and the shared RoPE key.
  int cache_width() const { return kv_lora_rank + qk_rope_head_dim; }
};

}  // namespace lmstack::model
