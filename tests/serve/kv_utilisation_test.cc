// KV utilisation as the engine reports it (EngineGauges, /metrics): tokens stored / token
// slots of the KV blocks running sequences hold, each physical block counted once, and the
// same at peak load. Reference: a hand count of blocks and per-block fill for a fixed set of
// requests on a tiny model with 4-token blocks, step by step (derivations in the comments).
#include <gtest/gtest.h>

#include "lmstack/serve/engine.h"
#include "serve/tiny_model.h"

namespace lmstack::serve {
namespace {

using test::make_prompt;

EngineRequest request(std::vector<int32_t> prompt, int max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

struct Expected {
  int64_t blocks, stored;
};

void expect_running_kv(const EngineGauges& g, Expected e, const char* when) {
  EXPECT_EQ(g.kv_running_blocks, e.blocks) << when;
  EXPECT_EQ(g.kv_tokens_stored, e.stored) << when;
  EXPECT_EQ(g.kv_tokens_allocated, e.blocks * 4) << when;
}

TEST(KvUtilisation, MatchesAHandCountStepByStep) {
  const auto model = test::make_tiny_model();
  ThreadPool pool(1);
  EngineOptions o;
  o.num_blocks = 64;
  o.block_size = 4;
  o.prefix_cache = true;
  o.scheduler.max_batch_tokens = 512;  // every prompt below prefills in one step
  Engine engine(model->config, model->weights, pool, o);
  const std::vector<int32_t> prompt_b = make_prompt(9, 2);
  engine.submit(request(make_prompt(5, 1), 3));    // A
  engine.submit(request(prompt_b, 10));            // B
  engine.submit(request(make_prompt(14, 3), 10));  // C

  // Step 1 prefills all: A 5 tokens in 2 blocks, B 9 in 3, C 14 in 4 → 9 blocks, 28 tokens.
  ASSERT_TRUE(engine.step());
  expect_running_kv(engine.metrics().gauges(), {9, 28}, "after the prefill");
  // Step 2 decodes one token each: 6, 10, 15 tokens, still 2 + 3 + 4 blocks.
  ASSERT_TRUE(engine.step());
  expect_running_kv(engine.metrics().gauges(), {9, 31}, "after one decode");
  // Step 3: A computes its 7th token and samples its 3rd (max_tokens): it finishes and its
  // blocks leave the running set (its full block stays in the prefix cache, not counted).
  // B 11 tokens in 3 blocks, C 16 in 4 → 7 blocks, 27 tokens.
  ASSERT_TRUE(engine.step());
  expect_running_kv(engine.metrics().gauges(), {7, 27}, "after A finished");

  // D shares B's first 8 tokens (B's 2 full prompt blocks, cached at its prefill) and adds 3.
  std::vector<int32_t> prompt_d(prompt_b.begin(), prompt_b.begin() + 8);
  for (int32_t t : make_prompt(3, 9)) prompt_d.push_back(t);
  engine.submit(request(prompt_d, 4));
  // Step 4: B 12 tokens in 3 blocks; C 17 in 5; D reuses B's 2 blocks (counted once) and
  // computes 3 tokens into 1 block of its own → 3 + 5 + 1 = 9 blocks, 12 + 17 + 3 = 32
  // tokens. Counting per sequence would give 11 blocks and 40 tokens (40/44, not 32/36).
  ASSERT_TRUE(engine.step());
  const EngineGauges g = engine.metrics().gauges();
  expect_running_kv(g, {9, 32}, "with a shared prefix");
  EXPECT_EQ(engine.prefix_cache_stats()->num_hit_tokens, 8);

  // Peak load: the most running blocks, 9, first reached after step 1 (28 of 36 slots).
  EXPECT_EQ(g.kv_peak_running_blocks, 9);
  EXPECT_EQ(g.kv_peak_tokens_stored, 28);
  EXPECT_EQ(g.kv_peak_tokens_allocated, 36);
  const std::string text = engine.metrics().render_prometheus();
  EXPECT_NE(text.find("\nlmstack:kv_cache_peak_utilization 0.7777"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlmstack:kv_cache_utilization 0.8888"), std::string::npos) << text;
  EXPECT_NE(text.find("\nlmstack:kv_cache_peak_running_blocks 9\n"), std::string::npos) << text;

  engine.run_until_idle();
  expect_running_kv(engine.metrics().gauges(), {0, 0}, "when idle");
}

}  // namespace
}  // namespace lmstack::serve
