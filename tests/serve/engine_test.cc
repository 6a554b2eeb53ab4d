// Engine on a tiny in-memory model (f32, and bf16/int8 KV): batched greedy outputs equal
// single-request Generator runs; prefix cache on/off and forced preemption change nothing;
// cancellation frees every block; n > 1, stop strings, seeds, validation and the bounded queue.
#include "lmstack/serve/engine.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/model/generate.h"
#include "serve/tiny_model.h"

namespace lmstack::serve {
namespace {

using test::make_prompt;

struct Choice {
  std::vector<int32_t> tokens;
  std::string text;
  std::string finish_reason;
};
struct Result {
  std::vector<Choice> choices;
  RequestUsage usage;
  std::string error;
};

// Drains a finished request's events.
Result collect(RequestStream& stream, int n) {
  Result r;
  r.choices.resize(static_cast<size_t>(n));
  while (auto e = stream.next(std::chrono::milliseconds(0))) {
    Choice& c = r.choices[static_cast<size_t>(e->choice)];
    if (e->kind == StreamEvent::Kind::kToken) {
      if (e->token.token >= 0) c.tokens.push_back(e->token.token);
      c.text += e->token.text;
    } else if (e->kind == StreamEvent::Kind::kFinish) {
      c.finish_reason = e->finish_reason;
    } else {
      r.usage = e->usage;
      r.error = e->error;
    }
  }
  return r;
}

model::SamplingParams greedy(int max_tokens) {
  model::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

std::string letter(int32_t id) { return std::string(1, static_cast<char>('a' + id % 26)); }

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() : model_(test::make_tiny_model()), pool_(1) {}

  EngineOptions options(int64_t num_blocks, bool prefix_cache, int budget = 48) {
    EngineOptions o;
    o.num_blocks = num_blocks;
    o.block_size = 4;
    o.prefix_cache = prefix_cache;
    o.scheduler.max_batch_tokens = budget;
    o.make_detokenizer = [] { return [](int32_t id) { return letter(id); }; };
    return o;
  }
  std::vector<int32_t> generate_alone(const std::vector<int32_t>& prompt,
                                      const model::SamplingParams& p) {
    model::Generator gen(model_->config, model_->weights, pool_, 256, 4);
    return gen.generate(prompt, p, {}, {}).tokens;
  }
  // Runs the requests together through an engine, returning each one's result.
  std::vector<Result> run_batch(const EngineOptions& o, const std::vector<EngineRequest>& reqs,
                                Engine** out_engine = nullptr) {
    engine_ = std::make_unique<Engine>(model_->config, model_->weights, pool_, o);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(*engine_->submit(r));
    engine_->run_until_idle();
    std::vector<Result> results;
    for (size_t i = 0; i < reqs.size(); ++i) results.push_back(collect(*streams[i], reqs[i].n));
    if (out_engine) *out_engine = engine_.get();
    return results;
  }
  std::vector<EngineRequest> mixed_requests(int count, int shared_prefix = 0) {
    std::vector<EngineRequest> reqs;
    const auto prefix = make_prompt(shared_prefix, 99);
    for (int i = 0; i < count; ++i) {
      EngineRequest r;
      r.prompt = prefix;
      const auto own = make_prompt(3 + (i * 7) % 41, static_cast<uint32_t>(i + 1));
      r.prompt.insert(r.prompt.end(), own.begin(), own.end());
      r.params = greedy(4 + (i * 5) % 13);
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  std::unique_ptr<test::TinyModel> model_;
  ThreadPool pool_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, SixteenConcurrentGreedyRequestsEqualSingleRuns) {
  const auto reqs = mixed_requests(16);
  const auto results = run_batch(options(256, true), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(results[i].choices[0].tokens, generate_alone(reqs[i].prompt, reqs[i].params))
        << "request " << i;
    EXPECT_EQ(results[i].choices[0].finish_reason, "length");
    EXPECT_EQ(results[i].usage.prompt_tokens, static_cast<int>(reqs[i].prompt.size()));
    EXPECT_EQ(results[i].usage.completion_tokens, reqs[i].params.max_tokens);
  }
  EXPECT_EQ(engine_->block_manager().num_free() + engine_->prefix_cache_stats()->num_cached_blocks,
            256);
}

TEST_F(EngineTest, PrefixCacheOnAndOffGiveTheSameOutputs) {
  const auto reqs = mixed_requests(8, /*shared_prefix=*/30);
  const auto off = run_batch(options(256, false), reqs);
  // Submitted one at a time, so later requests find the shared prefix cached.
  engine_ = std::make_unique<Engine>(model_->config, model_->weights, pool_, options(256, true));
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto stream = *engine_->submit(reqs[i]);
    engine_->run_until_idle();
    const Result on = collect(*stream, 1);
    EXPECT_EQ(on.choices[0].tokens, off[i].choices[0].tokens) << "request " << i;
    if (i > 0) {
      EXPECT_EQ(on.usage.cached_tokens, 28) << "30 shared tokens, blocks of 4";
    }
  }
  EXPECT_GT(engine_->prefix_cache_stats()->num_hit_tokens, 0);
}

// --kv-dtype bf16/int8: the engine stores and reads the same rounded rows as a single
// Generator with that dtype, through prefix-cache hits (whole blocks shared, the rest
// recomputed into rows of its own).
TEST_F(EngineTest, QuantizedKvWithPrefixCacheEqualsSingleRuns) {
  for (DType t : {DType::kBF16, DType::kI8}) {
    const auto reqs = mixed_requests(6, /*shared_prefix=*/30);
    EngineOptions o = options(256, true);
    o.kv_dtype = t;
    engine_ = std::make_unique<Engine>(model_->config, model_->weights, pool_, o);
    EXPECT_EQ(engine_->kv_cache().dtype(), t);
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto stream = *engine_->submit(reqs[i]);
      engine_->run_until_idle();
      const Result on = collect(*stream, 1);
      model::Generator gen(model_->config, model_->weights, pool_, 256, 4, t);
      EXPECT_EQ(on.choices[0].tokens, gen.generate(reqs[i].prompt, reqs[i].params, {}, {}).tokens)
          << dtype_name(t) << " request " << i;
      if (i > 0) {
        EXPECT_EQ(on.usage.cached_tokens, 28) << dtype_name(t);
      }
    }
  }
}

TEST_F(EngineTest, ForcedPreemptionLeavesOutputsIdentical) {
  const auto reqs = mixed_requests(8);
  const auto roomy = run_batch(options(256, false), reqs);
  Engine* tight = nullptr;
  const auto cramped = run_batch(options(16, false), reqs, &tight);  // 64 tokens of KV
  EXPECT_GT(tight->metrics().gauges().num_preemptions, 0);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(cramped[i].choices[0].tokens, roomy[i].choices[0].tokens) << "request " << i;
  EXPECT_EQ(tight->block_manager().num_free(), 16);
}

TEST_F(EngineTest, CancelledRequestFreesAllItsBlocksAtTheNextStep) {
  for (bool prefix_cache : {false, true}) {
    Engine engine(model_->config, model_->weights, pool_, options(64, prefix_cache));
    EngineRequest r;
    r.prompt = make_prompt(30, 5);
    r.params = greedy(100);
    auto stream = *engine.submit(r);
    EngineRequest other = r;
    other.prompt = make_prompt(9, 6);
    other.params = greedy(5);
    auto other_stream = *engine.submit(other);
    for (int i = 0; i < 4; ++i) engine.step();
    EXPECT_LT(engine.block_manager().num_free(), 64);
    stream->cancel();
    engine.run_until_idle();
    const Result cancelled = collect(*stream, 1);
    EXPECT_EQ(cancelled.choices[0].finish_reason, "cancelled");
    EXPECT_EQ(collect(*other_stream, 1).choices[0].tokens.size(), 5u) << "the other one is fine";
    engine.clear_prefix_cache();
    EXPECT_EQ(engine.block_manager().num_free(), 64) << "prefix cache " << prefix_cache;
  }
}

TEST_F(EngineTest, TwoChoicesShareThePromptAndFollowTheirOwnSeeds) {
  EngineRequest r;
  r.prompt = make_prompt(10, 3);  // 2.5 blocks: the last one is shared, then copied
  r.params = greedy(6);
  r.n = 2;
  const auto g = run_batch(options(64, false), {r});
  const auto alone = generate_alone(r.prompt, r.params);
  EXPECT_EQ(g[0].choices[0].tokens, alone);
  EXPECT_EQ(g[0].choices[1].tokens, alone);
  EXPECT_EQ(g[0].usage.completion_tokens, 12);

  r.params.temperature = 1.0f;
  r.params.seed = 42;
  r.params.max_tokens = 12;
  const auto sampled = run_batch(options(64, false), {r});
  EXPECT_NE(sampled[0].choices[0].tokens, sampled[0].choices[1].tokens);
  // Choice 1 samples exactly like a single request seeded with seed + 1.
  model::SamplingParams p1 = r.params;
  p1.seed = 43;
  EXPECT_EQ(sampled[0].choices[1].tokens, generate_alone(r.prompt, p1));
  EXPECT_EQ(engine_->block_manager().num_free(), 64);
}

TEST_F(EngineTest, SeededSamplingIsTheSameAloneAndInABatch) {
  auto reqs = mixed_requests(6);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].params.temperature = 0.8f;
    reqs[i].params.top_k = 20;
    reqs[i].params.seed = 1000 + i;
  }
  reqs[1].params.top_k = 0;  // the unfiltered and the top-p paths of the sampler too
  reqs[2].params.top_k = 0;
  reqs[2].params.top_p = 0.7f;
  const auto batch = run_batch(options(256, true), reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(batch[i].choices[0].tokens, generate_alone(reqs[i].prompt, reqs[i].params));
  // Two threads sample the rows of a step in parallel (Engine::sample_rows): same tokens.
  ThreadPool two(2);
  Engine parallel(model_->config, model_->weights, two, options(256, true));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(*parallel.submit(r));
  parallel.run_until_idle();
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(collect(*streams[i], 1).choices[0].tokens, batch[i].choices[0].tokens);
}

TEST_F(EngineTest, StopStringSpanningTokensEndsTheChoice) {
  EngineRequest r;
  r.prompt = make_prompt(12, 8);
  r.params = greedy(12);
  const auto full = run_batch(options(64, true), {r})[0].choices[0];
  ASSERT_EQ(full.text.size(), 12u);
  r.params.stop = {full.text.substr(4, 2)};  // the letters of generated tokens 4 and 5
  const auto stopped = run_batch(options(64, true), {r})[0].choices[0];
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(r.params.stop[0])));
}

TEST_F(EngineTest, EosEndsWithStopUnlessIgnored) {
  EngineRequest r;
  r.prompt = make_prompt(7, 2);
  r.params = greedy(8);
  const auto full = run_batch(options(64, false), {r})[0].choices[0];
  EngineOptions o = options(64, false);
  o.eos_ids = {full.tokens[2]};
  const auto ended = run_batch(o, {r})[0].choices[0];
  EXPECT_EQ(ended.finish_reason, "stop");
  EXPECT_EQ(ended.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + 2));
  r.params.ignore_eos = true;
  EXPECT_EQ(run_batch(o, {r})[0].choices[0].tokens, full.tokens);
}

TEST_F(EngineTest, RejectsInvalidRequestsNamingTheField) {
  Engine engine(model_->config, model_->weights, pool_, options(8, false));
  auto expect_error = [&](EngineRequest r, const std::string& field) {
    try {
      engine.submit(std::move(r));
      ADD_FAILURE() << "accepted a request with a bad " << field;
    } catch (const RequestError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  EngineRequest ok;
  ok.prompt = {1, 2, 3};
  ok.params = greedy(4);
  EngineRequest r = ok;
  r.prompt.clear();
  expect_error(r, "prompt");
  r = ok;
  r.prompt[1] = 96;
  expect_error(r, "prompt");
  r = ok;
  r.params.max_tokens = 30;  // 33 tokens > 8 blocks of 4
  expect_error(r, "max_tokens");
  r = ok;
  r.n = 0;
  expect_error(r, "n:");
  r = ok;
  r.params.top_p = 2;
  expect_error(r, "top_p");
}

TEST_F(EngineTest, AFullQueueRefusesAndTheRestIsServed) {
  EngineOptions o = options(64, false);
  o.max_waiting = 2;
  Engine engine(model_->config, model_->weights, pool_, o);
  EngineRequest r;
  r.prompt = {1, 2, 3};
  r.params = greedy(3);
  auto a = engine.submit(r);
  auto b = engine.submit(r);
  EXPECT_FALSE(engine.submit(r).has_value());
  ASSERT_TRUE(a && b);
  engine.run_until_idle();
  EXPECT_EQ(collect(**a, 1).choices[0].tokens.size(), 3u);
  EXPECT_EQ(collect(**b, 1).choices[0].tokens.size(), 3u);
  EXPECT_TRUE(engine.submit(r).has_value()) << "room again once the queue drained";
  EXPECT_NE(engine.metrics().render_prometheus().find("lmstack:request_rejected_total 1"),
            std::string::npos);
}

// The step-phase counters count exactly the steps that ran a batch, and their phases add
// up to no more than the wall time the steps took.
TEST_F(EngineTest, StepPhaseCountersCoverEveryWorkingStep) {
  Engine engine(model_->config, model_->weights, pool_, options(64, false));
  EngineRequest r;
  r.prompt = make_prompt(20, 1);
  r.params = greedy(5);
  ASSERT_TRUE(engine.submit(r).has_value());
  int working = 0;
  const auto start = std::chrono::steady_clock::now();
  while (engine.step()) ++working;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(working, 5);  // the prompt (one or more chunks), then one step per further token
  const std::string text = "\n" + engine.metrics().render_prometheus();
  const auto value = [&](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name;
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
  };
  EXPECT_EQ(value("lmstack:engine_steps_total"), working);
  const double forward = value("lmstack:engine_forward_seconds_total");
  const double sample = value("lmstack:engine_sample_seconds_total");
  const double schedule = value("lmstack:engine_schedule_seconds_total");
  EXPECT_GT(forward, 0);
  EXPECT_GT(sample, 0);
  EXPECT_GE(schedule, 0);
  EXPECT_LE(forward + sample + schedule, wall * 1.0001);
}

TEST_F(EngineTest, LoopThreadServesConcurrentSubmitters) {
  Engine engine(model_->config, model_->weights, pool_, options(128, true));
  engine.start();
  std::vector<std::thread> clients;
  std::vector<Result> results(8);
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] {
      EngineRequest r;
      r.prompt = make_prompt(5 + i, static_cast<uint32_t>(i));
      r.params = greedy(5);
      auto stream = *engine.submit(r);
      auto& c = results[static_cast<size_t>(i)];
      c.choices.resize(1);
      for (int k = 0; k < 1000; ++k) {  // bounded: 1000 × 50 ms
        auto e = stream->next(std::chrono::milliseconds(50));
        if (!e) continue;
        if (e->kind == StreamEvent::Kind::kToken) c.choices[0].tokens.push_back(e->token.token);
        if (e->kind == StreamEvent::Kind::kDone || e->kind == StreamEvent::Kind::kError) break;
      }
    });
  for (auto& t : clients) t.join();
  engine.stop();
  for (int i = 0; i < 8; ++i) {
    EngineRequest r;
    r.prompt = make_prompt(5 + i, static_cast<uint32_t>(i));
    EXPECT_EQ(results[static_cast<size_t>(i)].choices[0].tokens,
              generate_alone(r.prompt, greedy(5)));
  }
  EXPECT_NE(engine.explain_prefix(make_prompt(9, 4)).explanation, "");
}

}  // namespace
}  // namespace lmstack::serve
