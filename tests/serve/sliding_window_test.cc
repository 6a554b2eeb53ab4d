// Sliding-window models through the serving engine: chunked prefill (budgets smaller than the
// prompt, chunks that straddle the window and the 4-token blocks), decode, the prefix cache
// and n > 1 forks give transformers' greedy tokens, with the Mistral model's blocks outside
// the window released as the sequences advance (scheduler_test.cc checks the release itself;
// the last test that the engine turns it on for Mistral only)
// (tools/ref/gen_hf_compat.py: Mistral with window 8 on every layer, Qwen2 with window 8 on layer 1
// only; 48-token prompts).
#include <gtest/gtest.h>

#include "lmstack/core/npy.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/serve/engine.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

std::string case_dir(const std::string& name) {
  return lmstack::test::source_path("tests/data/model/hf_compat/" + name);
}

// Runs `copies` identical greedy requests of 16 tokens (submitted one after the other, so
// later ones find the prompt in the prefix cache) and returns each one's tokens.
std::vector<std::vector<int32_t>> serve_greedy(const model::ModelDir& m,
                                               const std::vector<int32_t>& prompt, int budget,
                                               int copies, int n, bool prefix_cache) {
  ThreadPool pool(2);
  EngineOptions o;
  o.num_blocks = 128;
  o.block_size = 4;
  o.scheduler.max_batch_tokens = budget;
  o.prefix_cache = prefix_cache;
  auto engine = std::make_unique<Engine>(m.config, m.weights, pool, o);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < copies; ++i) {
    EngineRequest r;
    r.prompt = prompt;
    r.params.temperature = 0;
    r.params.max_tokens = 16;
    r.n = n;
    auto stream = *engine->submit(r);
    engine->run_until_idle();
    std::vector<std::vector<int32_t>> choices(static_cast<size_t>(n));
    while (auto e = stream->next(std::chrono::milliseconds(0)))
      if (e->kind == StreamEvent::Kind::kToken && e->token.token >= 0)
        choices[static_cast<size_t>(e->choice)].push_back(e->token.token);
    for (auto& c : choices) out.push_back(std::move(c));
  }
  return out;
}

TEST(SlidingWindowServing, ChunkedPrefillAndPrefixCacheGiveTransformersGreedyTokens) {
  for (const std::string name : {"mistral_window8", "qwen2_window8"}) {
    const model::ModelDir m = model::load_model_dir(case_dir(name) + "/tf5");
    const std::vector<int32_t> prompt = read_npy(case_dir(name) + "/tokens.npy").i32;
    const std::vector<int32_t> want = read_npy(case_dir(name) + "/tf5.greedy.npy").i32;
    for (bool prefix_cache : {true, false})
      for (int budget : {5, 13, 64}) {
        SCOPED_TRACE(name + " budget " + std::to_string(budget) + " cache " +
                     std::to_string(prefix_cache));
        for (const auto& got : serve_greedy(m, prompt, budget, 2, 1, prefix_cache))
          EXPECT_EQ(got, want) << "regenerate: tools/ref/gen_hf_compat.py";
      }
    for (const auto& got : serve_greedy(m, prompt, 7, 1, 2, false)) EXPECT_EQ(got, want) << "n = 2";
  }
}

// The engine hands the window to the scheduler only when every layer is windowed: Mistral's
// running sequence holds a few blocks however long it grows, Qwen2's (layer 0 full) all of them.
TEST(SlidingWindowServing, OnlyAnAllWindowedModelReleasesBlocks) {
  std::vector<int64_t> peak;
  for (const std::string name : {"mistral_window8", "qwen2_window8"}) {
    const model::ModelDir m = model::load_model_dir(case_dir(name) + "/tf5");
    ThreadPool pool(2);
    EngineOptions o;
    o.num_blocks = 128;
    o.block_size = 4;
    o.scheduler.max_batch_tokens = 5;
    o.prefix_cache = false;  // cached prompt blocks are shared, so never released
    Engine engine(m.config, m.weights, pool, o);
    EngineRequest r;
    r.prompt = read_npy(case_dir(name) + "/tokens.npy").i32;
    r.params.temperature = 0;
    r.params.max_tokens = 16;
    auto stream = *engine.submit(r);
    engine.run_until_idle();
    peak.push_back(engine.metrics().gauges().kv_peak_running_blocks);
  }
  EXPECT_LE(peak[0], 3) << "the 8 keys a query reads span at most 3 blocks of 4";
  EXPECT_EQ(peak[1], 16) << "48 prompt + 16 generated tokens, nothing released";
}

}  // namespace
}  // namespace lmstack::serve
