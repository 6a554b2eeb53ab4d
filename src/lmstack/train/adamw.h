// AdamW (Loshchilov & Hutter 2019) with PyTorch's semantics (torch.optim.AdamW, 1.13
// _single_tensor_adamw): decoupled weight decay p ← p·(1 - lr·wd) first, then Adam's moments
// with bias correction, denominator sqrt(v)/sqrt(1 - β2^t) + eps. Gradient clipping by the
// global L2 norm as torch.nn.utils.clip_grad_norm_ (coefficient max/(norm + 1e-6), applied
// when below 1). The learning-rate schedules with linear warmup live here too.
// State (m, v) is f32, one tensor per parameter, counted under MemoryCategory::kOptimizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/train/model_train.h"

namespace lmstack::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied to ParamRef::decay tensors only
};

class AdamW {
 public:
  // Allocates zeroed m and v for each parameter. `params` must outlive the optimizer.
  AdamW(std::vector<ParamRef>& params, const AdamWConfig& config);

  // One update of every parameter from its gradient at learning rate lr; increments step().
  void step(ThreadPool& pool, float lr);

  int64_t steps_taken() const { return steps_; }
  void set_steps_taken(int64_t t) { steps_ = t; }
  const AdamWConfig& config() const { return config_; }
  // m (exp_avg) and v (exp_avg_sq), parallel to the parameter list.
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  int64_t state_bytes() const;

 private:
  std::vector<ParamRef>& params_;
  AdamWConfig config_;
  std::vector<Tensor> m_, v_;
  int64_t steps_ = 0;
};

// The coefficients of one AdamW step at step count t (after increment) and learning rate lr.
struct AdamWStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float step_size = 0;   // lr / (1 - β1^t)
  float bias2_sqrt = 0;  // sqrt(1 - β2^t)
  static AdamWStep at(const AdamWConfig& c, int64_t t, float lr);
};
// Updates p, m, v over [0, n) from g, as torch's _single_tensor_adamw; `decay` says whether the
// weight decay applies. The one update both AdamW and the sharded optimizer of ZeRO run.
void adamw_update(ThreadPool& pool, const AdamWStep& s, bool decay, float* p, const float* g,
                  float* m, float* v, int64_t n);

// Σ g² over g[0, n), accumulated in double.
double sum_squares(ThreadPool& pool, const float* g, int64_t n);
// sqrt(Σ g²) over all gradients (accumulated in double).
double global_grad_norm(ThreadPool& pool, const std::vector<ParamRef>& params);
// Scales the gradients so their global norm is at most max_norm (no-op when max_norm <= 0).
// Returns the norm before clipping (what torch.nn.utils.clip_grad_norm_ returns).
double clip_grad_norm(ThreadPool& pool, std::vector<ParamRef>& params, double max_norm);

enum class LrSchedule { kCosine, kLinear, kConstant };
LrSchedule parse_lr_schedule(const std::string& name);  // RequestError listing the names
const char* lr_schedule_name(LrSchedule s);

struct LrConfig {
  float lr = 3e-4f;     // peak
  float min_lr = 0.0f;  // floor reached at the last step (cosine, linear)
  int64_t warmup = 0;   // steps of linear warmup: lr · (step + 1) / warmup
  int64_t total = 1;    // steps of the run
  LrSchedule schedule = LrSchedule::kCosine;
};
// The learning rate of 0-based step `step`: warmup, then decay from lr to min_lr over the
// remaining total - warmup steps (cosine: min + ½(1 + cos(π·progress))·(lr - min)).
double learning_rate(const LrConfig& c, int64_t step);

}  // namespace lmstack::train
