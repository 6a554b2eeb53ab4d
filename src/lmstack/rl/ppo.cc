// PPO's advantages, value head and update (ppo.h).
#include "lmstack/rl/ppo.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lmstack/core/error.h"
#include "lmstack/rl/grpo.h"

namespace lmstack::rl {

std::vector<float> gae(const std::vector<float>& rewards, const std::vector<float>& values,
                       float gamma, float lambda) {
  LMSTACK_CHECK(rewards.size() == values.size(), "gae: {} rewards, {} values", rewards.size(),
                values.size());
  std::vector<float> adv(rewards.size());
  double next_value = 0, next_adv = 0;
  for (size_t t = rewards.size(); t-- > 0;) {
    const double delta = rewards[t] + gamma * next_value - values[t];
    next_adv = delta + gamma * lambda * next_adv;
    adv[t] = static_cast<float>(next_adv);
    next_value = values[t];
  }
  return adv;
}

double clipped_value_loss(double v, double v_old, double ret, float eps, double* dv) {
  const double clipped = v_old + std::clamp(v - v_old, -double(eps), double(eps));
  const double a = (v - ret) * (v - ret), b = (clipped - ret) * (clipped - ret);
  if (a >= b) {
    *dv = v - ret;
  } else {  // the clipped branch: its slope in v is 1 inside the clip range, else 0
    *dv = std::abs(v - v_old) < eps ? clipped - ret : 0.0;
  }
  return 0.5 * std::max(a, b);
}

ValueHead::ValueHead(int hidden, const train::AdamWConfig& adam)
    : hidden_(hidden),
      w_(Tensor::zeros(Shape{static_cast<int64_t>(hidden)}, DType::kF32, MemoryCategory::kWeights)),
      b_(Tensor::zeros(Shape{1}, DType::kF32, MemoryCategory::kWeights)),
      gw_(Tensor::zeros(Shape{static_cast<int64_t>(hidden)}, DType::kF32,
                        MemoryCategory::kGradients)),
      gb_(Tensor::zeros(Shape{1}, DType::kF32, MemoryCategory::kGradients)) {
  params_.push_back({"value_head.weight", &w_, &gw_, false});
  params_.push_back({"value_head.bias", &b_, &gb_, false});
  adam_ = std::make_unique<train::AdamW>(params_, adam);
}

namespace {

template <class F>
void for_each_response_row(const PackedBatch& b, F&& f) {
  size_t k = 0;
  for (int i = 0; i < b.batch; ++i)
    for (int j = 0; j < b.length[static_cast<size_t>(i)]; ++j, ++k)
      f(static_cast<int64_t>(i) * b.seq + b.first[static_cast<size_t>(i)] + j, k);
}

}  // namespace

std::vector<float> ValueHead::values(const float* hidden, const PackedBatch& b) const {
  std::vector<float> out(static_cast<size_t>(b.num_response_tokens()));
  const float* w = w_.data<float>();
  for_each_response_row(b, [&](int64_t row, size_t k) {
    const float* h = hidden + row * hidden_;
    double v = b_.data<float>()[0];
    for (int c = 0; c < hidden_; ++c) v += static_cast<double>(w[c]) * h[c];
    out[k] = static_cast<float>(v);
  });
  return out;
}

void ValueHead::accumulate_grad(const float* hidden, const PackedBatch& b,
                                const std::vector<double>& dv) {
  float* gw = gw_.data<float>();
  for_each_response_row(b, [&](int64_t row, size_t k) {
    const float* h = hidden + row * hidden_;
    for (int c = 0; c < hidden_; ++c) gw[c] += static_cast<float>(dv[k] * h[c]);
    gb_.data<float>()[0] += static_cast<float>(dv[k]);
  });
}

void ValueHead::step(ThreadPool& pool, float lr) {
  adam_->step(pool, lr);
  std::fill_n(gw_.data<float>(), hidden_, 0.0f);
  gb_.data<float>()[0] = 0;
}

namespace {

// Per-token rewards, GAE advantages (whitened) and returns of every rollout.
void advantages_and_returns(const std::vector<Rollout>& rollouts, const std::vector<float>& old,
                            const std::vector<float>& ref, const std::vector<float>& values,
                            const PpoConfig& c, std::vector<float>* adv, std::vector<float>* ret) {
  size_t k = 0;
  for (const Rollout& r : rollouts) {
    const size_t len = r.response.size();
    std::vector<float> rew(len), val(values.begin() + k, values.begin() + k + len);
    for (size_t t = 0; t < len; ++t) rew[t] = -c.kl_coef * (old[k + t] - ref[k + t]);
    if (len) rew[len - 1] += static_cast<float>(r.reward);
    const std::vector<float> a = gae(rew, val, c.gamma, c.lambda);
    for (size_t t = 0; t < len; ++t) adv->push_back(a[t]), ret->push_back(a[t] + val[t]);
    k += len;
  }
  // Whitening (mean 0, std 1 over the batch's tokens), as TRL's and baselines' PPO do.
  const double n = static_cast<double>(std::max<size_t>(1, adv->size()));
  const double mean = std::accumulate(adv->begin(), adv->end(), 0.0) / n;
  double var = 0;
  for (float a : *adv) var += (a - mean) * (a - mean);
  const double inv_std = 1.0 / (std::sqrt(var / n) + 1e-8);
  for (float& a : *adv) a = static_cast<float>((a - mean) * inv_std);
}

std::vector<float> slice_tokens(const std::vector<Rollout>& rollouts, size_t begin, size_t end,
                                const std::vector<float>& flat) {
  size_t from = 0, to = 0;
  for (size_t i = 0; i < end; ++i) (i < begin ? from : to) += rollouts[i].response.size();
  return {flat.begin() + static_cast<std::ptrdiff_t>(from),
          flat.begin() + static_cast<std::ptrdiff_t>(from + to)};
}

}  // namespace

PpoStats ppo_update(RlSession& s, ValueHead& value, const std::vector<Rollout>& rollouts,
                    const PpoConfig& c) {
  PpoStats st;
  const size_t n = rollouts.size();
  const PackedBatch all = pack_rollouts(rollouts, 0, n);
  std::vector<float> old, ref, entropy;
  model_logprobs(s.policy(), all, c.temperature, &old, &entropy);
  const std::vector<float> v_old = value.values(s.policy().final_hidden(), all);
  model_logprobs(s.ref(), all, c.temperature, &ref, nullptr);
  std::vector<float> adv, ret;
  advantages_and_returns(rollouts, old, ref, v_old, c, &adv, &ret);
  const double tokens = static_cast<double>(std::max<size_t>(1, old.size()));
  for (size_t k = 0; k < old.size(); ++k) {
    st.kl += (old[k] - ref[k]) / tokens;
    st.entropy += entropy[k] / tokens;
    st.value_mean += v_old[k] / tokens;
    st.return_mean += ret[k] / tokens;
  }
  const size_t mb = std::clamp<size_t>(static_cast<size_t>(c.minibatches), 1, n);
  const int vocab = s.config().vocab_size;
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    for (size_t m = 0; m < mb; ++m) {
      const size_t begin = m * n / mb, end = (m + 1) * n / mb;
      const PackedBatch b = pack_rollouts(rollouts, begin, end);
      const auto o = slice_tokens(rollouts, begin, end, old);
      const auto a = slice_tokens(rollouts, begin, end, adv);
      const auto r = slice_tokens(rollouts, begin, end, ret);
      const auto vo = slice_tokens(rollouts, begin, end, v_old);
      const auto w = loss_weights(b, LossAgg::kTokenMean);
      ClippedLossStats ls;
      double vloss = 0;
      s.policy().forward_backward_logits(b.inputs.data(), b.batch, b.seq, [&](float* logits) {
        ls =
            clipped_loss_backward(logits, b, vocab, o, {}, a, w, {c.clip_eps, 0.0f, c.temperature});
        const float* hidden = s.policy().final_hidden();
        const std::vector<float> v = value.values(hidden, b);
        std::vector<double> dv(v.size());
        for (size_t k = 0; k < v.size(); ++k) {
          vloss += w[k] * clipped_value_loss(v[k], vo[k], r[k], c.value_clip, &dv[k]);
          dv[k] *= w[k];
        }
        value.accumulate_grad(hidden, b, dv);
        return ls.loss;
      });
      st.losses.push_back(ls.loss);
      st.value_losses.push_back(vloss);
      st.clip_fracs.push_back(ls.clip_frac);
      st.grad_norms.push_back(s.optimizer_step());
      value.step(s.pool(), c.value_lr);
    }
  }
  return st;
}

}  // namespace lmstack::rl
