// Training forward and backward of DeepSeek's multi-head latent attention (Liu et al. 2024,
// DeepSeek-V2 §2.1) in the expanded form: every token's per-head key and value are rebuilt from
// its latent, then causal attention over the dense batch (kernels/attention_backward.cc). The
// inference twin is model/mla.cc (its RoPE helper and latent-norm eps are shared); the absorbed
// form is an inference-only rewrite of the same function and is not trained. The backward's
// derivation is in mla_train.cc's header.
#pragma once

#include <cstdint>

#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"

namespace lmstack::train {

// ConfigError when TrainModel cannot train this MLA shape: v_head_dim > qk_nope + qk_rope (V is
// zero-padded to the key width, as in inference), or a sliding window.
void check_mla_trainable(const model::ModelConfig& c);

// What one MLA layer's backward reads, in N = batch·seq rows (kActivations HostBuffers).
// Legend: H heads, r = kv_lora_rank, qr = q_lora_rank, qk = qk_nope + qk_rope, dv = v_head_dim.
struct MlaActs {
  HostBuffer qa, qa_rstd, qan;  // [N, qr], [N], [N, qr]: q latent around q_a_layernorm (qr > 0)
  HostBuffer c, c_rstd, cn;     // [N, r], [N], [N, r]: kv latent around kv_a_layernorm
  HostBuffer q, k, v;           // [N, H, qk] after RoPE; v zero-padded from dv to qk
  HostBuffer out;               // [N, H, qk]: attention output, zero-padded from dv to qk
  HostBuffer att;               // [N, H·dv]: attention output, o_proj's input
  void allocate(const model::ModelConfig& config, int batch, int seq);
  int64_t bytes() const;
};

// Temporaries shared by all layers: the forward's kv_a / kv_b outputs and padded attention
// output, the backward's gradients. Never read across layers.
struct MlaScratch {
  HostBuffer kv, kvb, pad;    // [N, r + dr], [N, H·(dn + dv)], [N, H, qk]
  HostBuffer datt;            // [N, H·dv]: ∂L/∂att, o_proj's backward writes it
  HostBuffer dq, dk, dv, dc;  // [N, H, qk] x 3, [N, r]
  HostBuffer dqan, dqa;       // [N, qr]
  void allocate(const model::ModelConfig& c, int batch, int seq);
  int64_t bytes() const;
};

// One layer's weights and positions. compute: the matrices (f32 masters or their bf16 copies);
// master: the f32 norm weights; grads: accumulated into. Each LayerWeights has its `mla` block.
struct MlaTrainLayer {
  const model::ModelConfig& config;
  const model::LayerWeights& compute;
  const model::LayerWeights& master;
  model::LayerWeights& grads;
  int layer = 0, batch = 0, seq = 0;
  const int32_t* positions = nullptr;  // [N]: t of row b·seq + t
  const float* inv_freq = nullptr;     // [qk_rope_head_dim / 2]
};

// a.att = MLA attention of n1 [N, C] (o_proj not applied); saves the rest of `a` for the backward.
void mla_train_forward(ThreadPool& pool, MlaActs& a, MlaScratch& s, const float* n1,
                       const MlaTrainLayer& l);
// From s.datt = ∂L/∂att: dn1 [N, C] += ∂L/∂n1, and the gradients of q_proj (or q_a_proj,
// q_a_layernorm, q_b_proj), kv_a_proj_with_mqa, kv_a_layernorm and kv_b_proj += theirs.
void mla_train_backward(ThreadPool& pool, float* dn1, const float* n1, const MlaActs& a,
                        MlaScratch& s, const MlaTrainLayer& l);

}  // namespace lmstack::train
