// Mixture-of-experts and latent-attention models written by transformers 4.57 and 5.x
// (tools/ref/gen_moe_compat.py, goldens in tests/data/model/moe_compat/): Mixtral, Qwen2-MoE,
// Qwen3-MoE, DeepSeek-V2 and DeepSeek-V3 parse to the same config from both versions; lmstack's
// logits at every position equal transformers' float64 logits within 1e-4 of their scale (f32
// and bf16 weights), 32 greedy tokens are identical, and every sparse layer routes every prompt
// token to the experts transformers chose. For MLA the absorbed (decode) and expanded (prefill)
// forms give the same logits, and chunked prefill + decode over scattered KV blocks matches.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "lmstack/core/npy.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/generate.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/presets.h"
#include "logits_util.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

const char* kRegenerate = "regenerate: tools/ref/gen_moe_compat.py (docstring)";

std::string case_dir(const std::string& name) {
  return test::source_path("tests/data/model/moe_compat/" + name);
}

std::vector<int32_t> prompt_of(const std::string& name) {
  return read_npy(case_dir(name) + "/tokens.npy").i32;
}

using test::max_abs;

// Each sparse layer's experts per prompt token (ascending), as the golden stores them.
std::vector<int32_t> router_choices(const ModelDir& m, const std::vector<int32_t>& prompt) {
  ThreadPool pool(2);
  Decoder dec(m.config, m.weights, pool);
  std::vector<int32_t> got;
  dec.set_router_observer([&](int, const MoeRouting& r, int64_t rows) {
    const int k = m.config.moe.top_k;
    for (int64_t t = 0; t < rows; ++t) {
      std::vector<int32_t> row(r.chosen.begin() + t * k, r.chosen.begin() + (t + 1) * k);
      std::sort(row.begin(), row.end());
      got.insert(got.end(), row.begin(), row.end());
    }
  });
  const int bs = 16, nb = (static_cast<int>(prompt.size()) + bs - 1) / bs;
  KvCache cache(m.config, nb, bs);
  std::vector<int32_t> blocks(static_cast<size_t>(nb));
  std::iota(blocks.begin(), blocks.end(), 0);
  ForwardBatch b;
  b.add_sequence(prompt, 0, blocks, bs, true, true);
  std::vector<float> logits;
  dec.forward(b, cache, logits);
  return got;
}

class MoeCompat : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeCompat, BothVersionsParseToTheSameConfig) {
  const ModelConfig v5 = load_model_dir(case_dir(GetParam()) + "/tf5").config;
  const ModelConfig v4 = load_model_dir(case_dir(GetParam()) + "/tf457").config;
  EXPECT_EQ(v5.to_json(), v4.to_json());
  EXPECT_TRUE(v5.moe.enabled());
  EXPECT_EQ(v5.moe.sparse, v4.moe.sparse);
  // The config's parameter count is the tensors' (hf_tensor_specs) count.
  int64_t n = 0;
  for (const HfTensorSpec& s : hf_tensor_specs(v5)) n += s.shape.numel();
  EXPECT_EQ(v5.num_parameters(), n);
  // to_json round-trips.
  EXPECT_EQ(ModelConfig::from_json(v5.to_json(), "round trip").to_json(), v5.to_json());
}

TEST_P(MoeCompat, LogitsGreedyAndRoutingMatchTransformers) {
  const std::string name = GetParam();
  const std::vector<int32_t> prompt = prompt_of(name);
  std::vector<float> first;
  for (const std::string version : {"tf5", "tf457", "tf5_bf16"}) {
    SCOPED_TRACE(name + "/" + version);
    const ModelDir m = load_model_dir(case_dir(name) + "/" + version);
    EXPECT_EQ(m.config.dtype, version == "tf5_bf16" ? DType::kBF16 : DType::kF32);
    const NpyArray want = read_npy(case_dir(name) + "/" + version + ".logits.npy");
    const std::vector<float> got = test_logits::logits_of(m.config, m.weights, prompt);
    ASSERT_EQ(std::ssize(got), want.shape[0] * want.shape[1]);
    EXPECT_TRUE(test::all_close(got, want.f32, 0, 1e-4 * max_abs(want.f32))) << kRegenerate;
    if (version == "tf5") {
      first = got;
    } else if (version == "tf457") {
      EXPECT_EQ(got, first) << "the 4.57 and 5.x directories give different logits";
    }

    EXPECT_EQ(router_choices(m, prompt),
              read_npy(case_dir(name) + "/" + version + ".router.npy").i32)
        << kRegenerate;

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

INSTANTIATE_TEST_SUITE_P(Cases, MoeCompat,
                         ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2",
                                           "deepseek_v3"));

TEST(MoeCompatConfig, RoutingFieldsAsTransformersReadThem) {
  const ModelConfig mix = load_model_dir(case_dir("mixtral") + "/tf5").config;
  EXPECT_EQ(mix.moe.num_experts, 4);
  EXPECT_EQ(mix.moe.top_k, 2);
  EXPECT_TRUE(mix.moe.norm_topk_prob);
  EXPECT_EQ(mix.moe.num_sparse_layers(), 2);
  const ModelConfig q2 = load_model_dir(case_dir("qwen2_moe") + "/tf457").config;
  EXPECT_EQ(q2.moe.sparse, (std::vector<uint8_t>{1, 0, 1}));  // mlp_only_layers [1]
  EXPECT_TRUE(q2.moe.shared_gate);
  EXPECT_EQ(q2.moe.shared_intermediate, 24);
  EXPECT_FALSE(q2.moe.norm_topk_prob);
  EXPECT_TRUE(q2.qkv_bias);
  const ModelConfig q3 =
      load_model_dir(case_dir("qwen3_moe") + "/tf5").config;  // num_local_experts
  EXPECT_EQ(q3.moe.num_experts, 6);
  EXPECT_TRUE(q3.qk_norm);
  const ModelConfig v2 = load_model_dir(case_dir("deepseek_v2") + "/tf5").config;
  EXPECT_EQ(v2.moe.sparse, (std::vector<uint8_t>{0, 1, 1}));  // first_k_dense_replace 1
  EXPECT_EQ(v2.moe.num_groups, 4);
  EXPECT_EQ(v2.moe.score, RouterScore::kSoftmax);
  EXPECT_EQ(v2.mla.q_lora_rank, 0);
  EXPECT_FLOAT_EQ(v2.moe.routed_scale, 1.5f);
  const ModelConfig v3 = load_model_dir(case_dir("deepseek_v3") + "/tf5").config;
  EXPECT_EQ(v3.moe.score, RouterScore::kSigmoid);
  EXPECT_TRUE(v3.moe.score_bias && v3.moe.group_top2_sum);
  EXPECT_EQ(v3.mla.q_lora_rank, 12);
  EXPECT_EQ(v3.moe.shared_intermediate, 2 * 16);
}

// MLA's cache holds [c_KV, k_R] per token and layer: (16 + 4) floats x 3 layers, against
// 2 x 4 heads x (8 + 4) keys/values per layer had the heads been cached.
TEST(MlaCache, BytesPerTokenAreTheLatentAndTheRopeKey) {
  const ModelConfig c = load_model_dir(case_dir("deepseek_v2") + "/tf5").config;
  EXPECT_EQ(KvCache::bytes_per_token(c), 3 * (16 + 4) * 4);
  KvCache cache(c, 5, 4);
  EXPECT_EQ(cache.bytes(), 5 * 4 * KvCache::bytes_per_token(c));
}

std::vector<float> logits_in_mode(const ModelDir& m, const std::vector<int32_t>& tokens,
                                  MlaMode mode, int chunk) {
  ThreadPool pool(2);
  Decoder dec(m.config, m.weights, pool);
  dec.set_mla_mode(mode);
  const int bs = 4, nb = (static_cast<int>(tokens.size()) + bs - 1) / bs;
  KvCache cache(m.config, nb, bs);
  std::vector<int32_t> blocks(static_cast<size_t>(nb));
  std::iota(blocks.rbegin(), blocks.rend(), 0);  // scattered blocks
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

TEST(MlaForms, AbsorbedAndExpandedGiveTheSameLogits) {
  for (const std::string name : {"deepseek_v2", "deepseek_v3"}) {
    const ModelDir m = load_model_dir(case_dir(name) + "/tf5");
    const NpyArray want = read_npy(case_dir(name) + "/tf5.logits.npy");
    const std::vector<int32_t> prompt = prompt_of(name);
    const double tol = 1e-4 * max_abs(want.f32);
    for (int chunk : {48, 7}) {
      SCOPED_TRACE(name + " chunk " + std::to_string(chunk));
      const std::vector<float> absorbed = logits_in_mode(m, prompt, MlaMode::kAbsorbed, chunk);
      const std::vector<float> expanded = logits_in_mode(m, prompt, MlaMode::kExpanded, chunk);
      const std::vector<float> automatic = logits_in_mode(m, prompt, MlaMode::kAuto, chunk);
      EXPECT_TRUE(test::all_close(absorbed, expanded, 0, 1e-5 * max_abs(want.f32)));
      EXPECT_TRUE(test::all_close(absorbed, want.f32, 0, tol)) << kRegenerate;
      EXPECT_TRUE(test::all_close(expanded, want.f32, 0, tol)) << kRegenerate;
      EXPECT_TRUE(test::all_close(automatic, want.f32, 0, tol)) << kRegenerate;
    }
  }
}

TEST(MoeCompatErrors, BadRoutingFieldsAreRefusedByName) {
  Json j = read_json_file(case_dir("mixtral") + "/tf5/config.json");
  j["num_experts_per_tok"] = 5;
  try {
    (void)ModelConfig::from_json(j, "mixtral.json");
    FAIL() << "top-5 of 4 experts was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_experts_per_tok 5 exceeds the 4 experts"),
              std::string::npos)
        << e.what();
  }
  Json d = read_json_file(case_dir("deepseek_v2") + "/tf5/config.json");
  d["topk_method"] = "noaux_tc";
  EXPECT_THROW((void)ModelConfig::from_json(d, "v2.json"), ConfigError);
  Json y = read_json_file(case_dir("deepseek_v3") + "/tf457/config.json");
  y["rope_scaling"] = {{"type", "dynamic"}, {"factor", 40.0}};
  EXPECT_THROW((void)ModelConfig::from_json(y, "v3.json"), ConfigError);
}

// The init-model presets: the real shapes parse and count as their model cards (by hand:
// Qwen1.5-MoE-A2.7B 14,315,784,192 as tests/calc/params_test.cc derives it; DeepSeek-V2-Lite
// 15,706,484,224 as its HF checkpoint); the tiny ones write, load and generate.
TEST(MoePresets, RealShapesCountAndTinyOnesRun) {
  EXPECT_EQ(ModelConfig::from_json(find_model_preset("qwen1.5-moe-a2.7b", "").config, "preset")
                .num_parameters(),
            14315784192);
  const ModelConfig lite =
      ModelConfig::from_json(find_model_preset("deepseek-v2-lite", "").config, "preset");
  EXPECT_EQ(lite.num_parameters(), 15706484224);
  EXPECT_EQ(KvCache::bytes_per_token(lite), 27 * (512 + 64) * 4);  // 576 values per layer
  for (const std::string name : {"tiny-mixtral", "tiny-qwen2-moe", "tiny-qwen3-moe",
                                 "tiny-deepseek-v2", "tiny-deepseek-v3"}) {
    SCOPED_TRACE(name);
    InitModelOptions o;
    o.config = ModelConfig::from_json(find_model_preset(name, "").config, name);
    o.out_dir = test::temp_dir("moe_preset_" + name);
    o.seed = 3;
    init_model(o);
    const ModelDir m = load_model_dir(o.out_dir);
    Json got = m.config.to_json(), want = o.config.to_json();
    for (const char* ids : {"bos_token_id", "eos_token_id"}) {  // set from init-model's tokenizer
      got.erase(ids);
      want.erase(ids);
    }
    EXPECT_EQ(got, want);
    EXPECT_TRUE(m.config.moe.enabled());
    ThreadPool pool(2);
    Generator gen(m.config, m.weights, pool, 32, 4);
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 8;
    greedy.ignore_eos = true;
    const GenerateResult r = gen.generate({5, 9, 200, 17}, greedy, {}, {});
    EXPECT_EQ(r.tokens.size(), 8u);
    // One decode step reads exactly top_k experts per sparse layer.
    const LayerWeights* sparse = nullptr;
    for (const LayerWeights& l : m.weights.layers)
      if (l.moe) sparse = &l;
    ASSERT_NE(sparse, nullptr);
    EXPECT_EQ(r.decode_expert_bytes, 7LL * m.config.moe.num_sparse_layers() * m.config.moe.top_k *
                                         sparse->moe->expert_bytes(0));
  }
}

}  // namespace
}  // namespace lmstack::model
