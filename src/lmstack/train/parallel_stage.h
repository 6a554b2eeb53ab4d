// StageModel: one model chunk of tensor- and pipeline-parallel training: a contiguous range of
// decoder layers, with the embedding (first chunk) and/or the final norm, lm_head and loss
// (last chunk), each weight holding this TP rank's slice (tensor_parallel.h). Forward and
// backward run per micro-batch and keep each micro-batch's activations until its backward, so
// a pipeline schedule can hold several (1F1B: up to P on stage 0, measured by
// peak_activation_bytes()).
// Tensor parallelism follows Megatron (Shoeybi et al. 2019, Fig. 3): per block half one
// all-reduce of the row-parallel output in the forward (operator g) and one of the input
// gradient of the column-parallel projections in the backward (operator f). The embedding is
// vocabulary-parallel (each rank looks up its rows, zeros elsewhere, all-reduce) and the
// cross-entropy too (§3, "parallel vocabulary"): per row the max and then Σexp and the target
// logit are all-reduced, 2·N + N floats, never the N·V logits.
// The llama family only (tensor_parallel.h check_model_parallel_config); f32.
// Thread safety: one call at a time; the TP comm is used from the calling thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/dist/comm.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/tensor_parallel.h"

namespace lmstack::train {

struct StagePlan {
  int first_layer = 0, num_layers = 0;
  bool embed = false, head = false;
  // The weights passed hold only this rank's TP slices (tp_block) of the plan's tensors, as a
  // checkpoint read by slices gives them (model_parallel_checkpoint.h), not whole tensors.
  bool sliced_weights = false;
};

class StageModel {
 public:
  // Slices `full_weights` (the whole model, any float dtype) into owned f32 master tensors of
  // the plan's layers for TP layout `tp`; zeroed gradients. `tp_comm` (size tp.tp), `pool`
  // must outlive the model. Parameter names are the whole model's ("layers.5.wq").
  StageModel(const model::ModelConfig& full, const model::ModelWeights& full_weights,
             const StagePlan& plan, const TpLayout& tp, dist::Comm& tp_comm, ThreadPool& pool);
  ~StageModel();

  // Forward of micro-batch `mb` of [batch, seq] tokens. Input: token ids (plan.embed) or the
  // previous chunk's output x [batch·seq, C]. With plan.head, also the loss against targets
  // and its gradient scaled by grad_scale; returns Σ token losses (equal on all TP ranks),
  // else 0. Throws RequestError for a token outside the vocabulary.
  double forward(int mb, const int32_t* ids, const float* x, const int32_t* targets, int batch,
                 int seq, float grad_scale);
  // [rows, C] output of micro-batch mb's forward (not with plan.head); rows = batch·seq, or
  // batch·seq / T under sequence parallelism (this rank's token rows).
  const float* output(int mb) const;
  // Floats of one micro-batch's output (and of the input x and of backward's return).
  int64_t boundary_floats(int batch, int seq) const;
  // Backward of micro-batch mb: dy = dL/d(output) (null with plan.head). Accumulates the
  // gradients, frees mb's activations, and returns dL/d(input x) (boundary_floats(); valid until
  // the next call; nullptr with plan.embed).
  const float* backward(int mb, const float* dy);
  // Frees micro-batch mb's activations without a backward (evaluation).
  void discard(int mb);
  void zero_grads();

  std::vector<ParamRef>& params() { return params_; }
  const StagePlan& plan() const { return plan_; }
  const TpLayout& tp_layout() const { return tp_; }
  int64_t activation_bytes() const { return held_bytes_; }
  int64_t peak_activation_bytes() const { return peak_bytes_; }
  void reset_peak() { peak_bytes_ = held_bytes_; }
  int micro_batches_held() const { return static_cast<int>(acts_.size()); }

  struct Acts;  // one micro-batch's saved activations (parallel_stage.cc)

 private:
  void embed_forward(Acts& a, const int32_t* ids);
  void embed_backward(Acts& a, const float* dx);
  double head_forward(Acts& a, const int32_t* targets, float grad_scale);
  void head_backward(Acts& a, float* dx);
  void layer_forward(int l, Acts& a);
  void layer_backward(int l, Acts& a, float* dx);
  void attention_backward(int l, Acts& a, float* dx);
  void all_reduce(float* buf, int64_t count);
  // [rows_local, C] -> [n, C]: this rank's token rows gathered over TP under sequence
  // parallelism (into scratch `which`), else the same pointer.
  const float* gather_rows(const float* local, int64_t n, int which);
  // A partial [n, C] summed over TP ranks, this rank's rows of it: a reduce-scatter under
  // sequence parallelism (into scratch), else an all-reduce in place.
  const float* reduce_rows(float* partial, int64_t n);
  int64_t local_rows(int64_t n) const { return tp_.sequence_parallel ? n / tp_.tp : n; }
  float* scratch(int which, int64_t count);

  model::ModelConfig full_, local_;
  StagePlan plan_;
  TpLayout tp_;
  dist::Comm& tp_comm_;
  ThreadPool& pool_;
  model::ModelWeights master_, grads_;  // layers [0, plan.num_layers) of the chunk
  std::vector<ParamRef> params_;
  std::vector<float> inv_freq_;
  std::map<int, std::unique_ptr<Acts>> acts_;
  std::vector<std::vector<float>> scratch_;
  int64_t held_bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace lmstack::train
