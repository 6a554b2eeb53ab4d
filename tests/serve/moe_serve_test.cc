// The engine serves mixture-of-experts and MLA models as it serves dense ones: on the tiny
// Mixtral, Qwen2-MoE, DeepSeek-V2 and DeepSeek-V3 directories of tests/data/model/moe_compat
// (transformers-written), twelve concurrent greedy requests (continuous batching, chunked
// prefill, MoE tokens of many sequences grouped per expert, MLA decode rows absorbed while
// prefill rows are expanded) give each request's single-request Generator output, and the prefix
// cache (MLA: the cached latent rows) changes nothing.
#include <gtest/gtest.h>

#include "lmstack/model/generate.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/serve/engine.h"
#include "serve/tiny_model.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

std::vector<int32_t> drain(RequestStream& stream) {
  std::vector<int32_t> tokens;
  while (auto e = stream.next(std::chrono::milliseconds(0)))
    if (e->kind == StreamEvent::Kind::kToken && e->token.token >= 0)
      tokens.push_back(e->token.token);
  return tokens;
}

std::vector<EngineRequest> requests(int count, int shared_prefix, int vocab) {
  std::vector<EngineRequest> reqs;
  const auto prefix = test::make_prompt(shared_prefix, 99, vocab);
  for (int i = 0; i < count; ++i) {
    EngineRequest r;
    r.prompt = prefix;
    const auto own = test::make_prompt(3 + (i * 7) % 29, static_cast<uint32_t>(i + 1), vocab);
    r.prompt.insert(r.prompt.end(), own.begin(), own.end());
    r.params.temperature = 0;
    r.params.max_tokens = 4 + (i * 5) % 11;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

EngineOptions options(bool prefix_cache) {
  EngineOptions o;
  o.num_blocks = 256;
  o.block_size = 4;
  o.prefix_cache = prefix_cache;
  o.scheduler.max_batch_tokens = 40;  // forces chunked prefill beside decode rows
  o.make_detokenizer = [] { return [](int32_t) { return std::string("x"); }; };
  return o;
}

class MoeServe : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeServe, BatchedGreedyEqualsSingleRequestsWithAndWithoutPrefixCache) {
  const model::ModelDir m = model::load_model_dir(
      lmstack::test::source_path("tests/data/model/moe_compat/" + GetParam() + "/tf5"));
  ThreadPool pool(2);
  const auto reqs = requests(12, 16, m.config.vocab_size);
  std::vector<std::vector<int32_t>> alone;
  for (const EngineRequest& r : reqs) {
    model::Generator gen(m.config, m.weights, pool, 128, 4);
    alone.push_back(gen.generate(r.prompt, r.params, {}, {}).tokens);
  }
  for (bool prefix_cache : {false, true}) {
    SCOPED_TRACE(prefix_cache ? "prefix cache on" : "prefix cache off");
    Engine engine(m.config, m.weights, pool, options(prefix_cache));
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const EngineRequest& r : reqs) streams.push_back(*engine.submit(r));
    engine.run_until_idle();
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(drain(*streams[i]), alone[i]) << "request " << i;
    if (prefix_cache) {
      // One at a time, so each later request finds the shared 16-token prefix cached.
      auto again = *engine.submit(reqs[3]);
      engine.run_until_idle();
      EXPECT_EQ(drain(*again), alone[3]);
      EXPECT_GT(engine.prefix_cache_stats()->num_hit_tokens, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeServe,
                         ::testing::Values("mixtral", "qwen2_moe", "deepseek_v2", "deepseek_v3"));

}  // namespace
}  // namespace lmstack::serve
