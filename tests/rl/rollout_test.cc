// Rollouts through the serving engine on the tiny llama: n samples per prompt come back with
// the engine's log-probs, which the trainer's recomputation matches in f32 (the mismatch check
// the run logs), at temperature and with top-p; after a GRPO update the weight sync makes the
// engine's weights the trainer's, bit for bit, and its next rollouts match the new policy.
// About 2 s.
#include "lmstack/rl/rollout.h"

#include <gtest/gtest.h>

#include <cstring>

#include "lmstack/rl/grpo.h"
#include "rl_fixtures.h"

namespace lmstack::rl {
namespace {

std::vector<std::vector<int32_t>> prompts() { return {{5, 9, 13}, {7, 7, 2, 40}, {3}}; }

MismatchStats recompute_gap(RlSession& s, const std::vector<Rollout>& r, float temperature) {
  const PackedBatch b = pack_rollouts(r, 0, r.size());
  std::vector<float> flat;
  model_logprobs(s.policy(), b, temperature, &flat, nullptr);
  return mismatch_stats(r, split_rows(b, flat));
}

model::SamplingParams sampling(float temperature, float top_p) {
  model::SamplingParams p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.max_tokens = 12;
  p.seed = 11;
  return p;
}

TEST(Rollout, EngineLogprobsMatchTheTrainer) {
  ThreadPool pool(2);
  auto s = test_fixtures::make_session(pool);
  for (auto [t, top_p] : {std::pair{1.0f, 1.0f}, {0.7f, 0.9f}}) {
    const std::vector<Rollout> r = generate_rollouts(s->engine(), prompts(), 4, sampling(t, top_p));
    ASSERT_EQ(r.size(), 12u);
    int64_t tokens = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_EQ(r[i].group, static_cast<int>(i / 4));
      EXPECT_EQ(r[i].prompt, prompts()[i / 4]);
      ASSERT_EQ(r[i].response.size(), r[i].engine_logprobs.size());
      EXPECT_FALSE(r[i].response.empty());
      // Ended on EOS (id 0): the EOS is the last token, with its log-prob; else max_tokens.
      if (r[i].finish_reason == "stop")
        EXPECT_EQ(r[i].response.back(), 0);
      else
        EXPECT_EQ(r[i].response.size(), 12u) << r[i].finish_reason;
      tokens += static_cast<int64_t>(r[i].response.size());
    }
    // Four choices of one prompt sample differently (their seeds differ).
    EXPECT_NE(r[0].response, r[1].response);
    const MismatchStats gap = recompute_gap(*s, r, t);
    EXPECT_EQ(gap.num_tokens, tokens);
    EXPECT_LT(gap.max_gap, 1e-4) << "temperature " << t;  // f32 paged vs dense forward
    EXPECT_LE(gap.mean_gap, gap.max_gap);
  }
}

TEST(Rollout, WeightSyncMakesTheEngineServeTheUpdatedPolicy) {
  ThreadPool pool(2);
  auto s = test_fixtures::make_session(pool);
  std::vector<Rollout> r = generate_rollouts(s->engine(), prompts(), 4, sampling(1.0f, 1.0f));
  for (size_t i = 0; i < r.size(); ++i) r[i].reward = static_cast<double>(i % 3);
  GrpoConfig c;
  grpo_update(*s, r, 4, c);
  // Before the sync the engine still serves the old weights: its log-probs now differ from
  // the trainer's by more than rounding.
  const std::vector<Rollout> stale =
      generate_rollouts(s->engine(), prompts(), 4, sampling(1.0f, 1.0f));
  EXPECT_GT(recompute_gap(*s, stale, 1.0f).max_gap, 1e-3);
  const double seconds = s->sync_weights();
  EXPECT_GE(seconds, 0.0);
  const bool tied = s->config().tie_word_embeddings;
  model::ModelWeights engine = s->engine_weights();
  auto got = train::weight_fields(engine, tied);
  auto want = train::weight_fields(s->policy().master(), tied);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::memcmp(got[i].second->raw_data(), want[i].second->raw_data(),
                          static_cast<size_t>(want[i].second->nbytes())),
              0)
        << got[i].first;
  const std::vector<Rollout> fresh =
      generate_rollouts(s->engine(), prompts(), 4, sampling(1.0f, 1.0f));
  EXPECT_LT(recompute_gap(*s, fresh, 1.0f).max_gap, 1e-4);
}

}  // namespace
}  // namespace lmstack::rl
