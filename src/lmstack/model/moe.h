// The mixture-of-experts MLP block (Shazeer et al. 2017; Mixtral, Jiang et al. 2024; Qwen-MoE;
// DeepSeekMoE, Dai et al. 2024): a router picks top_k of num_experts SwiGLU experts per token,
// the tokens of the flattened batch are grouped by expert and each expert runs one GEMM over
// exactly its tokens (dropless: no capacity, no padding), and the outputs are combined with the
// routing weights; shared experts (DeepSeek) or a sigmoid-gated shared expert (Qwen2-MoE) run on
// every token. Not here: training (train/moe_train.h), expert parallelism (dist/).
//
// Thread safety: MoeScratch belongs to one caller; the weights are read-only.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

// One sparse layer's tensors, shaped like the HF nn.Linear weights ([out, in]).
struct MoeLayerWeights {
  Tensor router;      // [E, C] f32 (kept in f32 whatever the experts' dtype)
  Tensor score_bias;  // [E] f32: DeepSeek-V3 e_score_correction_bias (selection only)
  std::vector<Tensor> w_gate, w_up, w_down;    // per expert: [Fe, C], [Fe, C], [C, Fe]
  Tensor shared_gate, shared_up, shared_down;  // [Fs, C], [Fs, C], [C, Fs] when Fs > 0
  Tensor shared_expert_gate;                   // [1, C] f32 (Qwen2-MoE)

  // Bytes of expert e's three matrices: what a forward reads when some token picks e.
  int64_t expert_bytes(int e) const;
  // Every tensor, for ModelWeights::bytes().
  std::vector<const Tensor*> tensors() const;
};

// The router's decision for rows [0, T): chosen[t * k + j] (best first) and its weight.
struct MoeRouting {
  std::vector<int32_t> chosen;  // [T, k]
  std::vector<float> weight;    // [T, k], routed_scale included
};

// Computes the routing of T rows from their router logits [T, E] (the model's rule: softmax
// or sigmoid scores; group-limited selection; V3's bias added for selection only; top-k
// renormalized when norm_topk_prob; times routed_scale). Ties go to the lower expert id.
void moe_route(const MoeConfig& cfg, const float* logits, int64_t tokens, const float* score_bias,
               MoeRouting& out);

// Scores of one row of router logits[e]: softmax over all experts or a sigmoid per expert
// (scores[e], written). Shared with training (train/moe_train.cc), whose backward inverts it.
void moe_scores(RouterScore kind, const float* logits, int e, float* scores);

// Counting sort of the T·k (token, slot) pairs of `r` by expert: expert e's pairs are
// order[offsets[e] .. offsets[e+1]), each entry t * k + j, in increasing pair order.
void moe_group_by_expert(const MoeRouting& r, int num_experts, std::vector<int32_t>& offsets,
                         std::vector<int32_t>& order);

// Per-forward counters of a Decoder's MoE layers.
struct MoeStats {
  int64_t expert_bytes_read = 0;           // expert matrices read (each chosen expert once)
  std::vector<int64_t> tokens_per_expert;  // [num_layers * E], cumulative
};

struct MoeScratch {
  std::vector<float> logits, combined, xe, gate, up, ye, shared_g;
  std::vector<int32_t> offsets, order;
  MoeRouting routing;
};

// x[T, C] += MoE(h[T, C]) for layer `layer`. `stats` (may be null) gets the experts read and
// the tokens each expert received.
void moe_forward(ThreadPool& pool, float* x, const float* h, int64_t tokens, int layer,
                 const ModelConfig& config, const MoeLayerWeights& w, MoeScratch& scratch,
                 MoeStats* stats);

}  // namespace lmstack::model
