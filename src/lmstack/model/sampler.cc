// Sampling (see sampler.h). Filters work on a candidate list sorted by logit, so top-k, top-p
// and min-p compose: their survivors are a prefix of it, and only as much of the list is
// sorted as the filters need. Without any filter no sort is needed at all.
#include "lmstack/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"

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

namespace {

// The sampler's RNG as a distribution sees it, counting the calls (Sampler::num_rng_draws).
struct CountingRng {
  using result_type = std::mt19937_64::result_type;
  std::mt19937_64& rng;
  uint64_t& draws;
  static constexpr result_type min() { return std::mt19937_64::min(); }
  static constexpr result_type max() { return std::mt19937_64::max(); }
  result_type operator()() {
    ++draws;
    return rng();
  }
};

}  // namespace

void Sampler::skip_rng_draws(uint64_t n) {
  rng_.discard(n);
  num_draws_ += n;
}

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

namespace {

// Index of the largest logit, ties to the lowest id.
int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

// Fills probs_ with the full tempered distribution (the vectorized softmax kernel: one pass
// per step over the vocabulary instead of a double-precision exp per id) and returns the
// log-softmax normalizer log Σ e^((l - max) / T). The largest logit's probability is exactly
// 1 / Σ, so the normalizer needs no second pass and stays finite where a tail underflows.
double Sampler::tempered_probs(std::span<const float> logits, float inv_t, float max_logit) {
  probs_.resize(logits.size());
  bool masked = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs_[i] = (logits[i] - max_logit) * inv_t;
    masked |= logits[i] == -std::numeric_limits<float>::infinity();
  }
  kernels::softmax_rows(probs_.data(), 1, static_cast<int64_t>(probs_.size()));
  // The kernel's e^x clamps its input (AVX2: at -87.33), so a masked (-inf) logit would keep
  // a tiny mass.
  if (masked)
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] == -std::numeric_limits<float>::infinity()) probs_[i] = 0;
  return -std::log(static_cast<double>(probs_[static_cast<size_t>(argmax(logits))]));
}

// The first `need` candidates by logit, best first (ties: lower id first), in cand_.
void Sampler::sort_candidates(std::span<const float> logits, size_t need) {
  const auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  need = std::min(need, cand_.size());
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(need), cand_.end(),
                    better);
}

// Sorts cand_ as far as top-k, top-p and min-p need and returns how many candidates survive
// them (a prefix of cand_), or 0 when no filter cuts anything: then the distribution is all of
// probs_, in id order, and nothing needs sorting. probs_ holds the tempered distribution and
// cand_ the ids, its first `sorted` already in order.
size_t Sampler::filter(std::span<const float> logits, size_t sorted) {
  const size_t vocab = logits.size();
  const size_t keep_k = params_.top_k > 0 ? std::min<size_t>(params_.top_k, vocab) : vocab;
  if (keep_k == vocab && params_.top_p >= 1.0f && params_.min_p <= 0.0f) return 0;
  if (sorted < std::min<size_t>(keep_k, 64)) {
    sorted = std::min<size_t>(keep_k, 64);
    sort_candidates(logits, sorted);
  }
  size_t n = keep_k;
  if (params_.top_p < 1.0f) {
    // Smallest prefix with mass >= top_p of the top-k distribution; sort more candidates
    // (x4) only while the sorted ones fall short.
    double kept = 1.0;
    if (keep_k < vocab) {
      sort_candidates(logits, keep_k);
      sorted = keep_k;
      kept = 0;
      for (size_t i = 0; i < keep_k; ++i) kept += probs_[static_cast<size_t>(cand_[i])];
    }
    double mass = 0;
    size_t i = 0;
    for (bool found = false; !found;) {
      for (; i < sorted && !found; ++i) {
        mass += probs_[static_cast<size_t>(cand_[i])] / kept;
        found = mass >= params_.top_p;
      }
      if (found || sorted >= keep_k) break;
      sorted = std::min(keep_k, sorted * 4);
      sort_candidates(logits, sorted);
    }
    n = std::min(n, i);
  }
  if (params_.min_p > 0.0f) {  // drop tokens below min_p × p(best)
    const float floor = params_.min_p * probs_[static_cast<size_t>(cand_[0])];
    size_t above = 0;
    for (float p : probs_) above += p >= floor;
    n = std::min(n, std::max<size_t>(above, 1));
  }
  if (n > sorted) sort_candidates(logits, n);
  return n;
}

SampleResult Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  apply_penalties(logits, history);
  const bool greedy = params_.temperature == 0.0f;
  const float inv_t = greedy ? 1.0f : 1.0f / params_.temperature;
  const float max_logit = logits[static_cast<size_t>(argmax(logits))];
  // log-softmax over the full (tempered) distribution, for reported logprobs.
  const double log_z = tempered_probs(logits, inv_t, max_logit);
  const auto logprob_of = [&](int32_t t) {
    return static_cast<float>((logits[static_cast<size_t>(t)] - max_logit) * inv_t - log_z);
  };
  SampleResult result;
  const size_t need_top = std::min(static_cast<size_t>(params_.logprobs), logits.size());
  cand_.resize(logits.size());
  std::iota(cand_.begin(), cand_.end(), 0);
  if (need_top > 0) sort_candidates(logits, need_top);
  for (size_t i = 0; i < need_top; ++i) result.top.push_back({cand_[i], logprob_of(cand_[i])});
  if (greedy) {
    result.token = argmax(logits);
  } else if (const size_t n = filter(logits, need_top); n == 0) {
    std::discrete_distribution<size_t> pick(probs_.begin(), probs_.end());
    CountingRng rng{rng_, num_draws_};
    result.token = static_cast<int32_t>(pick(rng));
  } else {
    weights_.resize(n);
    for (size_t i = 0; i < n; ++i) weights_[i] = probs_[static_cast<size_t>(cand_[i])];
    std::discrete_distribution<size_t> pick(weights_.begin(), weights_.end());
    CountingRng rng{rng_, num_draws_};
    result.token = cand_[pick(rng)];
  }
  result.logprob = logprob_of(result.token);
  return result;
}

std::vector<float> Sampler::probabilities(std::span<const float> logits,
                                          std::span<const int32_t> history) {
  std::vector<float> l(logits.begin(), logits.end());
  apply_penalties(l, history);
  const int32_t best = argmax(l);
  std::vector<float> out(l.size(), 0.0f);
  if (params_.temperature == 0.0f) {
    out[static_cast<size_t>(best)] = 1.0f;
    return out;
  }
  tempered_probs(l, 1.0f / params_.temperature, l[static_cast<size_t>(best)]);
  cand_.resize(l.size());
  std::iota(cand_.begin(), cand_.end(), 0);
  const size_t n = filter(l, 0);
  if (n == 0) return probs_;
  double kept = 0;
  for (size_t i = 0; i < n; ++i) kept += probs_[static_cast<size_t>(cand_[i])];
  for (size_t i = 0; i < n; ++i) {
    const size_t t = static_cast<size_t>(cand_[i]);
    out[t] = static_cast<float>(probs_[t] / kept);
  }
  return out;
}

float Sampler::logprob(std::span<const float> logits, std::span<const int32_t> history,
                       int32_t token) {
  std::vector<float> l(logits.begin(), logits.end());
  apply_penalties(l, history);
  const float inv_t = params_.temperature == 0.0f ? 1.0f : 1.0f / params_.temperature;
  const float max_logit = l[static_cast<size_t>(argmax(l))];
  const double log_z = tempered_probs(l, inv_t, max_logit);
  return static_cast<float>((l[static_cast<size_t>(token)] - max_logit) * inv_t - log_z);
}

}  // namespace lmstack::model
