// The per-step expert bookkeeping of a MoE training run (trainer.cc): the rows each routed
// expert received over a step's micro-batches and data-parallel ranks, the step's
// load-balancing loss, DeepSeek-V3's bias update from those loads, and the JSONL log fields
// (expert_tokens, moe_max_load_ratio, moe_aux_loss; docs/moe_mla.md), and the checks of the
// --moe-* options. Not the math of the MoE block itself: moe_train.h.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/dist/comm.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/trainer.h"

namespace lmstack::train {

struct MoeStepLoads {
  std::vector<int64_t> tokens;  // [num_layers · E] summed over the step (dense layers: 0)
  double aux_loss = 0;          // mean over the step's micro-batches (and ranks)
  int micro_batches = 0;
};

// Starts a step (zeros), sized for `config` (empty for dense models).
void moe_begin_step(MoeStepLoads& s, const model::ModelConfig& config);
// Adds the last forward_backward's expert rows and aux loss.
void moe_add_micro_batch(MoeStepLoads& s, const TrainModel& model);
// Sums the rows over the ranks of `comm` and averages the aux loss (collective).
void moe_reduce_step(MoeStepLoads& s, dist::Comm& comm);
// bias[e] += rate · sign(mean load − load[e]) on every sparse layer's e_score_correction_bias
// (moe_update_score_bias). Every rank applies the same update to its full copy.
void moe_update_score_biases(TrainModel& model, const MoeStepLoads& s, float rate);
// measured["expert_tokens"] = [[rows of expert e] per sparse layer], "expert_layers" their
// indices, "moe_max_load_ratio" = max over layers and experts of load / mean load (1: balanced),
// "moe_aux_loss". No-op for dense models.
void moe_log_fields(const model::ModelConfig& config, const MoeStepLoads& s, Json& measured);

// The load-balancing weight: --moe-aux-loss-coef, else the config's router_aux_loss_coef
// (transformers writes 0.001 for Mixtral and Qwen-MoE by default), else 0.01, the Switch
// Transformer's alpha (Fedus et al. 2021 §2.2).
double moe_aux_loss_weight(const TrainConfig& tc, const model::ModelConfig& mc);
// MoE training runs on the single-process and data-parallel paths in f32: ConfigError naming
// the option for --tp/--pp with experts, a bias update without a biased router or under
// ZeRO-3, and --moe-* options on a dense model (bf16 is refused by TrainModel).
void check_moe_train_config(const TrainConfig& tc, const model::ModelConfig& mc);

}  // namespace lmstack::train
