// Sampling (see sampler.h). Filters work on a candidate list sorted by logit, so top-k, top-p
// and min-p compose in one pass; the softmax is taken over the survivors only.
#include "lmstack/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "lmstack/core/error.h"

namespace lmstack::model {

void SamplingParams::validate() const {
  if (!(temperature >= 0) || temperature > 100)
    throw_error<RequestError>("temperature must be in [0, 100], got {}", temperature);
  if (top_k < 0) throw_error<RequestError>("top_k must be >= 0, got {}", top_k);
  if (!(top_p > 0 && top_p <= 1))
    throw_error<RequestError>("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0 && min_p <= 1))
    throw_error<RequestError>("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0))
    throw_error<RequestError>("repetition_penalty must be > 0, got {}", repetition_penalty);
  if (!(presence_penalty >= -2 && presence_penalty <= 2))
    throw_error<RequestError>("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2))
    throw_error<RequestError>("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  if (max_tokens < 0) throw_error<RequestError>("max_tokens must be >= 0, got {}", max_tokens);
  if (logprobs < 0 || logprobs > 20)
    throw_error<RequestError>("logprobs must be in [0, 20], got {}", logprobs);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
  const SamplingParams& p = params_;
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f)
    return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : history)
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) ++counts[t];
  for (const auto& [token, count] : counts) {
    float& l = logits[static_cast<size_t>(token)];
    if (p.repetition_penalty != 1.0f)
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
  }
}

SampleResult Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  apply_penalties(logits, history);
  const bool greedy = params_.temperature == 0.0f;
  const float inv_t = greedy ? 1.0f : 1.0f / params_.temperature;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  // log-softmax normalizer over the full (tempered) distribution, for reported logprobs.
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>((l - max_logit) * inv_t));
  const auto logprob_of = [&](int32_t t) {
    return static_cast<float>((logits[static_cast<size_t>(t)] - max_logit) * inv_t - std::log(z));
  };
  // Candidates sorted by logit, best first (ties: lower id first): partial sort is enough
  // when top-k bounds the list.
  std::vector<int32_t> cand(logits.size());
  std::iota(cand.begin(), cand.end(), 0);
  const auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  const size_t keep_k =
      params_.top_k > 0 ? std::min<size_t>(params_.top_k, cand.size()) : cand.size();
  const size_t need = std::max<size_t>(greedy ? 1 : keep_k, static_cast<size_t>(params_.logprobs));
  if (need < cand.size()) {
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(need), cand.end(),
                      better);
  } else {
    std::sort(cand.begin(), cand.end(), better);
  }
  SampleResult result;
  for (int i = 0; i < params_.logprobs && i < static_cast<int>(cand.size()); ++i)
    result.top.push_back({cand[static_cast<size_t>(i)], logprob_of(cand[static_cast<size_t>(i)])});
  if (greedy) {
    result.token = cand[0];
    result.logprob = logprob_of(result.token);
    return result;
  }
  cand.resize(keep_k);
  std::vector<double> probs(cand.size());
  double sum = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    probs[i] =
        std::exp(static_cast<double>((logits[static_cast<size_t>(cand[i])] - max_logit) * inv_t));
    sum += probs[i];
  }
  size_t n = cand.size();
  if (params_.top_p < 1.0f) {  // smallest prefix with mass >= top_p
    double mass = 0;
    for (size_t i = 0; i < n; ++i) {
      mass += probs[i] / sum;
      if (mass >= params_.top_p) {
        n = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0.0f) {  // drop tokens below min_p × p(best)
    const double floor = params_.min_p * probs[0];
    while (n > 1 && probs[n - 1] < floor) --n;
  }
  std::discrete_distribution<size_t> pick(probs.begin(),
                                          probs.begin() + static_cast<std::ptrdiff_t>(n));
  result.token = cand[pick(rng_)];
  result.logprob = logprob_of(result.token);
  return result;
}

// The same chain as sample() (penalties → temperature → top-k → top-p → min-p) on a dense
// copy, returned as probabilities instead of a draw.
std::vector<float> Sampler::probabilities(std::span<const float> logits,
                                          std::span<const int32_t> history) const {
  std::vector<float> l(logits.begin(), logits.end());
  apply_penalties(l, history);
  std::vector<float> out(l.size(), 0.0f);
  const auto best = std::max_element(l.begin(), l.end());
  if (params_.temperature == 0.0f) {
    out[static_cast<size_t>(best - l.begin())] = 1.0f;
    return out;
  }
  std::vector<int32_t> cand(l.size());
  std::iota(cand.begin(), cand.end(), 0);
  // Without filters the order does not matter: skip the O(V log V) sort; top-k alone needs
  // only its k best in order.
  const auto better = [&](int32_t a, int32_t b) {
    const float la = l[static_cast<size_t>(a)], lb = l[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t n = params_.top_k > 0 ? std::min<size_t>(params_.top_k, cand.size()) : cand.size();
  if (n < cand.size())
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(),
                      better);
  else if (params_.top_p < 1.0f || params_.min_p > 0.0f)
    std::sort(cand.begin(), cand.end(), better);
  std::vector<double> probs(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += probs[i] = std::exp(
        static_cast<double>((l[static_cast<size_t>(cand[i])] - *best) / params_.temperature));
  if (params_.top_p < 1.0f) {
    double mass = 0;
    for (size_t i = 0; i < n; ++i)
      if ((mass += probs[i] / sum) >= params_.top_p) {
        n = i + 1;
        break;
      }
  }
  if (params_.min_p > 0.0f)
    while (n > 1 && probs[n - 1] < params_.min_p * probs[0]) --n;
  const double kept =
      std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(n), 0.0);
  for (size_t i = 0; i < n; ++i)
    out[static_cast<size_t>(cand[i])] = static_cast<float>(probs[i] / kept);
  return out;
}

}  // namespace lmstack::model
