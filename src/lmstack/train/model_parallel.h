// ModelParallel: tensor, pipeline and data parallelism composed on a 3-D mesh (issue 15;
// Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
// Megatron-LM"). This rank holds v model chunks (StageModel, parallel_stage.h) of its pipeline
// stage, each sliced for its TP rank; one optimizer step runs the m micro-batches of this DP
// rank's share of the global batch through the pipeline schedule (pipeline_schedule.h), with
// activations and their gradients sent between stages by non-blocking send/recv (the receive
// of the next action is posted before the current one computes), then
//   - sums the gradients of replicated KV heads over their TP replicas (T > Hkv), and under
//     sequence parallelism those of the norms (each rank saw only its token rows),
//   - all-reduces every gradient over the DP group (DDP; ZeRO is not combined with TP/PP),
//   - clips by the exact global norm (each parameter counted once: TP-replicated tensors on
//     TP rank 0 only, DP rank 0 only, summed over the world in rank order),
//   - runs AdamW on the local slices.
// Losses equal the single-process run's within f32 summation-order tolerance (tests).
// Restrictions (ConfigError): the llama family, f32, no --recompute, tied embeddings only
// with --pp 1, at least one layer per virtual stage.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lmstack/dist/mesh.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/parallel_stage.h"
#include "lmstack/train/pipeline_schedule.h"
#include "lmstack/train/trace.h"

namespace lmstack::train {

struct ModelParallelOptions {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int chunks = 1;                  // model chunks per rank (interleaved: v >= 2)
  std::vector<int> pp_layers;      // layers per virtual stage (empty: even split)
  bool sequence_parallel = false;  // tensor_parallel.h TpLayout::sequence_parallel
  // The weights given to ModelParallel are this rank's TP slices of its stages' tensors only
  // (read_model_parallel_weights), not the whole model (StagePlan::sliced_weights).
  bool sliced_weights = false;
};

// Layers per virtual stage: `override` (P·v entries summing to L, each >= 1) or an even split,
// the first L mod (P·v) stages taking one more. ConfigError naming --pp-layers otherwise.
std::vector<int> pipeline_layer_split(int num_layers, int virtual_stages,
                                      const std::vector<int>& override_counts);

// The plans of the model chunks pipeline rank `pp_rank` holds (one, or options.chunks when
// interleaved; chunk c is virtual stage c·P + pp_rank), as ModelParallel builds them.
std::vector<StagePlan> stage_plans(const model::ModelConfig& config, const dist::MeshShape& shape,
                                   int pp_rank, const ModelParallelOptions& options);

// What one step measured on this rank.
struct PipelineStepStats {
  double step_s = 0, busy_s = 0;             // schedule wall time; time in forward/backward compute
  double bubble = 0;                         // (step_s - busy_s) / busy_s
  int64_t peak_activation_bytes = 0;         // most activation bytes held at once (all chunks)
  int64_t micro_batch_activation_bytes = 0;  // micro-batch 0's, summed over this rank's chunks
  int max_micro_batches_held = 0;
};

class ModelParallel {
 public:
  // Slices `full_weights` for this rank. `mesh`, `pool` and `trace` (may be null) must outlive
  // it; every rank must pass the same weights.
  ModelParallel(const model::ModelConfig& config, const model::ModelWeights& full_weights,
                dist::Mesh& mesh, ThreadPool& pool, const ModelParallelOptions& options,
                const AdamWConfig& adam, TraceRecorder* trace);
  ~ModelParallel();

  // One step's forward and backward: inputs[i] and targets[i] are micro-batch i's [batch, seq]
  // tokens of this DP rank (only the first and last stages read them). Gradients are
  // accumulated scaled by grad_scale and then reduced (TP replicas, DP). Returns the global
  // Σ token losses over the step on every rank.
  double forward_backward(const std::vector<const int32_t*>& inputs,
                          const std::vector<const int32_t*>& targets, int batch, int seq,
                          float grad_scale);
  // Mean loss over the micro-batches without gradients (the same schedule's forwards only).
  double evaluate(const std::vector<const int32_t*>& inputs,
                  const std::vector<const int32_t*>& targets, int batch, int seq);
  double clip_grad_norm(double max_norm);  // returns the norm before clipping
  void optimizer_step(float lr);
  void zero_grads();

  const PipelineStepStats& last_stats() const { return stats_; }
  std::vector<ParamRef>& params() { return params_; }
  AdamW& optimizer() { return *opt_; }
  std::vector<std::unique_ptr<StageModel>>& chunks() { return chunks_; }
  dist::Mesh& mesh() { return mesh_; }
  const ModelParallelOptions& options() const { return options_; }
  // Layers of each virtual stage (chunk c of stage s is entry c·P + s).
  const std::vector<int>& layers_per_stage() const { return layer_counts_; }
  // True when parameter `p` of params() is counted by this rank in global sums (the norm) and
  // written by it to a checkpoint: one copy over TP replicas and DP ranks.
  bool owns(const ParamRef& p) const;
  // Bytes of this rank's weights (its gradients are as many).
  int64_t weight_bytes() const;
  // Bytes sent summing replicated KV heads' gradients (a sub-group of TP; 0 without one).
  int64_t kv_comm_bytes() const { return kv_comm_ ? kv_comm_->stats().total() : 0; }

 private:
  double run_schedule(const std::vector<const int32_t*>& inputs,
                      const std::vector<const int32_t*>& targets, int batch, int seq,
                      float grad_scale, bool train);
  void reduce_gradients();

  model::ModelConfig config_;
  dist::Mesh& mesh_;
  ThreadPool& pool_;
  ModelParallelOptions options_;
  TraceRecorder* trace_;
  TpLayout tp_;
  std::unique_ptr<dist::Comm> kv_comm_;  // TP ranks sharing a replicated KV head
  std::vector<std::unique_ptr<StageModel>> chunks_;
  std::vector<int> layer_counts_;
  std::vector<ParamRef> params_;
  std::unique_ptr<AdamW> opt_;
  PipelineStepStats stats_;
};

}  // namespace lmstack::train
