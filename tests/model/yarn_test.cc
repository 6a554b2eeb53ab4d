// YaRN RoPE scaling (Peng et al. 2023) against transformers (tools/ref/gen_yarn_golden.py,
// goldens in tests/data/model/yarn/): a dense Qwen2 and DeepSeek-V2/V3 (MLA + MoE) with yarn
// configs written by transformers 5.25 (rope_parameters) and 4.57 (rope_scaling) give
// transformers' float64 logits at every position within 1e-4 of their scale and the same 32
// greedy tokens; the same weights without the scaling do not (so the test sees YaRN), and the
// absorbed and expanded MLA forms agree. The attention factor and softmax scale follow
// transformers' formulas, derived here by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/core/npy.h"
#include "lmstack/model/generate.h"
#include "lmstack/model/gguf_model.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/rope_scaling.h"
#include "logits_util.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

const char* kRegenerate = "regenerate: tools/ref/gen_yarn_golden.py (docstring)";

std::string case_dir(const std::string& name) {
  return test::source_path("tests/data/model/yarn/" + name);
}

class Yarn : public ::testing::TestWithParam<std::string> {};

TEST_P(Yarn, LogitsAndGreedyMatchTransformers) {
  const std::string name = GetParam();
  const std::vector<int32_t> prompt = read_npy(case_dir(name) + "/tokens.npy").i32;
  std::vector<std::string> versions = {"tf5"};
  if (name != "deepseek_v2") versions.push_back("tf457");  // see the generator's docstring
  for (const std::string& version : versions) {
    SCOPED_TRACE(name + "/" + version);
    const ModelDir m = load_model_dir(case_dir(name) + "/" + version);
    ASSERT_EQ(m.config.rope_scaling.type, "yarn");
    const NpyArray want = read_npy(case_dir(name) + "/" + version + ".logits.npy");
    const double tol = 1e-4 * test::max_abs(want.f32);
    EXPECT_TRUE(
        test::all_close(test_logits::logits_of(m.config, m.weights, prompt), want.f32, 0, tol))
        << kRegenerate;

    ModelConfig plain = m.config;
    plain.rope_scaling = RopeScaling{};
    EXPECT_FALSE(
        test::all_close(test_logits::logits_of(plain, m.weights, prompt), want.f32, 0, 100 * tol))
        << "the golden does not depend on YaRN";

    ThreadPool pool(2);
    Generator gen(m.config, m.weights, pool, static_cast<int>(prompt.size()) + 32, 4);
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 32;
    EXPECT_EQ(gen.generate(prompt, greedy, {}, {}).tokens,
              read_npy(case_dir(name) + "/" + version + ".greedy.npy").i32)
        << kRegenerate;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Yarn, ::testing::Values("qwen2", "deepseek_v2", "deepseek_v3"));

double mscale(double s, double m) { return 0.1 * m * std::log(s) + 1; }

TEST(YarnScales, AttentionFactorAndSoftmaxScaleAsTransformersDerivesThem) {
  const ModelDir q = load_model_dir(case_dir("qwen2") + "/tf5");
  // No mscale fields: the factor is mscale(4, 1) on cos and sin, squared on the scores.
  EXPECT_NEAR(rope_magnitude(q.config), mscale(4, 1), 1e-6);
  EXPECT_NEAR(attention_scale(q.config), mscale(4, 1) * mscale(4, 1) / std::sqrt(8.0), 1e-6);

  const ModelDir v2 = load_model_dir(case_dir("deepseek_v2") + "/tf5");
  // mscale == mscale_all_dim: no magnitude; the softmax scale of d_nope + d_R = 12 dims.
  EXPECT_FLOAT_EQ(rope_magnitude(v2.config), 1.0f);
  EXPECT_NEAR(attention_scale(v2.config), mscale(4, 0.707) * mscale(4, 0.707) / std::sqrt(12.0),
              1e-6);

  const ModelDir v3 = load_model_dir(case_dir("deepseek_v3") + "/tf457");
  EXPECT_NEAR(rope_magnitude(v3.config), mscale(4, 1) / mscale(4, 0.5), 1e-6);
  EXPECT_NEAR(attention_scale(v3.config), mscale(4, 0.5) * mscale(4, 0.5) / std::sqrt(12.0), 1e-6);
}

// lmstack convert writes the yarn keys llama.cpp reads; the file loads back to the same config
// scales and transformers' logits. A form llama.cpp would read differently is refused.
TEST(YarnGguf, ConvertLoadsBackWithTheSameLogits) {
  const std::string tokenizer = test::source_path("tests/data/model/gguf_moe/mixtral_bf16.gguf");
  for (const std::string name : {"qwen2", "deepseek_v2"}) {
    SCOPED_TRACE(name);
    const ModelDir m = load_model_dir(case_dir(name) + "/tf5");
    const std::string path = test::temp_dir("yarn_gguf") + "/" + name + ".gguf";
    GgufWriteOptions o;
    o.matrix_dtype = DType::kF32;
    o.num_threads = 2;
    write_gguf_model(path, m.config, m.weights, tokenizer, o);
    const ModelDir back = load_gguf_model(path);
    EXPECT_EQ(back.config.rope_scaling.type, "yarn");
    EXPECT_FLOAT_EQ(rope_magnitude(back.config), rope_magnitude(m.config));
    EXPECT_NEAR(attention_scale(back.config), attention_scale(m.config), 1e-7);
    const std::vector<int32_t> prompt = read_npy(case_dir(name) + "/tokens.npy").i32;
    const NpyArray want = read_npy(case_dir(name) + "/tf5.logits.npy");
    EXPECT_TRUE(test::all_close(test_logits::logits_of(back.config, back.weights, prompt), want.f32,
                                0, 1e-4 * test::max_abs(want.f32)));
  }
  const ModelDir v3 = load_model_dir(case_dir("deepseek_v3") + "/tf5");  // mscale != all_dim
  GgufWriteOptions o;
  EXPECT_THROW(write_gguf_model(test::temp_dir("yarn_gguf") + "/v3.gguf", v3.config, v3.weights,
                                tokenizer, o),
               ConfigError);
}

TEST(YarnConfig, RoundTripsAndRefusesBadFields) {
  const ModelDir v3 = load_model_dir(case_dir("deepseek_v3") + "/tf5");
  const ModelConfig back = ModelConfig::from_json(v3.config.to_json(), "round trip");
  EXPECT_EQ(back.rope_scaling.type, "yarn");
  EXPECT_EQ(back.rope_scaling.original_max_position, 16);
  EXPECT_FLOAT_EQ(back.rope_scaling.mscale_all_dim, 0.5f);
  EXPECT_FLOAT_EQ(rope_magnitude(back), rope_magnitude(v3.config));

  Json j = v3.config.to_json();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", "four"}};
  j.erase("rope_parameters");
  EXPECT_THROW(ModelConfig::from_json(j, "bad.json"), ConfigError);
  j["rope_scaling"] = {{"type", "yarn"}};  // factor is required
  EXPECT_THROW(ModelConfig::from_json(j, "bad.json"), ConfigError);
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"beta_fast", -1}};
  EXPECT_THROW(ModelConfig::from_json(j, "bad.json"), ConfigError);
}

}  // namespace
}  // namespace lmstack::model
