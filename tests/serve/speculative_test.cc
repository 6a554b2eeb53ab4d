// Speculative decoding's parts without a model: the rejection sampler's output follows the
// target distribution p whatever the draft distribution q (Leviathan et al. 2023, Appendix
// A.1), checked statistically on a 5-token vocabulary with fixed seeds; the bonus-token and
// all-rejected paths; Sampler::probabilities against Sampler::sample; n-gram prompt lookup.
#include "lmstack/serve/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"

namespace lmstack::serve {
namespace {

constexpr int kDraws = 200000;

// Each frequency of a multinomial sample of kDraws is within 5 standard deviations of its
// probability, sqrt(p (1 - p) / N) (false alarm < 6e-7 per token); tokens with p = 0 never
// appear. The returned bound is the loosest over the tokens, to show the test's power.
double expect_follows(const std::vector<int>& counts, const std::vector<float>& p) {
  double widest = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double f = static_cast<double>(counts[i]) / kDraws;
    const double bound = 5 * std::sqrt(p[i] * (1 - p[i]) / kDraws);
    widest = std::max(widest, bound);
    if (p[i] == 0)
      EXPECT_EQ(counts[i], 0) << "token " << i << " has p = 0";
    else
      EXPECT_NEAR(f, p[i], bound) << "token " << i;
  }
  return widest;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double{a[i]} - b[i]));
  return d;
}

// The whole speculative step for one position: x ~ q, then accept or resample.
std::vector<int> speculate_many(const std::vector<float>& p, const std::vector<float>& q,
                                uint64_t seed, int* accepted = nullptr) {
  std::mt19937_64 rng(seed);
  std::vector<int> counts(p.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = draw_from(q, rng);
    const auto r = accept_or_resample(p, x, q, rng);
    ++counts[static_cast<size_t>(r.value_or(x))];
    if (accepted && !r) ++*accepted;
  }
  return counts;
}

TEST(RejectionSampler, OutputFollowsTargetWhateverTheDraft) {
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f, 0.0f};
  const std::vector<float> q = {0.3f, 0.1f, 0.1f, 0.2f, 0.3f};
  int accepted = 0;
  const double bound = expect_follows(speculate_many(p, q, 7, &accepted), p);
  // Power: returning the draft unchecked would be off by 0.3 on token 1, far past the bound.
  EXPECT_GT(max_abs_diff(p, q), 20 * bound);
  // P(accept) = sum_x min(p(x), q(x)) = 1 - TV(p, q) = 0.1 + 0.1 + 0.1 + 0.2 = 0.5.
  EXPECT_NEAR(static_cast<double>(accepted) / kDraws, 0.5, 5 * std::sqrt(0.25 / kDraws));
}

TEST(RejectionSampler, PointMassDraftAcceptsWithProbabilityP) {
  const std::vector<float> p = {0.05f, 0.25f, 0.6f, 0.1f, 0.0f};
  std::mt19937_64 rng(11);
  std::vector<int> counts(p.size(), 0);
  int accepted = 0;
  for (int i = 0; i < kDraws; ++i) {  // n-gram drafts: q(x) = 1 on the proposed token 2
    const auto r = accept_or_resample(p, 2, {}, rng);
    accepted += !r;
    ++counts[static_cast<size_t>(r.value_or(2))];
  }
  expect_follows(counts, p);
  EXPECT_NEAR(static_cast<double>(accepted) / kDraws, 0.6, 5 * std::sqrt(0.24 / kDraws));
}

TEST(RejectionSampler, DraftTheTargetRulesOutIsAlwaysReplaced) {
  const std::vector<float> p = {0.5f, 0.0f, 0.3f, 0.2f, 0.0f};
  std::mt19937_64 rng(3);
  std::vector<int> counts(p.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    const auto r = accept_or_resample(p, 4, {}, rng);  // p(4) = 0: rejected every time
    ASSERT_TRUE(r.has_value());
    ++counts[static_cast<size_t>(*r)];
  }
  expect_follows(counts, p);
}

TEST(RejectionSampler, BonusTokenFollowsP) {
  const std::vector<float> p = {0.15f, 0.0f, 0.35f, 0.2f, 0.3f};
  std::mt19937_64 rng(5);
  std::vector<int> counts(p.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[static_cast<size_t>(draw_from(p, rng))];
  expect_follows(counts, p);
}

TEST(RejectionSampler, GreedyAcceptsExactlyTheArgmax) {
  const std::vector<float> p = {0, 0, 1, 0, 0};  // temperature 0: a point mass on the argmax
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(accept_or_resample(p, 2, {}, rng).has_value());
    EXPECT_EQ(accept_or_resample(p, 3, {}, rng), 2);
    EXPECT_EQ(accept_or_resample(p, 0, std::vector<float>{1, 0, 0, 0, 0}, rng), 2);
  }
}

TEST(SamplerProbabilities, GreedyIsAPointMassOnTheFirstArgmax) {
  model::SamplingParams sp;
  sp.temperature = 0;
  model::Sampler s(sp);
  EXPECT_EQ(s.probabilities(std::vector<float>{0.5f, 2.0f, 2.0f, -1.0f}, {}),
            (std::vector<float>{0, 1, 0, 0}));
}

// sample() must draw from exactly what probabilities() returns, for each filter path: top-k
// with top-p (partial sort), top-p alone (full sort), min-p, and none (no sort).
TEST(SamplerProbabilities, SampleDrawsFromTheReturnedDistribution) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.2f, 2.0f, -1.0f};
  struct Case {
    float temperature;
    int top_k;
    float top_p, min_p;
    int num_zero;  // tokens the filters remove
  };
  for (const Case& c : {Case{0.7f, 4, 0.9f, 0.0f, 3}, Case{1.3f, 0, 0.8f, 0.0f, 2},
                        Case{0.9f, 0, 1.0f, 0.2f, 3}, Case{1.0f, 0, 1.0f, 0.0f, 0}}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << c.temperature << " top_k " << c.top_k
                                      << " top_p " << c.top_p << " min_p " << c.min_p);
    model::SamplingParams sp;
    sp.temperature = c.temperature;
    sp.top_k = c.top_k;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    sp.seed = 42;
    model::Sampler s(sp);
    const std::vector<float> p = s.probabilities(logits, {});
    double sum = 0;
    for (float x : p) sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_EQ(std::count(p.begin(), p.end(), 0.0f), c.num_zero);
    std::vector<int> counts(p.size(), 0);
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> copy = logits;
      ++counts[static_cast<size_t>(s.sample(copy, {}).token)];
    }
    expect_follows(counts, p);
  }
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestLatestMatch) {
  const NgramDrafter d(1, 3);
  // "1 2 3" recurs at 0: what followed was 4 1 2 3.
  EXPECT_EQ(d.lookup(std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3}, 4),
            (std::vector<int32_t>{4, 1, 2, 3}));
  // The last n = 2 ("7 8") occurs at 0 (then 9) and n = 1 ("8") later at 4 (then 5): the
  // longer match wins.
  EXPECT_EQ(d.lookup(std::vector<int32_t>{7, 8, 9, 0, 8, 5, 7, 8}, 1), (std::vector<int32_t>{9}));
  // A period-2 loop proposes k tokens by copying into its own proposal (LZ77-style).
  EXPECT_EQ(d.lookup(std::vector<int32_t>{5, 6, 5, 6}, 5), (std::vector<int32_t>{5, 6, 5, 6, 5}));
  EXPECT_TRUE(d.lookup(std::vector<int32_t>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(d.lookup(std::vector<int32_t>{1}, 4).empty());
}

TEST(NgramDrafter, RefusesBadBounds) {
  EXPECT_THROW(NgramDrafter(0, 3), ConfigError);
  EXPECT_THROW(NgramDrafter(3, 2), ConfigError);
  EXPECT_THROW(parse_spec_method("medusa"), RequestError);
  EXPECT_EQ(parse_spec_method("ngram"), SpecMethod::kNgram);
}

}  // namespace
}  // namespace lmstack::serve
