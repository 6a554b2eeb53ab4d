// Prefill/decode disaggregation in the engine (EngineRequest::kv_export / kv_import): a
// request prefilled on one engine, shipped as a KV message and continued on another gives
// the tokens one engine gives alone (greedy and seeded sampling, f32/bf16/int8 KV, different
// block sizes on the two sides), both pools return every block, the message's KV is exactly
// prompt tokens x KvCache::bytes_per_token, and a decode pool too full to take the prompt
// fails that request alone, leaking nothing.
#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/serve/engine.h"
#include "serve/tiny_model.h"

namespace lmstack::serve {
namespace {

struct Result {
  std::vector<int32_t> tokens;
  std::string finish_reason, error;
};

Result collect(RequestStream& stream) {
  Result r;
  while (auto e = stream.next(std::chrono::milliseconds(0))) {
    if (e->kind == StreamEvent::Kind::kToken && e->token.token >= 0)
      r.tokens.push_back(e->token.token);
    else if (e->kind == StreamEvent::Kind::kFinish)
      r.finish_reason = e->finish_reason;
    else if (e->kind == StreamEvent::Kind::kError)
      r.error = e->error;
  }
  return r;
}

std::vector<int32_t> prompt_of(size_t n, int32_t start) {
  std::vector<int32_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>((start + 7 * i) % 96);
  return p;
}

class EngineDisaggTest : public ::testing::Test {
 protected:
  EngineDisaggTest() : model_(test::make_tiny_model()), pool_(1) {}

  std::unique_ptr<Engine> engine(int64_t num_blocks, int block_size, DType dtype) {
    EngineOptions o;
    o.num_blocks = num_blocks;
    o.block_size = block_size;
    o.kv_dtype = dtype;
    o.prefix_cache = false;
    o.scheduler.max_batch_tokens = 32;  // long prompts take several chunks
    return std::make_unique<Engine>(model_->config, model_->weights, pool_, o);
  }
  static Result run(Engine& e, EngineRequest r) {
    std::shared_ptr<RequestStream> s = *e.submit(std::move(r));
    e.run_until_idle();
    return collect(*s);
  }
  // Prefill on `p`, the message through encode/decode, the rest on `d`.
  static Result run_split(Engine& p, Engine& d, const EngineRequest& r, size_t* kv_bytes) {
    EngineRequest pre = r;
    auto h = std::make_shared<KvHandoff>();
    pre.kv_export = h;
    const Result first = run(p, pre);
    EXPECT_EQ(first.error, "");
    EXPECT_EQ(first.finish_reason, "prefilled");
    EXPECT_TRUE(first.tokens.empty());  // the first token travels in the message
    if (kv_bytes) *kv_bytes = h->kv.size();
    EngineRequest dec = r;
    dec.kv_import =
        std::make_shared<const KvHandoff>(decode_kv_message(encode_kv_message(*h), d.kv_layout()));
    return run(d, dec);
  }

  std::unique_ptr<test::TinyModel> model_;
  ThreadPool pool_;
};

TEST_F(EngineDisaggTest, SplitRunEqualsOneEngineAndReturnsEveryBlock) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    auto single = engine(64, 4, dtype), pre = engine(64, 4, dtype), dec = engine(32, 8, dtype);
    for (size_t len : {1, 5, 13, 40})
      for (float temperature : {0.0f, 0.9f}) {
        EngineRequest r;
        r.prompt = prompt_of(len, static_cast<int32_t>(len));
        r.params.temperature = temperature;
        r.params.top_k = temperature > 0 ? 20 : 0;
        r.params.seed = 11 + len;
        r.params.max_tokens = 12;
        size_t kv_bytes = 0;
        const Result want = run(*single, r);
        const Result got = run_split(*pre, *dec, r, &kv_bytes);
        const std::string what = fmt::format("{} KV, {} prompt tokens, temperature {}",
                                             dtype_name(dtype), len, temperature);
        EXPECT_EQ(got.tokens, want.tokens) << what;
        EXPECT_EQ(got.finish_reason, want.finish_reason) << what;
        EXPECT_EQ(got.error, "") << what;
        EXPECT_EQ(kv_bytes, len * model::KvCache::bytes_per_token(model_->config, dtype)) << what;
      }
    EXPECT_EQ(pre->block_manager().num_free(), pre->block_manager().num_blocks());
    EXPECT_EQ(dec->block_manager().num_free(), dec->block_manager().num_blocks());
  }
}

TEST_F(EngineDisaggTest, ImportIntoAFullPoolFailsThatRequestOnly) {
  auto pre = engine(64, 4, DType::kF32), dec = engine(8, 4, DType::kF32);
  EngineRequest busy;  // 20 prompt tokens: 5 of the decode pool's 8 blocks, growing to 7
  busy.prompt = prompt_of(20, 1);
  busy.params.temperature = 0;
  busy.params.max_tokens = 8;
  busy.params.ignore_eos = true;
  std::shared_ptr<RequestStream> busy_stream = *dec->submit(busy);
  dec->step();  // busy now holds its prompt's blocks
  EngineRequest r;
  r.prompt = prompt_of(16, 2);  // 4 blocks: more than the 3 left
  r.params.temperature = 0;
  r.params.max_tokens = 4;
  auto h = std::make_shared<KvHandoff>();
  EngineRequest pre_r = r;
  pre_r.kv_export = h;
  run(*pre, pre_r);
  r.kv_import = h;
  std::shared_ptr<RequestStream> s = *dec->submit(r);
  dec->run_until_idle();
  const Result failed = collect(*s);
  EXPECT_NE(failed.error.find("the KV pool cannot hold the 16-token prompt"), std::string::npos)
      << failed.error;
  EXPECT_EQ(collect(*busy_stream).tokens.size(), 8u);  // the other request is unharmed
  EXPECT_EQ(dec->block_manager().num_free(), 8);
  // With the pool free again the same message imports.
  const Result ok = run(*dec, r);
  EXPECT_EQ(ok.error, "");
  EXPECT_EQ(ok.tokens.size(), 4u);
  EXPECT_EQ(dec->block_manager().num_free(), 8);
}

TEST_F(EngineDisaggTest, RefusesAMismatchedPromptOrSeedAndNAboveOne) {
  auto pre = engine(64, 4, DType::kF32), dec = engine(64, 4, DType::kF32);
  EngineRequest r;
  r.prompt = prompt_of(6, 3);
  r.params.max_tokens = 4;
  r.params.seed = 5;
  auto h = std::make_shared<KvHandoff>();
  EngineRequest pre_r = r;
  pre_r.kv_export = h;
  run(*pre, pre_r);
  EngineRequest other = r;
  other.kv_import = h;
  other.prompt.back() = (other.prompt.back() + 1) % 96;
  EXPECT_THROW(dec->submit(other), RequestError);
  other = r;
  other.kv_import = h;
  other.params.seed = 6;
  EXPECT_THROW(dec->submit(other), RequestError);
  other = r;
  other.kv_export = std::make_shared<KvHandoff>();
  other.n = 2;
  EXPECT_THROW(pre->submit(other), RequestError);
  EXPECT_EQ(dec->block_manager().num_free(), 64);
}

}  // namespace
}  // namespace lmstack::serve
