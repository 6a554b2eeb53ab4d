// The per-token pieces every policy-gradient loss here shares: packing prompt + response
// sequences into the trainer's dense [batch, seq] layout, log-probabilities and entropy of the
// sampled tokens from the logits, and the clipped-ratio surrogate with the k3 KL penalty
// (PPO, Schulman et al. 2017, eq. 7; GRPO, Shao et al. 2024, eq. 3-4) together with its
// gradient with respect to the logits. Derivation (p = softmax(z/τ), a the sampled token):
//   log p_a = z_a/τ − logsumexp(z/τ),   ∂ log p_a / ∂z_j = (δ_ja − p_j) / τ;
//   ratio r = exp(log p_a − log p_old);  surrogate s = min(r·A, clip(r, 1−ε, 1+ε)·A),
//   ∂s/∂log p_a = r·A where the unclipped term is the minimum, else 0;
//   k3 = exp(q) − q − 1 with q = log p_ref − log p_a (Schulman 2020, "Approximating KL"),
//   ∂k3/∂log p_a = 1 − exp(q).
// Per-token loss ℓ = −s + β·k3, summed with per-token weights w (token- or sequence-mean).
// Reference: tools/ref/gen_rl_grpo.py (PyTorch autograd on the same formulas).
#pragma once

#include <cstdint>
#include <vector>

namespace lmstack::rl {

// B sequences right-padded to T = longest (prompt + response) − 1. Row b, position t predicts
// targets[b·T + t] from inputs[b·T + 0..t]. Response token j of sequence b is the target at
// position first[b] + j, first[b] = prompt length − 1.
struct PackedBatch {
  int batch = 0, seq = 0;
  std::vector<int32_t> inputs, targets;  // [B·T], padding 0
  std::vector<int32_t> first, length;    // [B]: first response position, response length
  int64_t num_response_tokens() const;
};
PackedBatch pack(const std::vector<const std::vector<int32_t>*>& prompts,
                 const std::vector<const std::vector<int32_t>*>& responses);

// Per response token of every row (row-major over rows, then j): log softmax(z/τ)[target]
// and the entropy −Σ p log p of softmax(z/τ). `logits` is [B·T, vocab]. entropy may be null.
void token_logprobs(const float* logits, const PackedBatch& b, int vocab, float temperature,
                    std::vector<float>* logp, std::vector<float>* entropy);

// Splits a flat per-token vector (token_logprobs' order) into one vector per row.
std::vector<std::vector<float>> split_rows(const PackedBatch& b, const std::vector<float>& flat);

enum class LossAgg { kTokenMean, kSeqMean };
// Per-token weights: kTokenMean 1/Σ|o_i| (DAPO, verl's "token-mean"); kSeqMean
// 1/(B·|o_i|) (the GRPO paper's (1/G) Σ_i (1/|o_i|) Σ_t).
std::vector<float> loss_weights(const PackedBatch& b, LossAgg agg);

struct ClippedLossConfig {
  float clip_eps = 0.2f;  // ε
  float kl_coef = 0.0f;   // β of the k3 term (0: none, as in PPO with the KL in the reward)
  float temperature = 1.0f;
};

struct ClippedLossStats {
  double loss = 0;        // Σ w·ℓ
  double kl = 0;          // Σ w·k3 (the KL estimate, same aggregation)
  double clip_frac = 0;   // fraction of tokens whose ratio was clipped
  double ratio_mean = 0;  // mean ratio over tokens
};

// The loss over the response tokens and, in place of `logits`, its gradient ∂loss/∂logits
// (zero rows where no response token is). old_logp, ref_logp, advantages and weights are per
// response token (token_logprobs' order); ref_logp is ignored when kl_coef == 0.
ClippedLossStats clipped_loss_backward(float* logits, const PackedBatch& b, int vocab,
                                       const std::vector<float>& old_logp,
                                       const std::vector<float>& ref_logp,
                                       const std::vector<float>& advantages,
                                       const std::vector<float>& weights,
                                       const ClippedLossConfig& c);

// Writes g·(δ_ja − p_j)/τ into row `row` of `logits` (the gradient of g·log p_a), given that
// the row still holds the logits. Rows the loss does not touch must be zeroed by the caller.
void logprob_grad_row(float* row, int vocab, int32_t target, float temperature, double g);

}  // namespace lmstack::rl
