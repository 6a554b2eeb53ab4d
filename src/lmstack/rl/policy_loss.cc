// Packing, per-token log-probabilities and the clipped-ratio loss (policy_loss.h). Softmax
// sums run in double: the mismatch check compares these log-probs with the engine's in f32.
#include "lmstack/rl/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"

namespace lmstack::rl {

int64_t PackedBatch::num_response_tokens() const {
  int64_t n = 0;
  for (int32_t l : length) n += l;
  return n;
}

PackedBatch pack(const std::vector<const std::vector<int32_t>*>& prompts,
                 const std::vector<const std::vector<int32_t>*>& responses) {
  LMSTACK_CHECK(prompts.size() == responses.size() && !prompts.empty(), "pack {} vs {}",
                prompts.size(), responses.size());
  PackedBatch b;
  b.batch = static_cast<int>(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    LMSTACK_CHECK(!prompts[i]->empty(), "pack: empty prompt {}", i);
    b.seq = std::max(b.seq, static_cast<int>(prompts[i]->size() + responses[i]->size()) - 1);
  }
  b.seq = std::max(b.seq, 1);
  b.inputs.assign(static_cast<size_t>(b.batch) * b.seq, 0);
  b.targets.assign(b.inputs.size(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> full = *prompts[i];
    full.insert(full.end(), responses[i]->begin(), responses[i]->end());
    int32_t* in = b.inputs.data() + i * static_cast<size_t>(b.seq);
    int32_t* tg = b.targets.data() + i * static_cast<size_t>(b.seq);
    for (size_t t = 0; t + 1 < full.size(); ++t) in[t] = full[t], tg[t] = full[t + 1];
    if (full.size() == 1) in[0] = full[0];
    b.first.push_back(static_cast<int32_t>(prompts[i]->size()) - 1);
    b.length.push_back(static_cast<int32_t>(responses[i]->size()));
  }
  return b;
}

namespace {

// log Σ exp(z/τ) over a row, and optionally the entropy of softmax(z/τ).
double row_logsumexp(const float* z, int vocab, float inv_t, double* entropy) {
  const float m = *std::max_element(z, z + vocab);
  double sum = 0, weighted = 0;
  for (int j = 0; j < vocab; ++j) {
    const double s = static_cast<double>(z[j] - m) * inv_t;
    const double e = std::exp(s);
    sum += e;
    weighted += e * s;
  }
  const double lse = static_cast<double>(m) * inv_t + std::log(sum);
  // H = −Σ p (s − log sum) = log sum − Σ p s, with s the shifted scaled logit.
  if (entropy) *entropy = std::log(sum) - weighted / sum;
  return lse;
}

template <class F>
void for_each_token(const PackedBatch& b, F&& f) {
  size_t k = 0;
  for (int i = 0; i < b.batch; ++i)
    for (int j = 0; j < b.length[static_cast<size_t>(i)]; ++j, ++k)
      f(static_cast<int64_t>(i) * b.seq + b.first[static_cast<size_t>(i)] + j, k);
}

}  // namespace

void token_logprobs(const float* logits, const PackedBatch& b, int vocab, float temperature,
                    std::vector<float>* logp, std::vector<float>* entropy) {
  const float inv_t = 1.0f / temperature;
  const size_t n = static_cast<size_t>(b.num_response_tokens());
  logp->assign(n, 0);
  if (entropy) entropy->assign(n, 0);
  for_each_token(b, [&](int64_t row, size_t k) {
    const float* z = logits + row * vocab;
    double h = 0;
    const double lse = row_logsumexp(z, vocab, inv_t, entropy ? &h : nullptr);
    (*logp)[k] = static_cast<float>(
        static_cast<double>(z[b.targets[static_cast<size_t>(row)]]) * inv_t - lse);
    if (entropy) (*entropy)[k] = static_cast<float>(h);
  });
}

std::vector<std::vector<float>> split_rows(const PackedBatch& b, const std::vector<float>& flat) {
  std::vector<std::vector<float>> out(static_cast<size_t>(b.batch));
  size_t k = 0;
  for (int i = 0; i < b.batch; ++i) {
    const size_t len = static_cast<size_t>(b.length[static_cast<size_t>(i)]);
    out[static_cast<size_t>(i)].assign(flat.begin() + static_cast<std::ptrdiff_t>(k),
                                       flat.begin() + static_cast<std::ptrdiff_t>(k + len));
    k += len;
  }
  return out;
}

std::vector<float> loss_weights(const PackedBatch& b, LossAgg agg) {
  std::vector<float> w;
  const double total = static_cast<double>(std::max<int64_t>(1, b.num_response_tokens()));
  for (int i = 0; i < b.batch; ++i) {
    const int len = b.length[static_cast<size_t>(i)];
    const double wi = agg == LossAgg::kTokenMean ? 1.0 / total : 1.0 / (b.batch * double(len));
    w.insert(w.end(), static_cast<size_t>(len), static_cast<float>(wi));
  }
  return w;
}

void logprob_grad_row(float* row, int vocab, int32_t target, float temperature, double g) {
  const float inv_t = 1.0f / temperature;
  const float m = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(row[j] - m) * inv_t);
  const double scale = g * inv_t;
  for (int j = 0; j < vocab; ++j) {
    const double p = std::exp(static_cast<double>(row[j] - m) * inv_t) / sum;
    row[j] = static_cast<float>(-scale * p);
  }
  row[target] += static_cast<float>(scale);
}

ClippedLossStats clipped_loss_backward(float* logits, const PackedBatch& b, int vocab,
                                       const std::vector<float>& old_logp,
                                       const std::vector<float>& ref_logp,
                                       const std::vector<float>& advantages,
                                       const std::vector<float>& weights,
                                       const ClippedLossConfig& c) {
  std::vector<float> logp;
  token_logprobs(logits, b, vocab, c.temperature, &logp, nullptr);
  const size_t n = logp.size();
  LMSTACK_CHECK(old_logp.size() == n && advantages.size() == n && weights.size() == n &&
                    (c.kl_coef == 0 || ref_logp.size() == n),
                "clipped loss: {} tokens, {} old, {} ref, {} adv, {} weights", n, old_logp.size(),
                ref_logp.size(), advantages.size(), weights.size());
  std::vector<double> dlogp(n);
  ClippedLossStats s;
  int64_t clipped = 0;
  for (size_t k = 0; k < n; ++k) {
    const double lp = logp[k], a = advantages[k];
    const double r = std::exp(lp - old_logp[k]);
    const double rc = std::clamp(r, 1.0 - c.clip_eps, 1.0 + c.clip_eps);
    const bool unclipped = r * a <= rc * a;
    double loss = -std::min(r * a, rc * a), grad = unclipped ? -r * a : 0.0;
    if (!unclipped) ++clipped;
    if (c.kl_coef != 0) {
      const double q = static_cast<double>(ref_logp[k]) - lp;
      const double k3 = std::exp(q) - q - 1;
      loss += c.kl_coef * k3;
      grad += c.kl_coef * (1 - std::exp(q));
      s.kl += weights[k] * k3;
    }
    s.loss += weights[k] * loss;
    s.ratio_mean += r;
    dlogp[k] = weights[k] * grad;
  }
  if (n) s.clip_frac = double(clipped) / double(n), s.ratio_mean /= double(n);
  // Rows without a response token get zero gradient; the others ∂loss/∂log p · ∂log p/∂z.
  std::vector<char> touched(static_cast<size_t>(b.batch) * b.seq, 0);
  for_each_token(b, [&](int64_t row, size_t k) {
    logprob_grad_row(logits + row * vocab, vocab, b.targets[static_cast<size_t>(row)],
                     c.temperature, dlogp[k]);
    touched[static_cast<size_t>(row)] = 1;
  });
  for (size_t row = 0; row < touched.size(); ++row)
    if (!touched[row]) std::memset(logits + row * vocab, 0, sizeof(float) * vocab);
  return s;
}

}  // namespace lmstack::rl
