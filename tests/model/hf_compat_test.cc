// Directories written by transformers 4.57 and 5.x (tools/ref/gen_hf_compat.py, goldens in
// tests/data/model/hf_compat/): the same random model saved by each version (5.x writes
// rope_parameters, 4.57 rope_theta + rope_scaling) parses to the same config and gives
// bit-identical lmstack logits, equal to transformers' own float64 logits at every position,
// and the same greedy tokens. The sliding-window cases (Mistral window 8 on every layer, Qwen2
// window 8 on layer 1 only) run 48 tokens, six windows long, also as chunked prefill + decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lmstack/core/npy.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/generate.h"
#include "lmstack/model/model_dir.h"
#include "logits_util.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

const char* kRegenerate = "regenerate: tools/ref/gen_hf_compat.py (docstring)";

std::string case_dir(const std::string& name) {
  return test::source_path("tests/data/model/hf_compat/" + name);
}

std::vector<int32_t> prompt_of(const std::string& name) {
  return read_npy(case_dir(name) + "/tokens.npy").i32;
}

using test::max_abs;

class HfCompat : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCompat, BothVersionsParseToTheSameConfig) {
  const ModelDir v5 = load_model_dir(case_dir(GetParam()) + "/tf5");
  const ModelDir v4 = load_model_dir(case_dir(GetParam()) + "/tf457");
  EXPECT_EQ(v5.config.to_json(), v4.config.to_json());
  EXPECT_EQ(v5.config.rope_theta, v4.config.rope_theta);
  EXPECT_EQ(v5.config.rope_scaling.type, v4.config.rope_scaling.type);
  EXPECT_EQ(v5.config.head_dim, v4.config.head_dim);
  EXPECT_EQ(v5.config.dtype, DType::kF32);
}

TEST_P(HfCompat, LogitsAndGreedyMatchTransformers) {
  const std::string name = GetParam();
  const std::vector<int32_t> prompt = prompt_of(name);
  std::vector<float> first;
  for (const std::string version : {"tf5", "tf457"}) {
    SCOPED_TRACE(name + "/" + version);
    const ModelDir m = load_model_dir(case_dir(name) + "/" + version);
    const NpyArray want = read_npy(case_dir(name) + "/" + version + ".logits.npy");
    const std::vector<float> got = test_logits::logits_of(m.config, m.weights, prompt);
    ASSERT_EQ(std::ssize(got), want.shape[0] * want.shape[1]);
    EXPECT_TRUE(test::all_close(got, want.f32, 0, 1e-4 * max_abs(want.f32))) << kRegenerate;
    if (first.empty())
      first = got;
    else
      EXPECT_EQ(got, first) << "the 4.57 and 5.x directories give different logits";

    ThreadPool pool(2);
    Generator gen(m.config, m.weights, pool, static_cast<int>(prompt.size()) + 16, 4);
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 16;
    EXPECT_EQ(gen.generate(prompt, greedy, {}, {}).tokens,
              read_npy(case_dir(name) + "/" + version + ".greedy.npy").i32)
        << kRegenerate;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, HfCompat,
                         ::testing::Values("llama_rope_llama3", "mistral_window8", "qwen2_window8",
                                           "qwen3_tied", "gpt2"));

TEST(HfCompatConfig, WindowsAndRopeAsTransformersReadThem) {
  const ModelConfig mistral = load_model_dir(case_dir("mistral_window8") + "/tf5").config;
  EXPECT_EQ(mistral.sliding_window, 8);
  EXPECT_TRUE(mistral.every_layer_windowed());
  const ModelConfig qwen2 = load_model_dir(case_dir("qwen2_window8") + "/tf5").config;
  EXPECT_EQ(qwen2.attention_window(0), 0);  // layers < max_window_layers: full attention
  EXPECT_EQ(qwen2.attention_window(1), 8);
  EXPECT_FALSE(qwen2.every_layer_windowed());
  const ModelConfig llama = load_model_dir(case_dir("llama_rope_llama3") + "/tf5").config;
  EXPECT_EQ(llama.rope_theta, 500000.0f);
  EXPECT_EQ(llama.rope_scaling.type, "llama3");
  EXPECT_EQ(llama.rope_scaling.factor, 4.0f);
  EXPECT_EQ(llama.rope_scaling.original_max_position, 32);
  const ModelConfig qwen3 = load_model_dir(case_dir("qwen3_tied") + "/tf5").config;
  EXPECT_EQ(qwen3.rope_theta, 1e6f);
  EXPECT_EQ(qwen3.head_dim, 16);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
}

// Prefill in chunks of `chunk` tokens over 4-token KV blocks (so the window straddles blocks),
// then one token per step: every position's logits as the one-shot prefill gives them.
std::vector<float> chunked_logits(const ModelDir& m, const std::vector<int32_t>& tokens,
                                  int chunk) {
  ThreadPool pool(2);
  Decoder dec(m.config, m.weights, pool);
  const int bs = 4, nb = (static_cast<int>(tokens.size()) + bs - 1) / bs;
  KvCache cache(m.config, nb, bs);
  std::vector<int32_t> blocks(static_cast<size_t>(nb));
  std::iota(blocks.rbegin(), blocks.rend(), 0);  // scattered: block j of the sequence is nb-1-j
  std::vector<float> all, step;
  for (size_t done = 0; done < tokens.size();) {
    const size_t n =
        std::min<size_t>(done < 30 ? static_cast<size_t>(chunk) : 1, tokens.size() - done);
    ForwardBatch b;
    b.add_sequence({tokens.begin() + static_cast<std::ptrdiff_t>(done),
                    tokens.begin() + static_cast<std::ptrdiff_t>(done + n)},
                   static_cast<int>(done), blocks, bs, true, true);
    dec.forward(b, cache, step);
    all.insert(all.end(), step.begin(), step.end());
    done += n;
  }
  return all;
}

TEST(HfCompatWindow, ChunkedPrefillAndDecodeMatchTransformers) {
  for (const std::string name : {"mistral_window8", "qwen2_window8"}) {
    const ModelDir m = load_model_dir(case_dir(name) + "/tf5");
    const NpyArray want = read_npy(case_dir(name) + "/tf5.logits.npy");
    for (int chunk : {1, 3, 7, 8, 13}) {
      SCOPED_TRACE(name + " chunk " + std::to_string(chunk));
      EXPECT_TRUE(test::all_close(chunked_logits(m, prompt_of(name), chunk), want.f32, 0,
                                  1e-4 * max_abs(want.f32)))
          << kRegenerate;
    }
  }
}

TEST(HfCompatWindow, TheWindowChangesTheLogitsPastIt) {
  // Guards the goldens themselves: without the window the logits past position 8 differ, so
  // the comparisons above do test the window.
  ModelDir m = load_model_dir(case_dir("mistral_window8") + "/tf5");
  const NpyArray want = read_npy(case_dir("mistral_window8") + "/tf5.logits.npy");
  m.config.sliding_window = 0;
  const std::vector<float> full =
      test_logits::logits_of(m.config, m.weights, prompt_of("mistral_window8"));
  const size_t v = static_cast<size_t>(m.config.vocab_size);
  const std::vector<float> head(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(8 * v));
  EXPECT_TRUE(test::all_close(head, {want.f32.begin(), want.f32.begin() + 8 * v}, 0,
                              1e-4 * max_abs(want.f32)));
  EXPECT_FALSE(test::all_close(full, want.f32, 0, 1e-2 * max_abs(want.f32)));
}

}  // namespace
}  // namespace lmstack::model
