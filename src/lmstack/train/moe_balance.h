// The per-step expert bookkeeping of a MoE training run (trainer.cc): the rows each routed
// expert received over a step's micro-batches and data-parallel ranks, the step's
// load-balancing loss, DeepSeek-V3's bias update from those loads, and the JSONL log fields
// (expert_tokens, moe_max_load_ratio, moe_aux_loss; docs/training.md). Not the math of the
// MoE block itself: moe_train.h.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/dist/comm.h"
#include "lmstack/train/model_train.h"

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

}  // namespace lmstack::train
