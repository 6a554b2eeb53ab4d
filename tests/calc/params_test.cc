// Parameter counts of the presets against the counts Hugging Face reports for the checkpoints
// (the "Model size" / safetensors total on each model page, or the paper where stated), and
// parts against hand arithmetic. Also config.json parsing and its errors.
#include "lmstack/calc/params.h"

#include <gtest/gtest.h>

#include "lmstack/calc/model_shape.h"

namespace lmstack::calc {
namespace {

struct CountCase {
  const char* preset;
  int64_t total;
  const char* source;
};

TEST(Params, PresetTotalsMatchHuggingFace) {
  const CountCase cases[] = {
      {"gpt2", 124439808, "HF openai-community/gpt2 (issue 5: 124,439,808)"},
      {"gpt2-350m", 354823168, "HF openai-community/gpt2-medium"},
      {"gpt2-774m", 774030080, "HF openai-community/gpt2-large"},
      {"gpt2-1.5b", 1557611200, "HF openai-community/gpt2-xl"},
      {"llama-3-8b", 8030261248, "HF meta-llama/Meta-Llama-3-8B (issue 5: 8,030,261,248)"},
      {"llama-2-7b", 6738415616, "HF meta-llama/Llama-2-7b-hf"},
      {"llama-3-70b", 70553706496, "HF meta-llama/Meta-Llama-3-70B"},
      {"mistral-7b", 7241732096, "HF mistralai/Mistral-7B-v0.1"},
      {"mixtral-8x7b", 46702792704, "HF mistralai/Mixtral-8x7B-v0.1"},
      {"qwen2.5-7b", 7615616512, "HF Qwen/Qwen2.5-7B"},
      {"smollm-135m", 134515008, "HF HuggingFaceTB/SmolLM-135M"},
      {"tinyllama-1.1b", 1100048384, "HF TinyLlama/TinyLlama-1.1B"},
  };
  for (const CountCase& c : cases)
    EXPECT_EQ(count_parameters(model_preset(c.preset)).total(), c.total)
        << c.preset << " (source: " << c.source << ")";
}

TEST(Params, MoeAndMlaTotalsMatchPublished) {
  // DeepSeek-V3 tech report: 671B total, 37B activated per token (the HF checkpoint's 685B adds
  // the 14B multi-token-prediction module, which calc does not count).
  const ParamCount v3 = count_parameters(model_preset("deepseek-v3"));
  EXPECT_EQ(v3.total(), 671026419200);
  EXPECT_NEAR(static_cast<double>(v3.active()) / 1e9, 37, 1);
  // DeepSeek-V2-Lite model card: 15.7B total, 2.4B activated (without the embedding table).
  const ParamCount lite = count_parameters(model_preset("deepseek-v2-lite"));
  EXPECT_EQ(lite.total(), 15706484224);
  EXPECT_NEAR(static_cast<double>(lite.active() - lite.get("embedding")) / 1e9, 2.4, 0.06);
  // Mixtral model card: 46.7B total, 12.9B active (top-2 of 8 experts).
  EXPECT_NEAR(static_cast<double>(count_parameters(model_preset("mixtral-8x7b")).active()) / 1e9,
              12.9, 0.05);
  // Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated. By hand from the HF shapes: per
  // layer norms 2h, q/k/v/o 4h² + q/k/v biases 3h, router 60h, experts 60·3·h·1408, shared
  // expert 3·h·5632 + its gate h; plus embedding and lm_head V·h each and the final norm h.
  const ParamCount qwen = count_parameters(model_preset("qwen1.5-moe-a2.7b"));
  EXPECT_EQ(qwen.total(), 14315784192);
  EXPECT_NEAR(static_cast<double>(qwen.active()) / 1e9, 2.7, 0.02);
  // Llama 3.1 405B: HF reports 405,853,388,800.
  EXPECT_EQ(count_parameters(model_preset("llama-3.1-405b")).total(), 405853388800);
}

TEST(Params, PartsByHand) {
  // GPT-2 124M, by hand from the HF GPT2Model shapes: wte 50257*768, wpe 1024*768, per layer
  // c_attn 768*2304+2304, c_proj 768*768+768, c_fc 768*3072+3072, mlp c_proj 3072*768+768,
  // ln_1/ln_2 2*768 each; ln_f 2*768.
  const ParamCount g = count_parameters(model_preset("gpt2"));
  EXPECT_EQ(g.get("embedding"), 50257 * 768);
  EXPECT_EQ(g.get("position"), 1024 * 768);
  EXPECT_EQ(g.get("attn_q") + g.get("attn_k") + g.get("attn_v"), 12 * (768 * 2304 + 2304));
  EXPECT_EQ(g.get("attn_o"), 12 * (768 * 768 + 768));
  EXPECT_EQ(g.get("mlp"), 12 * (768 * 3072 + 3072 + 3072 * 768 + 768));
  EXPECT_EQ(g.get("norms"), (2 * 12 + 1) * 2 * 768);
  EXPECT_EQ(g.get("lm_head"), 0);  // tied
  // N for 2N FLOPs counts the tied matrix once, as the output projection.
  EXPECT_EQ(g.matmul_active(), 12 * (768 * 2304 + 768 * 768 + 2 * 768 * 3072) + 50257 * 768);
}

Json llama_config() {
  return parse_json(R"({"model_type":"llama","vocab_size":128256,"hidden_size":4096,
    "num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,
    "intermediate_size":14336,"max_position_embeddings":8192,"tie_word_embeddings":false})",
                    "config.json");
}

TEST(ModelShape, HfConfigMatchesPreset) {
  const ModelShape m = ModelShape::from_hf_config(llama_config(), "config.json");
  EXPECT_EQ(count_parameters(m).total(), 8030261248);
  EXPECT_EQ(m.head_dim, 128);
  const Json gpt2 = parse_json(
      R"({"model_type":"gpt2","vocab_size":50257,"n_embd":768,"n_layer":12,"n_head":12,
          "n_positions":1024})",
      "gpt2.json");
  EXPECT_EQ(count_parameters(ModelShape::from_hf_config(gpt2, "gpt2.json")).total(), 124439808);
}

void expect_config_error(const Json& j, const std::string& needle) {
  try {
    ModelShape::from_hf_config(j, "config.json");
    ADD_FAILURE() << "no error; expected one naming " << needle;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ModelShape, BadConfigsNameTheField) {
  Json j = llama_config();
  j.erase("hidden_size");
  expect_config_error(j, "hidden_size");
  j = llama_config();
  j["num_key_value_heads"] = 5;
  expect_config_error(j, "does not divide");
  j = llama_config();
  j["model_type"] = "bert";
  expect_config_error(j, "deepseek_v3");  // lists the known model types
  j = llama_config();
  j["intermediate_size"] = "big";
  expect_config_error(j, "intermediate_size");
  j = llama_config();
  j["vocab_size"] = 0;
  expect_config_error(j, "vocab_size");
}

TEST(ModelShape, UnknownPresetListsTheKnownOnes) {
  try {
    model_preset("llama-9");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    for (const std::string& n : model_preset_names())
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n;
  }
  EXPECT_EQ(model_preset("GPT2").name, "gpt2-124m");  // alias, case-insensitive
}

}  // namespace
}  // namespace lmstack::calc
