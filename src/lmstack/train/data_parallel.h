// Data parallelism with ZeRO (Rajbhandari et al. 2019, "ZeRO: Memory Optimizations Toward
// Training Trillion Parameter Models"), applied to a TrainModel from outside through its
// hooks. Every rank runs the same model on its slice of the global batch; parameters live in
// the flat units of flat_params.h, rank r owning chunk r of each unit.
//   stage 0 (DDP): gradients of a bucket are all-reduced, non-blocking, as soon as the backward
//     has produced the bucket's last layer; every rank updates every parameter.
//   stage 1: the bucket is reduce-scattered (each rank receives the sum of its chunk); Adam m,
//     v exist for the owned chunk only; each rank updates its chunk, then the chunks are
//     all-gathered (Pos: the same bytes as stage 0's all-reduce).
//   stage 2: as stage 1, and the full gradient is freed once its chunk has arrived (Pos+g).
//   stage 3: weights too exist only as chunks; each layer is all-gathered before its forward
//     and again before its backward and freed after each, the next layer's gather started
//     (prefetched) while the current one computes (Pos+g+p, FSDP's FULL_SHARD). The head
//     stays gathered from its forward to its backward, as FSDP keeps the root unsharded.
// Communication happens only on the last micro-batch of a step (gradients accumulate locally
// before, as DDP's no_sync). Gradient clipping uses the exact global norm: the squared norms
// of the owned chunks summed over ranks in rank order. f32 master weights and gradients; in
// bf16 mode the bf16 matmul copies are refreshed after each step (ZeRO-3: f32 only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/flat_params.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/trace.h"

namespace lmstack::train {

struct DataParallelOptions {
  int zero = 0;                       // ZeRO stage 0-3
  int64_t bucket_bytes = 25LL << 20;  // gradient bucket (PyTorch DDP's bucket_cap_mb = 25)
  // Parameters (by name) this engine leaves alone: they keep their own tensors, are not
  // reduced, stepped or checkpointed here (expert parallelism's experts,
  // expert_data_parallel.h). Empty: none.
  std::function<bool(const std::string&)> exclude;
};

// Bytes this rank holds per category (now, and the peak since reset_peaks()).
struct HeldBytes {
  int64_t weights = 0, gradients = 0, optimizer = 0;
  int64_t peak_weights = 0, peak_gradients = 0;
};

// The factor clip_grad_norm applies to every gradient for a norm `norm` and limit max_norm
// (torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6) when below 1, else 1).
float clip_coefficient(double norm, double max_norm);

class DataParallel final : public TrainHooks {
 public:
  // Moves the model's parameters into the flat units (the model's own tensors are freed) and
  // installs itself as the model's hooks. `comm`, `model`, `pool` and `trace` (may be null)
  // must outlive it. Every rank must start from the same weights.
  DataParallel(TrainModel& model, dist::Comm& comm, ThreadPool& pool,
               const DataParallelOptions& options, const AdamWConfig& adam, TraceRecorder* trace);
  ~DataParallel() override;

  // Before each micro-batch's forward; `last` marks the one whose backward reduces.
  void begin_micro_batch(bool last);
  void zero_grads();
  // After the last micro-batch's backward: waits for every reduction.
  void finish_gradients();
  // The exact global gradient norm before clipping; scales the owned gradients so it is at
  // most max_norm (max_norm <= 0: no clipping). `extra_sum_squares`: this rank's Σ g² of
  // gradients outside the engine (options.exclude), added before the sum over ranks; the
  // caller scales those by clip_coefficient(norm, max_norm).
  double clip_grad_norm(double max_norm, double extra_sum_squares = 0);
  // One AdamW step of the owned chunks, then (stages 1, 2) the all-gather of the weights.
  void optimizer_step(float lr);
  // Frees ZeRO-3 weights still gathered (after an evaluation that ran no backward).
  void release_gathered();
  // ZeRO 1-2 after loading owned chunks from a checkpoint: all-gathers the weights.
  void gather_weights();

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t t) { steps_ = t; }
  const FlatLayout& layout() const { return layout_; }
  int zero() const { return options_.zero; }
  HeldBytes held_bytes() const { return held_; }
  void reset_peaks();

  // The elements [lo, hi) of unit u this rank updates: chunk r, or (stage 0) the whole unit.
  std::pair<int64_t, int64_t> owned_range(size_t u) const;
  // Pointers to element `lo` of owned_range(u) in the weights, m and v.
  float* owned_values(size_t u);
  float* owned_exp_avg(size_t u);
  float* owned_exp_avg_sq(size_t u);

  void before_forward(int group) override;
  void after_forward(int group) override;
  void before_backward(int group) override;
  void after_backward(int group) override;

 private:
  struct Unit;
  std::vector<int> units_read(int group, bool backward) const;
  void ensure_gathered(int unit);
  void start_gather(int unit);
  void release(int unit);
  void ensure_grads(int unit);
  void bind_unit(int unit);
  void start_reduction(int unit);
  float* reduced_grads(size_t unit);  // the reduced gradient at element owned_range().first
  void progress();
  void account();
  void trace_compute(const char* phase, int group);

  TrainModel& model_;
  dist::Comm& comm_;
  ThreadPool& pool_;
  DataParallelOptions options_;
  AdamWConfig adam_;
  TraceRecorder* trace_;
  FlatLayout layout_;
  std::vector<std::unique_ptr<Unit>> units_;
  bool last_micro_batch_ = true;
  int64_t steps_ = 0;
  HeldBytes held_;
  TraceRecorder::Clock::time_point span_begin_;
};

}  // namespace lmstack::train
