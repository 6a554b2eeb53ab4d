// PPO for language models (Schulman et al. 2017; the RLHF recipe of Ziegler et al. 2019 and
// Ouyang et al. 2022): per-token rewards r_t = −β·(log π_old − log π_ref) plus the task reward
// on the last token; a value head V(s_t) on the policy's final hidden states; GAE(γ, λ)
// advantages (Schulman et al. 2016, eq. 16), whitened over the batch; the clipped-ratio policy
// loss (policy_loss.h, token-mean) and the clipped value loss of PPO2 (OpenAI baselines),
// over several epochs × mini-batches of one rollout batch.
// Chosen, and not what every stack does: the value head reads the trunk's hidden states
// detached (its gradient trains only the head, as a separate critic would leave the policy
// alone; verl's critic is a separate model), so the policy's gradient is the actor's alone.
#pragma once

#include <memory>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/rl/policy_loss.h"
#include "lmstack/rl/rollout.h"
#include "lmstack/rl/session.h"
#include "lmstack/train/adamw.h"

namespace lmstack::rl {

struct PpoConfig {
  float gamma = 1.0f, lambda = 0.95f;
  float clip_eps = 0.2f;
  float value_clip = 0.2f;
  float kl_coef = 0.05f;  // β of the per-token KL penalty in the reward
  float temperature = 1.0f;
  int epochs = 4, minibatches = 2;
  float value_lr = 1e-3f;
};

// GAE over one response: δ_t = r_t + γ·V_{t+1} − V_t (V after the last token is 0),
// A_t = δ_t + γλ·A_{t+1}. Returns A (same length as rewards).
std::vector<float> gae(const std::vector<float>& rewards, const std::vector<float>& values,
                       float gamma, float lambda);

// ½·max((V − G)², (V_old + clip(V − V_old, −ε, ε) − G)²); *dv receives ∂/∂V.
double clipped_value_loss(double v, double v_old, double ret, float eps, double* dv);

// V(s) = w·h + b on a hidden state h [hidden], trained by its own AdamW.
class ValueHead {
 public:
  ValueHead(int hidden, const train::AdamWConfig& adam);
  // The value at the input position of each response token of `b` (token_logprobs' order),
  // from `hidden` [b.batch·b.seq, hidden].
  std::vector<float> values(const float* hidden, const PackedBatch& b) const;
  // Adds Σ dv_k·h_k to ∂w and Σ dv_k to ∂b.
  void accumulate_grad(const float* hidden, const PackedBatch& b, const std::vector<double>& dv);
  void step(ThreadPool& pool, float lr);  // AdamW step, then zeroes the gradients
  const Tensor& weight() const { return w_; }

 private:
  int hidden_;
  Tensor w_, b_, gw_, gb_;
  std::vector<train::ParamRef> params_;
  std::unique_ptr<train::AdamW> adam_;
};

struct PpoStats {
  std::vector<double> losses, value_losses, clip_fracs, grad_norms;  // per optimizer step
  double kl = 0;       // mean log π_old − log π_ref per token (the penalty's estimate)
  double entropy = 0;  // mean per token, before the update
  double value_mean = 0, return_mean = 0;
};

// The update of one rollout batch with rewards filled in.
PpoStats ppo_update(RlSession& s, ValueHead& value, const std::vector<Rollout>& rollouts,
                    const PpoConfig& c);

}  // namespace lmstack::rl
