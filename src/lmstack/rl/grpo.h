// GRPO (Shao et al. 2024, "DeepSeekMath", §4.1): for each prompt a group of G sampled
// responses; each response's advantage is its reward normalized within its group,
// Â_i = (r_i − mean(r)) / (std(r) + eps), shared by all its tokens (outcome supervision);
// the policy maximizes the clipped-ratio surrogate minus β·KL to the frozen reference, the KL
// estimated per token with k3 (policy_loss.h). Several epochs and mini-batches per rollout
// batch are allowed (μ iterations in the paper's Algorithm 1); old log-probs are the policy's
// own recomputation before the first update (as verl does), not the engine's.
// Reference: tools/ref/gen_rl_golden.py, checked by tests/rl/grpo_test.cc.
#pragma once

#include <vector>

#include "lmstack/rl/policy_loss.h"
#include "lmstack/rl/rollout.h"
#include "lmstack/rl/session.h"

namespace lmstack::rl {

struct GrpoConfig {
  ClippedLossConfig loss{0.2f, 0.04f, 1.0f};  // ε, β (DeepSeekMath: 0.04), temperature
  LossAgg agg = LossAgg::kTokenMean;
  int epochs = 1;
  int minibatches = 1;  // whole groups per mini-batch; one optimizer step each
  float adv_eps = 1e-6f;
};

// Group-normalized advantages of rewards laid out group after group (group_size each). The
// std is the unbiased one (torch.std, as TRL and verl use); a group whose rewards are all
// equal gets advantages 0 and contributes only its KL term.
std::vector<float> group_advantages(const std::vector<double>& rewards, int group_size, float eps);

struct UpdateStats {
  std::vector<double> losses, kls, clip_fracs, grad_norms;  // one per optimizer step
  std::vector<float> advantages;                            // one per rollout
  std::vector<std::vector<float>> old_logprobs;             // the policy's, per rollout
  double entropy = 0;  // mean over response tokens, before the update
  double kl = 0;       // mean k3 against the reference over response tokens, before the update
};

// The policy update of one rollout batch whose rewards are filled in, rollouts ordered group
// after group (generate_rollouts' order). Leaves the engine's weights as they were.
UpdateStats grpo_update(RlSession& s, const std::vector<Rollout>& rollouts, int group_size,
                        const GrpoConfig& c);

// The k3 estimate per token: exp(q) − q − 1, q = ref − logp (≥ 0, unbiased for KL(π‖ref)).
double k3_mean(const std::vector<float>& logp, const std::vector<float>& ref_logp);

// Rows [begin, end) of rollouts as a packed batch (helper shared with PPO).
PackedBatch pack_rollouts(const std::vector<Rollout>& rollouts, size_t begin, size_t end);

}  // namespace lmstack::rl
