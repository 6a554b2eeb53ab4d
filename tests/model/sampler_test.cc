// Sampler: greedy, seeded reproducibility, each filter against hand-computed distributions,
// penalties by their formulas, and logprobs against a direct log-softmax.
#include "lmstack/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"

namespace lmstack::model {
namespace {

std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int n) {
  std::map<int32_t, int> h;
  Sampler s(p);
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    h[s.sample(l, {}).token]++;
  }
  return h;
}

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(l, {}).token, 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[static_cast<size_t>(i)] = std::sin(static_cast<float>(i));
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 40; ++i) {
      std::vector<float> l = logits;
      out.push_back(s.sample(l, {}).token);
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, TopKTopPMinPRestrictTheSupport) {
  // probabilities ∝ e^l: 0.6439, 0.2369, 0.0871, 0.0321 for l = 3, 2, 1, 0
  const std::vector<float> logits = {3, 2, 1, 0};
  SamplingParams k;
  k.top_k = 2;
  auto h = histogram(k, logits, 2000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_NEAR(h[0] / 2000.0, 0.6439 / (0.6439 + 0.2369), 0.04);
  SamplingParams tp;
  tp.top_p = 0.85f;  // 0.644 < 0.85 <= 0.881: keeps tokens 0 and 1
  h = histogram(tp, logits, 2000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_GT(h[1], 0);
  SamplingParams mp;
  mp.min_p = 0.1f;  // floor 0.0644: drops token 3 (0.0321), keeps token 2 (0.0871)
  h = histogram(mp, logits, 3000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h[2], 0);
}

// A vocabulary large enough that top-p must sort past the first 64 and 256 candidates
// (the sampler sorts only as far as the filters need): the support it keeps equals the
// smallest prefix of the fully sorted list with the mass, computed here in double.
TEST(Sampler, TopPOverALargeVocabularyKeepsTheExactPrefix) {
  const int vocab = 5000;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i)  // a flat-ish, shuffled distribution: many tokens per 0.9
    logits[static_cast<size_t>(i)] = 0.002f * static_cast<float>((i * 7919) % vocab);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  SamplingParams p;
  p.top_p = 0.5f;
  size_t keep = 0;
  for (double mass = 0; mass < p.top_p; ++keep)
    mass += std::exp(static_cast<double>(logits[static_cast<size_t>(order[keep])])) / z;
  ASSERT_GT(keep, 256u);
  const float lowest_kept = logits[static_cast<size_t>(order[keep - 1])];
  const auto h = histogram(p, logits, 4000);
  for (const auto& [token, count] : h)
    EXPECT_GE(logits[static_cast<size_t>(token)], lowest_kept) << "token " << token;
  EXPECT_GT(h.size(), keep / 2);  // the kept tokens are all reachable, not just the top few
}

// Masked (-inf) logits, as a grammar mask writes them, are never sampled, with or without
// filters, and the reported logprob of the chosen token stays the log-softmax.
TEST(Sampler, MaskedLogitsAreNeverChosen) {
  std::vector<float> logits(300, 0.0f);
  for (size_t i = 0; i < logits.size(); i += 3) logits[i] = -INFINITY;
  for (float top_p : {1.0f, 0.9f}) {
    SamplingParams p;
    p.top_p = top_p;
    const auto h = histogram(p, logits, 3000);
    for (const auto& [token, count] : h) EXPECT_NE(token % 3, 0) << "token " << token;
  }
  SamplingParams p;
  Sampler s(p);
  std::vector<float> l = logits;
  EXPECT_NEAR(s.sample(l, {}).logprob, -std::log(200.0), 1e-5);
  // Exactly zero, not the softmax kernel's clamped e^-87.33 (the AVX2 path leaves 5.9e-41
  // there; no few thousand draws would reveal it).
  const std::vector<float> probs = s.probabilities(logits, {});
  for (size_t i = 0; i < probs.size(); i += 3) EXPECT_EQ(probs[i], 0.0f) << "token " << i;
}

TEST(Sampler, TemperatureSharpens) {
  const std::vector<float> logits = {1, 0};
  SamplingParams p;
  p.temperature = 0.25f;  // p0 = 1 / (1 + e^-4) = 0.982
  auto h = histogram(p, logits, 3000);
  EXPECT_NEAR(h[0] / 3000.0, 1 / (1 + std::exp(-4.0)), 0.015);
}

TEST(Sampler, PenaltiesFollowTheirFormulas) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  std::vector<float> l = {4.0f, -1.0f, 3.5f};
  const std::vector<int32_t> history = {0, 0, 1};
  s.sample(l, history);
  EXPECT_FLOAT_EQ(l[0], 4.0f / 2 - 0.5f - 0.25f * 2);   // 1.0
  EXPECT_FLOAT_EQ(l[1], -1.0f * 2 - 0.5f - 0.25f * 1);  // -2.75
  EXPECT_FLOAT_EQ(l[2], 3.5f);
}

TEST(Sampler, LogprobsAreLogSoftmax) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  Sampler s(p);
  std::vector<float> l = {1.0f, 2.0f, 0.5f};
  const SampleResult r = s.sample(l, {});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(0.5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 0);
  EXPECT_NEAR(r.logprob, 2.0 - std::log(z), 1e-5);
  EXPECT_NEAR(r.top[1].logprob, 1.0 - std::log(z), 1e-5);
}

TEST(Sampler, ValidateNamesTheField) {
  SamplingParams p;
  p.top_p = 0;
  try {
    p.validate();
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = {};
  p.max_tokens = -1;
  EXPECT_THROW(p.validate(), RequestError);
}

}  // namespace
}  // namespace lmstack::model
