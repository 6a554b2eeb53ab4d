// GRPO's advantages and update (grpo.h).
#include "lmstack/rl/grpo.h"

#include <cmath>
#include <numeric>

#include "lmstack/core/error.h"

namespace lmstack::rl {

std::vector<float> group_advantages(const std::vector<double>& rewards, int group_size, float eps) {
  LMSTACK_CHECK(group_size >= 1 && rewards.size() % static_cast<size_t>(group_size) == 0,
                "{} rewards in groups of {}", rewards.size(), group_size);
  std::vector<float> out(rewards.size());
  for (size_t g = 0; g < rewards.size(); g += static_cast<size_t>(group_size)) {
    double mean = 0, var = 0;
    for (int i = 0; i < group_size; ++i) mean += rewards[g + i];
    mean /= group_size;
    for (int i = 0; i < group_size; ++i) var += (rewards[g + i] - mean) * (rewards[g + i] - mean);
    const double std = group_size > 1 ? std::sqrt(var / (group_size - 1)) : 0.0;
    for (int i = 0; i < group_size; ++i)  // a constant group: exactly 0, whatever eps
      out[g + i] = std == 0 ? 0.0f : static_cast<float>((rewards[g + i] - mean) / (std + eps));
  }
  return out;
}

double k3_mean(const std::vector<float>& logp, const std::vector<float>& ref_logp) {
  double sum = 0;
  for (size_t k = 0; k < logp.size(); ++k) {
    const double q = static_cast<double>(ref_logp[k]) - logp[k];
    sum += std::exp(q) - q - 1;
  }
  return logp.empty() ? 0 : sum / static_cast<double>(logp.size());
}

PackedBatch pack_rollouts(const std::vector<Rollout>& rollouts, size_t begin, size_t end) {
  std::vector<const std::vector<int32_t>*> prompts, responses;
  for (size_t i = begin; i < end; ++i) {
    prompts.push_back(&rollouts[i].prompt);
    responses.push_back(&rollouts[i].response);
  }
  return pack(prompts, responses);
}

namespace {

// Per-token copies of per-rollout values, in token_logprobs' order over rows [begin, end).
std::vector<float> per_token(const std::vector<Rollout>& rollouts, size_t begin, size_t end,
                             const std::vector<float>& per_rollout) {
  std::vector<float> out;
  for (size_t i = begin; i < end; ++i)
    out.insert(out.end(), rollouts[i].response.size(), per_rollout[i]);
  return out;
}

std::vector<float> concat_rows(const std::vector<std::vector<float>>& rows, size_t begin,
                               size_t end) {
  std::vector<float> out;
  for (size_t i = begin; i < end; ++i) out.insert(out.end(), rows[i].begin(), rows[i].end());
  return out;
}

}  // namespace

UpdateStats grpo_update(RlSession& s, const std::vector<Rollout>& rollouts, int group_size,
                        const GrpoConfig& c) {
  UpdateStats st;
  std::vector<double> rewards;
  for (const Rollout& r : rollouts) rewards.push_back(r.reward);
  st.advantages = group_advantages(rewards, group_size, c.adv_eps);
  const size_t n = rollouts.size();
  const PackedBatch all = pack_rollouts(rollouts, 0, n);
  std::vector<float> old_flat, ref_flat, entropy;
  model_logprobs(s.policy(), all, c.loss.temperature, &old_flat, &entropy);
  if (c.loss.kl_coef != 0) model_logprobs(s.ref(), all, c.loss.temperature, &ref_flat, nullptr);
  st.old_logprobs = split_rows(all, old_flat);
  const auto ref_rows = split_rows(all, ref_flat.empty() ? old_flat : ref_flat);
  st.entropy = entropy.empty() ? 0
                               : std::accumulate(entropy.begin(), entropy.end(), 0.0) /
                                     static_cast<double>(entropy.size());
  st.kl = ref_flat.empty() ? 0 : k3_mean(old_flat, ref_flat);
  const size_t groups = n / static_cast<size_t>(group_size);
  const size_t mb = std::max<size_t>(1, static_cast<size_t>(c.minibatches));
  LMSTACK_CHECK(groups % mb == 0, "{} groups do not split into {} mini-batches", groups, mb);
  const size_t rows_per_mb = n / mb;
  const int vocab = s.config().vocab_size;
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    for (size_t m = 0; m < mb; ++m) {
      const size_t begin = m * rows_per_mb, end = begin + rows_per_mb;
      const PackedBatch b = pack_rollouts(rollouts, begin, end);
      const auto old_lp = concat_rows(st.old_logprobs, begin, end);
      const auto ref_lp = concat_rows(ref_rows, begin, end);
      const auto adv = per_token(rollouts, begin, end, st.advantages);
      const auto w = loss_weights(b, c.agg);
      ClippedLossStats ls;
      s.policy().forward_backward_logits(b.inputs.data(), b.batch, b.seq, [&](float* logits) {
        ls = clipped_loss_backward(logits, b, vocab, old_lp, ref_lp, adv, w, c.loss);
        return ls.loss;
      });
      st.losses.push_back(ls.loss);
      st.kls.push_back(ls.kl);
      st.clip_fracs.push_back(ls.clip_frac);
      st.grad_norms.push_back(s.optimizer_step());
    }
  }
  return st;
}

}  // namespace lmstack::rl
