// DPO (Rafailov et al. 2023, eq. 7): on pairs (prompt, chosen y_w, rejected y_l),
//   L = −log σ(β·[(log π(y_w|x) − log π_ref(y_w|x)) − (log π(y_l|x) − log π_ref(y_l|x))]),
// averaged over the pairs, log π summed over the response tokens. With h the bracket times β,
// ∂L/∂log π(y_w) = −β·σ(−h)/P and ∂L/∂log π(y_l) = +β·σ(−h)/P, spread over the tokens'
// logits through policy_loss.h's ∂log p/∂z. Reference: tools/ref/gen_rl_golden.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/rl/session.h"

namespace lmstack::rl {

struct PreferencePair {
  std::string prompt, chosen, rejected;
};
// A JSONL file of {"prompt", "chosen", "rejected"} objects (strings). FormatError naming the
// file, line and field.
std::vector<PreferencePair> read_preference_pairs(const std::string& path);

struct TokenPair {
  std::vector<int32_t> prompt, chosen, rejected;  // chosen/rejected end with EOS (TRL's rule)
};

struct DpoConfig {
  float beta = 0.1f;
};

struct DpoStats {
  double loss = 0;
  double accuracy = 0;         // fraction of pairs with h > 0 (chosen preferred)
  double margin = 0;           // mean h / β: the log-ratio margin
  double chosen_reward = 0;    // mean β·(log π − log π_ref) of the chosen responses
  double rejected_reward = 0;  // the same for the rejected ones
  double grad_norm = 0;
};

// The loss over `pairs` with its gradient accumulated into s.policy()'s gradients (no
// optimizer step). `ref_logp` holds the reference's sequence log-probs, chosen then rejected
// per pair (ref_sequence_logprobs).
DpoStats dpo_loss_backward(RlSession& s, const std::vector<TokenPair>& pairs,
                           const std::vector<double>& ref_logp, const DpoConfig& c);
// Σ log π_ref over the response of each pair's chosen then rejected sequence.
std::vector<double> ref_sequence_logprobs(RlSession& s, const std::vector<TokenPair>& pairs);
// One DPO step: the reference log-probs, the loss and gradient, the optimizer step.
DpoStats dpo_step(RlSession& s, const std::vector<TokenPair>& pairs, const DpoConfig& c);

}  // namespace lmstack::rl
