// MoeConfig: the mixture-of-experts fields of a ModelConfig (Mixtral, Qwen2-MoE, Qwen3-MoE,
// DeepSeek-V2/V3), as their config.json files spell them (model/config_moe.cc parses them).
// Routing math lives in model/moe.cc; this header is plain data so config.h stays light.
#pragma once

#include <cstdint>
#include <vector>

namespace lmstack::model {

// How router logits become expert scores: softmax over all experts (Mixtral, Qwen-MoE,
// DeepSeek-V2) or an independent sigmoid per expert (DeepSeek-V3, Liu et al. 2024 §2.1.2).
enum class RouterScore : uint8_t { kSoftmax, kSigmoid };

struct MoeConfig {
  int num_experts = 0;          // routed experts per MoE layer (0: a dense model)
  int top_k = 0;                // num_experts_per_tok
  int expert_intermediate = 0;  // width of one routed expert (Mixtral: intermediate_size)
  int shared_intermediate = 0;  // width of the always-on shared expert MLP (0: none)
  bool shared_gate = false;     // Qwen2-MoE: shared output scaled by sigmoid(w_sg · h)
  bool norm_topk_prob = true;   // renormalize the k chosen scores to sum to 1
  RouterScore score = RouterScore::kSoftmax;
  // DeepSeek group-limited routing: experts split into num_groups groups, only the best
  // topk_groups groups are eligible (DeepSeek-V2 §2.1.2 "device-limited routing").
  int num_groups = 1;
  int topk_groups = 1;
  bool group_top2_sum = false;  // a group's score: V3 the sum of its best two, V2 its best
  bool score_bias = false;      // DeepSeek-V3 e_score_correction_bias (selection only)
  float routed_scale = 1.0f;    // routed_scaling_factor, applied to the routed experts' sum
  std::vector<uint8_t> sparse;  // [num_layers]: 1 where the layer's MLP is the MoE block
  // Load-balancing loss weight from config.json (router_aux_loss_coef; DeepSeek's
  // aux_loss_alpha); -1 when absent. Training reads it (train/trainer.cc), inference does not;
  // to_json does not write it back (a training run keeps its value in trainer_state.json).
  float aux_loss_coef = -1.0f;

  bool enabled() const { return num_experts > 0; }
  bool is_sparse(int layer) const {
    return enabled() && static_cast<size_t>(layer) < sparse.size() &&
           sparse[static_cast<size_t>(layer)] != 0;
  }
  int num_sparse_layers() const {
    int n = 0;
    for (uint8_t s : sparse) n += s != 0;
    return n;
  }
};

}  // namespace lmstack::model
