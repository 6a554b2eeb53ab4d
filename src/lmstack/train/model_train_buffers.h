// Activation storage of TrainModel (private to model_train*.cc). Legend: N = B·T token rows,
// C hidden, F intermediate, H·D query width, Hkv·D kv width, V vocabulary. Every buffer is a
// HostBuffer under MemoryCategory::kActivations, allocated once per (B, T) and reused.
#pragma once

#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/train/mla_train.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/moe_train.h"

namespace lmstack::train {

// What one layer's backward reads (Korthikanti et al. 2022 count these as the saved
// activations of a layer).
struct LayerActs {
  HostBuffer n1, n1_mean, n1_rstd;  // [N, C], [N], [N]: attention norm output and stats
  HostBuffer q_pre, k_pre;          // Qwen3: q, k before the per-head RMSNorm
  HostBuffer q_rstd, k_rstd;        // Qwen3: [N·H], [N·Hkv]
  HostBuffer q, k, v;               // after norm and RoPE
  HostBuffer att;                   // [N, H·D] attention output before o_proj
  HostBuffer x_mid;                 // [N, C] residual after the attention block
  HostBuffer n2, n2_mean, n2_rstd;  // MLP norm
  HostBuffer gate, up, act;         // [N, F]: up is the pre-activation of GELU MLPs
  MlaActs mla;  // DeepSeek MLA layers: its attention activations (q..att above stay empty)
  MoeActs moe;  // sparse layers (config.moe.is_sparse)
};

struct TrainModel::Buffers {
  int batch = 0, seq = 0;
  std::vector<int32_t> positions;  // [N]: t for row b·T + t
  std::vector<HostBuffer> inputs;  // [L + 1] x [N, C]: each layer's input, then the last output
  std::vector<LayerActs> layers;   // L entries, or 1 reused entry under recompute
  HostBuffer nf, nf_mean, nf_rstd, losses;
  HostBuffer logits;        // [N, V]: allocated by the first forward that asks for all logits
  HostBuffer logits_chunk;  // [chunk, V]: the fused classifier's rows (backward/classifier.cc)
  // backward scratch
  HostBuffer norm_partial;  // [threads, 2, C]: per-thread norm weight/bias gradients
  HostBuffer dx, dn, dq, dk, dv, dq2, dk2, datt, dgate, dup, dact;
  MlaScratch mla;  // MLA forward temporaries and attention gradients
  // MoE: per layer and expert, the rows routed and Σ softmax probabilities of the last
  // forward ([L, E]); the aux loss's gradient per probability ([E], empty: none); scratch.
  std::vector<int64_t> expert_tokens;
  std::vector<double> expert_prob_sum;
  std::vector<float> moe_aux_dprob;
  MoeGradScratch moe_grad;
  int64_t bytes() const;
};

inline float* fptr(HostBuffer& b) { return static_cast<float*>(b.data()); }
inline const float* fptr(const HostBuffer& b) { return static_cast<const float*>(b.data()); }

}  // namespace lmstack::train
