// Speculative decoding in the engine on tiny in-memory models: at temperature 0 the n-gram
// and draft-model engines emit exactly the plain engine's tokens, text and finish reasons for
// concurrent requests (prefill chunks beside verification, stop strings, EOS and max_tokens
// landing inside an accepted run, forced preemption), every KV block (the target's and the
// draft's) is free afterwards, a sampled request is reproducible alone and in a batch, and a
// draft model of another vocabulary is refused naming both sizes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "lmstack/core/error.h"
#include "lmstack/serve/engine.h"
#include "serve/tiny_model.h"

namespace lmstack::serve {
namespace {

using test::make_prompt;

struct Output {
  std::vector<int32_t> tokens;
  std::string text, finish_reason;
  bool operator==(const Output&) const = default;
};

Output collect(RequestStream& stream) {
  Output o;
  while (auto e = stream.next(std::chrono::milliseconds(0))) {
    if (e->kind == StreamEvent::Kind::kToken) {
      if (e->token.token >= 0) o.tokens.push_back(e->token.token);
      o.text += e->token.text;
    } else if (e->kind == StreamEvent::Kind::kFinish) {
      o.finish_reason = e->finish_reason;
    }
  }
  return o;
}

std::string letter(int32_t id) { return std::string(1, static_cast<char>('a' + id % 26)); }

class SpecEngineTest : public ::testing::Test {
 protected:
  SpecEngineTest()
      : target_(test::make_tiny_model(1)), other_(test::make_tiny_model(2)), pool_(1) {}

  EngineOptions options(SpecMethod method, const test::TinyModel* draft = nullptr,
                        int64_t num_blocks = 256, int budget = 48) {
    EngineOptions o;
    o.num_blocks = num_blocks;
    o.block_size = 4;
    o.scheduler.max_batch_tokens = budget;
    o.make_detokenizer = [] { return [](int32_t id) { return letter(id); }; };
    o.spec.method = method;
    o.spec.num_tokens = 4;
    o.spec.ngram_max = 3;
    if (draft) {
      o.spec.draft_config = &draft->config;
      o.spec.draft_weights = &draft->weights;
    }
    return o;
  }

  std::vector<Output> run(const EngineOptions& o, const std::vector<EngineRequest>& reqs) {
    engine_ = std::make_unique<Engine>(target_->config, target_->weights, pool_, o);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& r : reqs) streams.push_back(*engine_->submit(r));
    engine_->run_until_idle();
    std::vector<Output> out;
    for (auto& s : streams) out.push_back(collect(*s));
    return out;
  }

  // Prompts of different lengths, half of them a short pattern repeated (n-gram lookup finds
  // matches there), with different max_tokens.
  static std::vector<EngineRequest> requests(int count) {
    std::vector<EngineRequest> reqs;
    for (int i = 0; i < count; ++i) {
      EngineRequest r;
      r.prompt = make_prompt(3 + (i * 7) % 29, static_cast<uint32_t>(i + 1));
      if (i % 2 == 1) {
        const auto unit = r.prompt;
        for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), unit.begin(), unit.end());
      }
      r.params.temperature = 0;
      r.params.max_tokens = 5 + (i * 5) % 23;
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  void expect_equal(const std::vector<Output>& got, const std::vector<Output>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
      EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
      EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "request " << i;
    }
  }

  // Every target block is free or held by the prefix cache alone, the draft pool is empty.
  void expect_no_block_leak(int64_t num_blocks) {
    EXPECT_EQ(engine_->block_manager().num_free() +
                  engine_->prefix_cache_stats().value_or(PrefixCacheStats{}).num_cached_blocks,
              num_blocks);
    engine_->clear_prefix_cache();
    EXPECT_EQ(engine_->block_manager().num_free(), num_blocks);
    if (engine_->drafter()) {
      EXPECT_EQ(engine_->drafter()->num_blocks_held(), 0);
    }
  }

  std::unique_ptr<test::TinyModel> target_, other_;
  ThreadPool pool_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(SpecEngineTest, GreedyNgramEqualsThePlainEngine) {
  const auto reqs = requests(12);
  const auto plain = run(options(SpecMethod::kNone), reqs);
  const auto spec = run(options(SpecMethod::kNgram), reqs);
  expect_equal(spec, plain);
  const SpecDecodeStats st = engine_->metrics().spec_decode();
  EXPECT_GT(st.num_drafts, 0);
  EXPECT_GT(st.num_accepted_tokens, 0);  // multi-token steps were exercised
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens);
  expect_no_block_leak(256);
}

TEST_F(SpecEngineTest, GreedyDraftModelEqualsThePlainEngine) {
  const auto reqs = requests(12);
  const auto plain = run(options(SpecMethod::kNone), reqs);
  // The target drafting for itself: every draft is accepted, steps emit k + 1 tokens.
  expect_equal(run(options(SpecMethod::kDraft, target_.get()), reqs), plain);
  const SpecDecodeStats self = engine_->metrics().spec_decode();
  EXPECT_EQ(self.num_accepted_tokens, self.num_draft_tokens);
  expect_no_block_leak(256);
  // Another random model: most drafts are rejected and the draft KV rolls back.
  expect_equal(run(options(SpecMethod::kDraft, other_.get()), reqs), plain);
  const SpecDecodeStats other = engine_->metrics().spec_decode();
  EXPECT_LT(other.acceptance_rate(), 0.5);
  expect_no_block_leak(256);
}

// A budget of 10 tokens puts prefill chunks and drafts (cut to the budget) in the same steps.
TEST_F(SpecEngineTest, SmallBudgetMixesPrefillChunksAndVerification) {
  const auto reqs = requests(8);
  const auto plain = run(options(SpecMethod::kNone, nullptr, 256, 10), reqs);
  expect_equal(run(options(SpecMethod::kDraft, target_.get(), 256, 10), reqs), plain);
  expect_no_block_leak(256);
  expect_equal(run(options(SpecMethod::kNgram, nullptr, 256, 10), reqs), plain);
  expect_no_block_leak(256);
}

TEST_F(SpecEngineTest, StopStringEosAndMaxTokensInsideAnAcceptedRun) {
  EngineRequest r;
  r.prompt = make_prompt(12, 8);
  r.params.temperature = 0;
  r.params.max_tokens = 14;
  const Output full = run(options(SpecMethod::kNone), {r})[0];
  ASSERT_EQ(full.tokens.size(), 14u);
  std::vector<EngineRequest> reqs;
  for (int m = 1; m <= 7; ++m) {  // max_tokens at every offset of a k + 1 = 5 token step
    reqs.push_back(r);
    reqs.back().params.max_tokens = m;
  }
  reqs.push_back(r);
  reqs.back().params.stop = {full.text.substr(6, 2)};  // generated tokens 6 and 7
  const auto plain = run(options(SpecMethod::kNone), reqs);
  EXPECT_EQ(plain.back().finish_reason, "stop");
  const auto spec = run(options(SpecMethod::kDraft, target_.get()), reqs);
  expect_equal(spec, plain);
  EXPECT_GT(engine_->metrics().spec_decode().num_accepted_tokens, 0);
  // EOS = generated token 3, reached inside a run of accepted drafts.
  EngineOptions plain_eos = options(SpecMethod::kNone),
                spec_eos = options(SpecMethod::kDraft, target_.get());
  plain_eos.eos_ids = spec_eos.eos_ids = {full.tokens[3]};
  const auto eos_plain = run(plain_eos, {r});
  EXPECT_EQ(eos_plain[0].finish_reason, "stop");
  expect_equal(run(spec_eos, {r}), eos_plain);
  expect_no_block_leak(256);
}

TEST_F(SpecEngineTest, ForcedPreemptionWithSpeculationLeavesOutputsIdentical) {
  const auto reqs = requests(8);
  const auto plain = run(options(SpecMethod::kNone), reqs);
  for (const test::TinyModel* draft : {static_cast<const test::TinyModel*>(nullptr),
                                       static_cast<const test::TinyModel*>(target_.get())}) {
    const auto cramped =
        run(options(draft ? SpecMethod::kDraft : SpecMethod::kNgram, draft, 32), reqs);
    EXPECT_GT(engine_->metrics().gauges().num_preemptions, 0);
    expect_equal(cramped, plain);
    expect_no_block_leak(32);
  }
}

// The speculative RNG is per sequence, so a seeded sampled request is reproducible whatever
// else is in the batch.
TEST_F(SpecEngineTest, SampledRequestIsTheSameAloneAndInABatch) {
  auto reqs = requests(6);
  for (auto& r : reqs) {
    r.params.temperature = 0.8f;
    r.params.top_p = 0.95f;
    r.params.seed = 123;
  }
  for (SpecMethod m : {SpecMethod::kNgram, SpecMethod::kDraft}) {
    const auto batch = run(options(m, other_.get()), reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(run(options(m, other_.get()), {reqs[i]})[0], batch[i]) << "request " << i;
    expect_no_block_leak(256);
  }
}

// Sampled output keeps the target's distribution through the whole engine: the joint law of
// the first three tokens (the 2nd and 3rd come out of verification) under temperature 1.5,
// top-k 2 (8 outcomes), over 3000 seeds each, with and without speculation. Two-sample chi-square,
// sum (a - b)^2 / (a + b) ~ chi2(7) under equal laws; the bound 40 has p < 1e-5. The same
// bound separates temperature 1.5 from 0.7, so the test can fail.
std::map<std::vector<int32_t>, int> outcome_counts(const std::vector<Output>& outs) {
  std::map<std::vector<int32_t>, int> counts;
  for (const Output& o : outs) ++counts[o.tokens];
  return counts;
}

double two_sample_chi2(const std::vector<Output>& a, const std::vector<Output>& b) {
  auto ca = outcome_counts(a), cb = outcome_counts(b);
  for (const auto& [k, v] : ca) cb[k] += 0;
  double x = 0;
  for (const auto& [k, nb] : cb) {
    const double na = ca[k];
    x += (na - nb) * (na - nb) / (na + nb);
  }
  return x;
}

TEST_F(SpecEngineTest, SampledOutputKeepsTheTargetDistribution) {
  // The prompt holds its own greedy continuation twice, so n-gram lookup finds drafts the
  // target often agrees with.
  EngineRequest seed_req;
  seed_req.prompt = make_prompt(4, 17);
  seed_req.params.temperature = 0;
  seed_req.params.max_tokens = 8;
  const auto greedy = run(options(SpecMethod::kNone), {seed_req})[0].tokens;
  std::vector<int32_t> prompt = seed_req.prompt;
  for (int rep = 0; rep < 2; ++rep) prompt.insert(prompt.end(), greedy.begin(), greedy.end());
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3000; ++i) {
    EngineRequest r;
    r.prompt = prompt;
    r.params.temperature = 1.5f;
    r.params.top_k = 2;
    r.params.max_tokens = 3;
    r.params.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  // Each run gets its own seeds: the first token comes from the same sampler with or without
  // speculation, and shared seeds would make the two samples dependent.
  uint64_t next_seed = 0;
  const auto with = [&](SpecMethod m, const test::TinyModel* draft) {
    EngineOptions o = options(m, draft, 2048, 512);
    o.max_waiting = 4096;
    for (auto& r : reqs) r.params.seed = next_seed++;
    return run(o, reqs);
  };
  const auto plain = with(SpecMethod::kNone, nullptr);
  EXPECT_EQ(outcome_counts(plain).size(), 8u);
  const auto ngram = with(SpecMethod::kNgram, nullptr);
  const SpecDecodeStats ng = engine_->metrics().spec_decode();
  std::printf("n-gram: %lld of %lld accepted\n", static_cast<long long>(ng.num_accepted_tokens),
              static_cast<long long>(ng.num_draft_tokens));
  EXPECT_GT(ng.num_accepted_tokens, 1000);
  const double chi2_ngram = two_sample_chi2(ngram, plain);
  EXPECT_LT(chi2_ngram, 40);
  // A draft close to the target (its lm_head perturbed by 30%), so that q overlaps p without
  // equalling it: acceptance is partial and the residual max(0, p - q) is drawn from.
  const auto near = test::make_tiny_model(1);
  std::mt19937 rng(9);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  float* head = near->weights.lm_head.data<float>();
  for (int64_t i = 0; i < near->weights.lm_head.numel(); ++i) head[i] += noise(rng);
  const auto draft = with(SpecMethod::kDraft, near.get());
  const SpecDecodeStats st = engine_->metrics().spec_decode();
  std::printf("draft: %lld of %lld accepted\n", static_cast<long long>(st.num_accepted_tokens),
              static_cast<long long>(st.num_draft_tokens));
  EXPECT_GT(st.num_accepted_tokens, 500);
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens);
  const double chi2_draft = two_sample_chi2(draft, plain);
  EXPECT_LT(chi2_draft, 40);
  std::printf("two-sample chi2 (7 dof): n-gram %.1f, draft %.1f\n", chi2_ngram, chi2_draft);
  for (auto& r : reqs) r.params.temperature = 0.7f;
  EXPECT_GT(two_sample_chi2(with(SpecMethod::kNone, nullptr), plain), 40);
}

// After a rejection the draft model's KV holds drafts the target replaced: rolled back to
// the common prefix, it proposes exactly what a fresh drafter proposes for the new tokens.
TEST_F(SpecEngineTest, DraftModelRollsItsKvBackToTheAcceptedPrefix) {
  model::SamplingParams greedy;
  greedy.temperature = 0;
  DraftModelDrafter used(target_->config, target_->weights, pool_, 96, 64, 4);
  Sequence seq(0, make_prompt(9, 4), greedy);
  const DraftSlot slot{&seq, 4};
  used.propose({&slot, 1});  // feeds the prompt and drafts 1-3
  ASSERT_EQ(seq.draft.size(), 4u);
  const std::vector<int32_t> first = seq.draft;
  seq.tokens.push_back(first[0]);             // accepted
  seq.tokens.push_back((first[1] + 1) % 96);  // the target's replacement for draft 2
  used.propose({&slot, 1});
  DraftModelDrafter fresh(target_->config, target_->weights, pool_, 96, 64, 4);
  Sequence same(1, seq.tokens, greedy);
  const DraftSlot fresh_slot{&same, 4};
  fresh.propose({&fresh_slot, 1});
  EXPECT_EQ(seq.draft, same.draft);
  EXPECT_GT(used.num_blocks_held(), 0);
  used.release(0);
  EXPECT_EQ(used.num_blocks_held(), 0);
}

TEST_F(SpecEngineTest, MetricsExposeTheSpeculationCounters) {
  run(options(SpecMethod::kDraft, target_.get()), requests(4));
  const SpecDecodeStats st = engine_->metrics().spec_decode();
  const std::string text = engine_->metrics().render_prometheus();
  EXPECT_NE(text.find(fmt::format("lmstack:spec_decode_num_drafts_total {}\n", st.num_drafts)),
            std::string::npos);
  EXPECT_NE(text.find(fmt::format("lmstack:spec_decode_num_draft_tokens_total {}\n",
                                  st.num_draft_tokens)),
            std::string::npos);
  EXPECT_NE(text.find(fmt::format("lmstack:spec_decode_num_accepted_tokens_total {}\n",
                                  st.num_accepted_tokens)),
            std::string::npos);
  EXPECT_NE(text.find("lmstack:spec_decode_acceptance_rate 1\n"), std::string::npos) << text;
  // The draft model's forwards are their own share of the step time.
  const std::string draft_s = "\nlmstack:engine_draft_seconds_total ";
  const size_t at = text.find(draft_s);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::atof(text.c_str() + at + draft_s.size()), 0.0);
}

TEST_F(SpecEngineTest, DraftModelOfAnotherVocabularyIsRefused) {
  const auto small = test::make_tiny_model(3, 64);
  try {
    Engine e(target_->config, target_->weights, pool_, options(SpecMethod::kDraft, small.get()));
    FAIL() << "a 64-token draft for a 96-token target was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--draft-model"), std::string::npos) << what;
    EXPECT_NE(what.find("64"), std::string::npos) << what;
    EXPECT_NE(what.find("96"), std::string::npos) << what;
  }
  EXPECT_THROW(Engine(target_->config, target_->weights, pool_, options(SpecMethod::kDraft)),
               ConfigError);  // draft without a model
}

}  // namespace
}  // namespace lmstack::serve
