// Multi-head latent attention (DeepSeek-V2, Liu et al. 2024 §2.1; V3 keeps it): keys and
// values of all heads come from one low-rank latent per token,
//   c_KV = RMSNorm(W_DKV · h)  [d_c],      k_R = RoPE(W_KR · h)  [d_R, shared by all heads],
//   k_h = [W_UK,h · c_KV, k_R],            v_h = W_UV,h · c_KV,
// and queries from h (or from a second latent c_Q when q_lora_rank > 0). The paged cache holds
// only [c_KV, k_R]: d_c + d_R values per token and layer (576 for V2-Lite, against
// 2 · H · 128 = 4096 for the same heads under MHA).
//
// Two exact forms of the same attention (eq. 10-11 and §2.1.2's absorption):
//   expanded  (prefill): K and V of every context token rebuilt per head from the latent, then
//                        ordinary attention with head dims d_nope + d_R (keys) and d_v (values);
//   absorbed  (decode):  W_UK,h folded into the query (q̃_h = [W_UK,hᵀ q_nope,h, q_R,h]), which
//                        attends straight over the cached [c_KV, k_R] as one shared KV head
//                        (MQA with head dim d_c + d_R), and W_UV,h applied to the attended
//                        latent before o_proj. No per-head K/V is ever built.
// Training (forward and backward of the expanded form) is train/mla_train.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/kv_cache.h"

namespace lmstack::model {

struct ForwardBatch;

// Tensors of one MLA layer beyond LayerWeights::wq (q_proj, or q_b_proj after the q latent:
// [H·(d_nope + d_R), C or q_lora_rank]) and LayerWeights::wo (o_proj [C, H·d_v]).
struct MlaLayerWeights {
  Tensor q_a, q_a_norm;    // [q_lora_rank, C], [q_lora_rank] f32 (when q_lora_rank > 0)
  Tensor kv_a, kv_a_norm;  // kv_a_proj_with_mqa [d_c + d_R, C], kv_a_layernorm [d_c] f32
  Tensor kv_b;             // kv_b_proj [H·(d_nope + d_v), d_c]: per head W_UK,h rows then W_UV,h

  std::vector<const Tensor*> tensors() const { return {&q_a, &q_a_norm, &kv_a, &kv_a_norm, &kv_b}; }
};

enum class MlaMode : uint8_t {
  kAuto,      // absorbed for sequences with one new token (decode), expanded otherwise
  kAbsorbed,  // every sequence absorbed
  kExpanded,  // every sequence expanded
};

// Scratch and derived tensors of one Decoder's MLA layers (one forward at a time).
struct MlaState {
  MlaMode mode = MlaMode::kAuto;
  std::vector<Tensor> kv_b_f32;  // per layer, built on first absorbed use: [H·(d_nope+d_v), d_c]
  std::vector<float> q, kv, qa, lat, attn, ctx, kvb, kbuf, vbuf, obuf, rope_tmp;
};

// eps of q_a_layernorm and kv_a_layernorm (DeepseekV2RMSNorm / DeepseekV3RMSNorm's default,
// which transformers does not take from rms_norm_eps for these two).
inline constexpr float kMlaLatentNormEps = 1e-6f;

// RoPE on the dr dims at `offset` of each of `heads` heads of stride `stride` in x[T, ...],
// the rotated values scaled by `magnitude` (YaRN's attention factor on cos/sin; 1 otherwise);
// interleaved pairs (2i, 2i+1) or halves. inverse: the transpose, magnitude · R(-θ), which maps
// ∂L/∂(output) to ∂L/∂(input) (training, train/mla_train.cc). tmp is scratch.
void mla_rope_tail(float* x, const int32_t* positions, int64_t tokens, int64_t heads,
                   int64_t stride, int64_t offset, int64_t dr, const float* inv_freq,
                   bool interleave, float magnitude, std::vector<float>& tmp, bool inverse = false);

// x[T, C] += o_proj(MLA(h)) for layer `layer`; writes this batch's [c_KV, k_R] into `cache`.
// inv_freq has d_R / 2 entries.
void mla_attention(ThreadPool& pool, float* x, const float* h, const ForwardBatch& batch,
                   KvCache& cache, int layer, const ModelConfig& config, const Tensor& wq,
                   const Tensor& wo, const MlaLayerWeights& w, const float* inv_freq,
                   MlaState& state);

}  // namespace lmstack::model
