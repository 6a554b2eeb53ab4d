// The numbers of one training layout (calc train and calc plan): per-GPU memory, compute time,
// pipeline bubble and per-step communication per parallel dimension with the link it uses.
// Assumptions (stated in the report): Megatron rank order tp -> dp -> pp (TP innermost, so it
// stays inside a node when tp <= GPUs per node); one NIC per GPU between nodes; EP ranks are
// carved out of DP; the busiest pipeline stage holds ceil(L/pp) layers and sets the pace
// (embedding + lm_head spread evenly); communication is not overlapped with compute except DP's
// (see dp_exposed_s); kernels run at compute_efficiency of the peak whatever the layout.
#pragma once

#include <string>

#include "lmstack/calc/reports.h"

namespace lmstack::calc {

struct CommCost {
  std::string link;  // link preset the group runs over
  bool intra_node = true;
  double bytes = 0;   // bytes each GPU sends per step
  double time_s = 0;  // alpha-beta time per step
  std::string formula;
};

struct TrainEstimate {
  TrainOptions layout;  // resolved (dp filled in, grad_accum derived from the global batch)
  double params_per_gpu = 0;
  StateBytes states;
  double activations = 0;
  double memory_total = 0;
  bool fits = false;
  double tokens_per_step = 0;  // dp x micro_batch x seq x grad_accum
  double steps = 0;
  double flops_per_token = 0;  // training, with the attention convention
  double total_flops = 0;      // flops_per_token x D
  double time_at_mfu_s = 0;    // total / (gpus x peak x mfu)
  int stage_layers = 0;        // ceil(L / pp): layers on the busiest stage
  double stage_imbalance = 1;  // stage_layers x pp / L: the busiest stage's share over the mean
  double bubble = 0;           // (pp - 1) / (v x grad_accum)
  double compute_step_s = 0;   // one step at compute_efficiency incl. recomputation, no bubble
  CommCost dp, tp, pp, ep;
  double dp_exposed_s = 0;      // DP time not hidden behind the backward (forward) it overlaps
  double step_s = 0;            // compute x (1 + bubble) + TP + PP + EP + exposed DP
  double mfu = 0;               // model FLOPs (no recomputation) / (step x gpus x peak)
  double hw_flops_per_gpu = 0;  // FLOPs executed incl. recomputation / (step x gpus)
};

TrainEstimate estimate_train(const ModelShape& m, const HardwareSpec& hw, const TrainOptions& o);
// The activation-memory inputs of an estimate's layout (busiest stage, interleaving included).
ActivationShape train_activation_shape(const ModelShape& m, const TrainEstimate& e);

}  // namespace lmstack::calc
