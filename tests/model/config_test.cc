// ModelConfig: parsing the config.json of every supported architecture (fields as the real
// Hugging Face checkpoints spell them), round trips through to_json, parameter counts of
// known models, and errors that name the file and field.
#include "lmstack/model/config.h"

#include <gtest/gtest.h>

#include "lmstack/model/model_dir.h"

namespace lmstack::model {
namespace {

// The config.json of meta-llama/Llama-3.2-1B (abridged to the fields lmstack reads).
Json llama32_1b() {
  return Json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "max_position_embeddings": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu", "attention_bias": false, "mlp_bias": false})");
}

// openai-community/gpt2's config.json (abridged).
Json gpt2_124m() {
  return Json::parse(R"({
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
    "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_ctx": 1024,
    "n_inner": null, "layer_norm_epsilon": 1e-05, "vocab_size": 50257,
    "bos_token_id": 50256, "eos_token_id": 50256})");
}

Json qwen3_06b() {
  return Json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_scaling": null,
    "max_position_embeddings": 40960, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 151936, "attention_bias": false, "sliding_window": null,
    "use_sliding_window": false, "bos_token_id": 151643, "eos_token_id": 151645})");
}

Json qwen25_05b() {
  return Json::parse(R"({
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 151936,
    "sliding_window": 32768, "use_sliding_window": false, "bos_token_id": 151643,
    "eos_token_id": 151643})");
}

std::string error_of(const Json& j) {
  try {
    ModelConfig::from_json(j, "dir/config.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ParsesLlama32WithLlama3RopeScaling) {
  const ModelConfig c = ModelConfig::from_json(llama32_1b(), "config.json");
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.kv_dim(), 512);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_FALSE(c.qkv_bias);
  // 1,235,814,400 parameters: Llama 3.2 1B's published count.
  EXPECT_EQ(c.num_parameters(), 1235814400);
}

TEST(Config, ParsesGpt2WithNullInner) {
  const ModelConfig c = ModelConfig::from_json(gpt2_124m(), "config.json");
  EXPECT_EQ(c.arch, Arch::kGpt2);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.norm, NormKind::kLayerNorm);
  EXPECT_EQ(c.mlp, MlpKind::kGeluTanh);
  EXPECT_TRUE(c.learned_positions && c.qkv_bias && c.o_bias && c.mlp_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{50256});
  EXPECT_EQ(c.num_parameters(), 124439808);  // GPT-2 small
}

TEST(Config, ParsesQwen2AndQwen3) {
  const ModelConfig q2 = ModelConfig::from_json(qwen25_05b(), "config.json");
  EXPECT_EQ(q2.arch, Arch::kQwen2);
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.o_bias);
  EXPECT_EQ(q2.head_dim, 64);
  EXPECT_EQ(q2.sliding_window, 0);            // present but use_sliding_window is false
  EXPECT_EQ(q2.num_parameters(), 494032768);  // Qwen2.5-0.5B: 0.49B
  const ModelConfig q3 = ModelConfig::from_json(qwen3_06b(), "config.json");
  EXPECT_EQ(q3.arch, Arch::kQwen3);
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_EQ(q3.q_dim(), 2048);                // != hidden_size: explicit head_dim
  EXPECT_EQ(q3.num_parameters(), 596049920);  // Qwen3-0.6B: 0.6B (0.44B without embedding)
}

TEST(Config, MistralAndDefaults) {
  Json j = llama32_1b();
  j["architectures"] = Json::array({"MistralForCausalLM"});
  j.erase("head_dim");
  j.erase("num_key_value_heads");
  j.erase("rope_scaling");
  j["eos_token_id"] = 2;
  j["sliding_window"] = 4096;
  const ModelConfig c = ModelConfig::from_json(j, "config.json");
  EXPECT_EQ(c.arch, Arch::kMistral);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_kv_heads, 32);  // MHA when num_key_value_heads is absent
  EXPECT_EQ(c.rope_scaling.type, "default");
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  EXPECT_EQ(c.sliding_window, 4096);
}

TEST(Config, RoundTripsThroughToJson) {
  for (const Json& j : {llama32_1b(), gpt2_124m(), qwen3_06b(), qwen25_05b()}) {
    const ModelConfig a = ModelConfig::from_json(j, "a");
    const ModelConfig b = ModelConfig::from_json(a.to_json(), "b");
    EXPECT_EQ(b.to_json(), a.to_json());
    EXPECT_EQ(b.num_parameters(), a.num_parameters());
    EXPECT_EQ(b.architecture, a.architecture);
    EXPECT_EQ(b.rope_scaling.type, a.rope_scaling.type);
    EXPECT_EQ(b.eos_token_ids, a.eos_token_ids);
    EXPECT_EQ(b.head_dim, a.head_dim);
  }
}

TEST(Config, ParameterCountMatchesTheTensorList) {
  for (const Json& j : {llama32_1b(), gpt2_124m(), qwen3_06b(), qwen25_05b()}) {
    for (bool tied : {true, false}) {
      Json k = j;
      k["tie_word_embeddings"] = tied;
      const ModelConfig c = ModelConfig::from_json(k, "c");
      int64_t n = 0;
      for (const HfTensorSpec& s : hf_tensor_specs(c)) n += s.shape.numel();
      EXPECT_EQ(n, c.num_parameters()) << c.architecture << " tied=" << tied;
    }
  }
}

TEST(Config, UnknownArchitectureListsKnownOnes) {
  Json j = llama32_1b();
  j["architectures"] = Json::array({"FalconForCausalLM"});
  const std::string e = error_of(j);
  EXPECT_NE(e.find("dir/config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("FalconForCausalLM"), std::string::npos) << e;
  for (const std::string& k : known_architectures()) EXPECT_NE(e.find(k), std::string::npos) << e;
}

TEST(Config, BadShapesAndFieldsAreNamed) {
  struct Case {
    const char* field;
    Json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"num_key_value_heads", 5, "does not divide num_attention_heads"},
      {"num_attention_heads", 0, "num_attention_heads"},
      {"hidden_size", "big", "'hidden_size' has the wrong type"},
      {"vocab_size", -3, "'vocab_size' must be positive"},
      {"eos_token_id", "x", "eos_token_id"},
      {"rope_scaling", Json{{"rope_type", "dynamic"}, {"factor", 4}},
       "'rope_scaling.rope_type' is 'dynamic'"},
      {"rope_scaling", Json{{"rope_type", "yarn"}}, "'factor'"},
      {"rope_scaling", Json{{"rope_type", "llama3"}, {"factor", 8}}, "low_freq_factor"},
      {"torch_dtype", "int8", "torch_dtype 'int8'"},
      {"hidden_act", "gelu", "hidden_act 'gelu'"},
      {"architectures", "LlamaForCausalLM", "architectures"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    Json j = llama32_1b();
    j[c.field] = c.value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find("dir/config.json"), std::string::npos) << e;
    EXPECT_NE(e.find(c.needle), std::string::npos) << e;
  }
  Json no_head_dim = llama32_1b();
  no_head_dim.erase("head_dim");
  no_head_dim["num_attention_heads"] = 30;
  no_head_dim["num_key_value_heads"] = 10;
  EXPECT_NE(error_of(no_head_dim).find("does not divide hidden_size"), std::string::npos);
  Json missing = gpt2_124m();
  missing.erase("n_embd");
  EXPECT_NE(error_of(missing).find("missing required field 'n_embd'"), std::string::npos);
  EXPECT_NE(error_of(Json::array()).find("not a JSON object"), std::string::npos);
}

TEST(Config, Gpt2WithoutArchitecturesUsesModelType) {
  Json j = gpt2_124m();
  j.erase("architectures");
  EXPECT_EQ(ModelConfig::from_json(j, "c").arch, Arch::kGpt2);
}

// transformers >= 5 writes RoPE as rope_parameters (with rope_theta inside) and no top-level
// rope_theta / rope_scaling: the same numbers as the 4.x layout.
Json as_transformers5(Json j) {
  Json p = j.contains("rope_scaling") && !j["rope_scaling"].is_null()
               ? j["rope_scaling"]
               : Json{{"rope_type", "default"}};
  p["rope_theta"] = j["rope_theta"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = p;
  j["dtype"] = j["torch_dtype"];
  j.erase("torch_dtype");
  return j;
}

TEST(Config, Transformers5RopeParametersReadLikeTheOldLayout) {
  for (const Json& j : {llama32_1b(), qwen3_06b(), qwen25_05b()}) {
    const ModelConfig old = ModelConfig::from_json(j, "old");
    const ModelConfig now = ModelConfig::from_json(as_transformers5(j), "new");
    EXPECT_EQ(now.to_json(), old.to_json()) << old.architecture;
  }
  const ModelConfig l = ModelConfig::from_json(as_transformers5(llama32_1b()), "c");
  EXPECT_EQ(l.rope_theta, 500000.0f);  // not the 10000 fallback
  EXPECT_EQ(l.rope_scaling.type, "llama3");
  EXPECT_EQ(l.rope_scaling.factor, 32.0f);
  EXPECT_EQ(l.dtype, DType::kBF16);  // "dtype", not "torch_dtype"
  Json linear = llama32_1b();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // the pre-4.45 key "type"
  EXPECT_EQ(ModelConfig::from_json(as_transformers5(linear), "c").rope_scaling.factor, 2.0f);
}

TEST(Config, UnimplementedRopeTypesAreRefusedByName) {
  for (const char* type : {"dynamic", "longrope", "su", "mrope", "proportional"}) {
    Json j = as_transformers5(llama32_1b());
    j["rope_parameters"] = {{"rope_type", type}, {"rope_theta", 1e6}, {"factor", 4.0}};
    const std::string e = error_of(j);
    EXPECT_NE(e.find("dir/config.json"), std::string::npos) << e;
    EXPECT_NE(e.find("'rope_parameters.rope_type' is '" + std::string(type) + "'"),
              std::string::npos)
        << e;
  }
  Json per_layer = as_transformers5(llama32_1b());  // Gemma 3 style: one set per layer type
  per_layer["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}},
                                  {"sliding_attention", {{"rope_type", "default"}}}};
  EXPECT_NE(error_of(per_layer).find("one set per layer type"), std::string::npos);
}

// A small Qwen2 config with sliding-window fields as transformers writes them.
Json qwen2_windowed(int layers) {
  Json j = qwen25_05b();
  j["num_hidden_layers"] = layers;
  j["use_sliding_window"] = true;
  j["sliding_window"] = 8;
  return j;
}

TEST(Config, SlidingWindowPerArchitectureAsTransformersReadsIt) {
  Json q = qwen2_windowed(4);
  q["max_window_layers"] = 3;  // Qwen2Config: layers >= max_window_layers are windowed
  ModelConfig c = ModelConfig::from_json(q, "c");
  EXPECT_EQ(c.layer_window, (std::vector<int>{0, 0, 0, 8}));
  q["max_window_layers"] = -2;  // i >= -2 for every layer: all windowed (a fuzz finding)
  EXPECT_EQ(ModelConfig::from_json(q, "c").layer_window, (std::vector<int>{8, 8, 8, 8}));
  q["max_window_layers"] = 3;
  q["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  c = ModelConfig::from_json(q, "c");  // layer_types wins over max_window_layers
  EXPECT_EQ(c.layer_window, (std::vector<int>{8, 0, 8, 0}));
  EXPECT_EQ(ModelConfig::from_json(c.to_json(), "c").layer_window, c.layer_window);
  q["use_sliding_window"] = false;
  q.erase("layer_types");
  EXPECT_FALSE(ModelConfig::from_json(q, "c").every_layer_windowed());
  EXPECT_EQ(ModelConfig::from_json(q, "c").attention_window(3), 0);

  Json m = llama32_1b();
  m["architectures"] = Json::array({"MistralForCausalLM"});
  m.erase("sliding_window");
  EXPECT_EQ(ModelConfig::from_json(m, "c").sliding_window, 4096);  // MistralConfig's default
  m["sliding_window"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json(m, "c").sliding_window, 0);
  m["sliding_window"] = 8;
  m["layer_types"] = {"full_attention"};  // MistralModel ignores layer_types
  EXPECT_TRUE(ModelConfig::from_json(m, "c").every_layer_windowed());
  Json l = llama32_1b();
  l["sliding_window"] = 8;  // LlamaAttention has no window
  EXPECT_EQ(ModelConfig::from_json(l, "c").attention_window(0), 0);
}

TEST(Config, BadLayerTypesAreNamed) {
  Json j = qwen2_windowed(2);
  j["layer_types"] = {"full_attention"};
  EXPECT_NE(error_of(j).find("'layer_types' must list one type per layer (2 layers)"),
            std::string::npos);
  j["layer_types"] = {"full_attention", "chunked_attention"};
  EXPECT_NE(error_of(j).find("'layer_types'[1] is '\"chunked_attention\"'"), std::string::npos)
      << error_of(j);
  j["layer_types"] = {"full_attention", "sliding_attention"};
  j["use_sliding_window"] = false;
  EXPECT_NE(error_of(j).find("layer 1 sliding_attention but no sliding_window"), std::string::npos);
}

}  // namespace
}  // namespace lmstack::model
