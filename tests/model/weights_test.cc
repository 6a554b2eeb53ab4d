// Weight loading: tiny checkpoints of each architecture written in Hugging Face layout with
// position-coded values, loaded back and checked element by element: mapped views for
// [out, in] matrices, f32 norms, tied vs untied heads, GPT-2's Conv1D weights landing where
// nn.Linear semantics put them, shards, and errors for every kind of mismatch.
#include <gtest/gtest.h>

#include <filesystem>

#include "lmstack/core/file.h"
#include "lmstack/model/model_dir.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

ModelConfig tiny(const char* arch, bool tied, DType dtype = DType::kF32) {
  Json j = {{"architectures", Json::array({arch})},
            {"vocab_size", 40},
            {"hidden_size", 16},
            {"intermediate_size", 24},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"num_key_value_heads", 2},
            {"tie_word_embeddings", tied},
            {"n_embd", 16},
            {"n_layer", 2},
            {"n_head", 4},
            {"n_positions", 12},
            {"n_inner", 24},
            {"torch_dtype", std::string(dtype_name(dtype))}};
  if (std::string(arch) == "Qwen3ForCausalLM") j["head_dim"] = 8;  // q_dim 32 != hidden 16
  return ModelConfig::from_json(j, "tiny");
}

// Element i of tensor number k holds k * 1000 + i (exact in f32; bf16 rounds it).
std::vector<std::pair<std::string, Tensor>> coded_tensors(const ModelConfig& c, DType dtype) {
  std::vector<std::pair<std::string, Tensor>> out;
  int k = 0;
  for (const HfTensorSpec& s : hf_tensor_specs(c)) {
    Tensor t = Tensor::zeros(s.shape, s.is_norm || s.is_bias ? DType::kF32 : dtype);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f32(i, static_cast<float>(k * 1000 + i));
    out.emplace_back(s.name, t);
    ++k;
  }
  return out;
}

const Tensor& find(const std::vector<std::pair<std::string, Tensor>>& ts, const std::string& n) {
  for (const auto& [name, t] : ts)
    if (name == n) return t;
  throw std::runtime_error("no tensor " + n);
}

std::string write_dir(const std::string& name, const ModelConfig& c,
                      const std::vector<std::pair<std::string, Tensor>>& ts,
                      int64_t shard_bytes = 0) {
  const std::string dir = test::temp_dir(name);
  write_model_dir(dir, c, ts, {}, shard_bytes);
  return dir;
}

TEST(Weights, LlamaFamilyLoadsEveryTensorInPlace) {
  for (const char* arch :
       {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"}) {
    SCOPED_TRACE(arch);
    const ModelConfig c = tiny(arch, false, DType::kBF16);
    const auto ts = coded_tensors(c, DType::kBF16);
    const ModelDir m = load_model_dir(write_dir("w_llama", c, ts));
    const ModelWeights& w = m.weights;
    ASSERT_EQ(w.layers.size(), 2u);
    const LayerWeights& l1 = w.layers[1];
    EXPECT_TRUE(l1.wq.is_mapped());
    EXPECT_EQ(l1.wq.dtype(), DType::kBF16);
    EXPECT_EQ(l1.wq.shape(), (Shape{c.q_dim(), 16}));
    EXPECT_EQ(l1.wk.shape(), (Shape{c.kv_dim(), 16}));
    EXPECT_EQ(l1.wo.shape(), (Shape{16, c.q_dim()}));
    EXPECT_EQ(l1.w_down.shape(), (Shape{16, 24}));
    EXPECT_EQ(l1.attn_norm.dtype(), DType::kF32);
    EXPECT_EQ(l1.wv.to_f32_vector(),
              find(ts, "model.layers.1.self_attn.v_proj.weight").to_f32_vector());
    EXPECT_EQ(l1.mlp_norm.to_f32_vector(),
              find(ts, "model.layers.1.post_attention_layernorm.weight").to_f32_vector());
    EXPECT_EQ(l1.bq.defined(), c.qkv_bias);
    EXPECT_EQ(l1.q_norm.defined(), c.qk_norm);
    EXPECT_FALSE(l1.bo.defined());
    if (c.qkv_bias) {
      EXPECT_EQ(l1.bk.to_f32_vector(),
                find(ts, "model.layers.1.self_attn.k_proj.bias").to_f32_vector());
    }
    if (c.qk_norm) {
      EXPECT_EQ(l1.k_norm.shape(), (Shape{8}));
    }
    EXPECT_EQ(w.lm_head.to_f32_vector(), find(ts, "lm_head.weight").to_f32_vector());
    EXPECT_NE(w.lm_head.raw_data(), w.embed.raw_data());
    // Round trip back to HF names and values.
    const auto back = to_hf_tensors(c, w);
    ASSERT_EQ(back.size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(back[i].first, ts[i].first);
      EXPECT_EQ(back[i].second.to_f32_vector(), ts[i].second.to_f32_vector()) << ts[i].first;
    }
  }
}

TEST(Weights, TiedEmbeddingsShareStorageAndCountOnce) {
  const ModelConfig c = tiny("LlamaForCausalLM", true);
  const auto ts = coded_tensors(c, DType::kF32);
  const ModelDir m = load_model_dir(write_dir("w_tied", c, ts));
  EXPECT_EQ(m.weights.lm_head.raw_data(), m.weights.embed.raw_data());
  EXPECT_EQ(m.weights.bytes(), c.num_parameters() * 4);
  const ModelConfig u = tiny("LlamaForCausalLM", false);
  const ModelDir mu = load_model_dir(write_dir("w_untied", u, coded_tensors(u, DType::kF32)));
  EXPECT_EQ(mu.weights.bytes(), u.num_parameters() * 4);
  EXPECT_EQ(u.num_parameters() - c.num_parameters(), 40 * 16);
}

TEST(Weights, Gpt2Conv1dIsTransposedAndSplit) {
  const ModelConfig c = tiny("GPT2LMHeadModel", true);
  ASSERT_EQ(c.max_position, 12);
  const auto ts = coded_tensors(c, DType::kF32);
  const ModelDir m = load_model_dir(write_dir("w_gpt2", c, ts));
  const LayerWeights& l = m.weights.layers[1];
  const Tensor& c_attn = find(ts, "transformer.h.1.attn.c_attn.weight");  // [C, 3C] = [in, out]
  const int64_t C = 16;
  // nn.Linear: q[j] = sum_i W_q[j][i] x[i]; Conv1D: qkv[o] = sum_i W[i][o] x[i].
  for (int64_t j = 0; j < C; ++j)
    for (int64_t i = 0; i < C; ++i) {
      ASSERT_EQ(l.wq.at({j, i}), c_attn.at({i, j}));
      ASSERT_EQ(l.wk.at({j, i}), c_attn.at({i, C + j}));
      ASSERT_EQ(l.wv.at({j, i}), c_attn.at({i, 2 * C + j}));
    }
  const Tensor& bias = find(ts, "transformer.h.1.attn.c_attn.bias");
  EXPECT_EQ(l.bv.at({3}), bias.at({2 * C + 3}));
  const Tensor& fc = find(ts, "transformer.h.1.mlp.c_fc.weight");  // [C, F]
  EXPECT_EQ(l.w_up.shape(), (Shape{24, C}));
  EXPECT_EQ(l.w_up.at({5, 7}), fc.at({7, 5}));
  EXPECT_EQ(l.w_down.shape(), (Shape{C, 24}));
  EXPECT_EQ(l.w_down.at({3, 20}), find(ts, "transformer.h.1.mlp.c_proj.weight").at({20, 3}));
  EXPECT_EQ(l.wo.at({2, 9}), find(ts, "transformer.h.1.attn.c_proj.weight").at({9, 2}));
  EXPECT_FALSE(l.wq.is_mapped());
  EXPECT_TRUE(m.weights.embed.is_mapped());
  EXPECT_EQ(m.weights.pos_embed.shape(), (Shape{12, C}));
  EXPECT_EQ(m.weights.final_norm_bias.to_f32_vector(),
            find(ts, "transformer.ln_f.bias").to_f32_vector());
  EXPECT_EQ(m.weights.lm_head.raw_data(), m.weights.embed.raw_data());
  EXPECT_EQ(m.weights.bytes(), c.num_parameters() * 4);
  // Export restores HF's Conv1D layout exactly.
  const auto back = to_hf_tensors(c, m.weights);
  ASSERT_EQ(back.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i)
    EXPECT_EQ(back[i].second.to_f32_vector(), ts[i].second.to_f32_vector()) << ts[i].first;
}

TEST(Weights, Gpt2WithoutTransformerPrefixLoads) {
  const ModelConfig c = tiny("GPT2LMHeadModel", true);
  auto ts = coded_tensors(c, DType::kBF16);
  for (auto& [name, t] : ts) name = name.substr(std::string("transformer.").size());
  const ModelDir m = load_model_dir(write_dir("w_gpt2_bare", c, ts));
  EXPECT_EQ(m.weights.layers[0].w_up.dtype(), DType::kBF16);
  EXPECT_EQ(m.weights.embed.to_f32_vector(), find(ts, "wte.weight").to_f32_vector());
}

TEST(Weights, ShardedDirectoryLoads) {
  const ModelConfig c = tiny("Qwen2ForCausalLM", false);
  const auto ts = coded_tensors(c, DType::kF32);
  const std::string dir = write_dir("w_sharded", c, ts, 4096);
  EXPECT_FALSE(file_exists(path_join(dir, "model.safetensors")));
  const Json index = read_json_file(path_join(dir, "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"].size(), ts.size());
  int shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    shards += e.path().extension() == ".safetensors";
  EXPECT_GE(shards, 2);
  EXPECT_TRUE(
      file_exists(path_join(dir, fmt::format("model-00001-of-{:05d}.safetensors", shards))));
  const ModelDir m = load_model_dir(dir);
  EXPECT_EQ(m.weights.lm_head.to_f32_vector(), find(ts, "lm_head.weight").to_f32_vector());
  EXPECT_EQ(m.weights.layers[1].bv.to_f32_vector(),
            find(ts, "model.layers.1.self_attn.v_proj.bias").to_f32_vector());
}

// Loads `ts` (after `edit`) and expects a FormatError mentioning every needle.
void expect_load_error(const ModelConfig& c, std::vector<std::pair<std::string, Tensor>> ts,
                       const std::vector<std::string>& needles) {
  const std::string dir = write_dir("w_err", c, ts);
  try {
    load_model_dir(dir);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Weights, MismatchesAreNamedByFileAndTensor) {
  const ModelConfig c = tiny("LlamaForCausalLM", false);
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  auto base = coded_tensors(c, DType::kF32);
  {
    auto ts = base;
    std::erase_if(ts, [&](const auto& p) { return p.first == q; });
    expect_load_error(c, ts, {"model.safetensors", "missing tensor '" + q + "'"});
  }
  {
    auto ts = base;
    for (auto& [n, t] : ts)
      if (n == q) t = Tensor::zeros(Shape{16, 15}, DType::kF32);
    expect_load_error(c, ts, {"model.safetensors", q, "[16, 15]", "[16, 16]"});
  }
  {
    auto ts = base;
    for (auto& [n, t] : ts)
      if (n == q) t = Tensor::zeros(Shape{16, 16}, DType::kI32);
    expect_load_error(c, ts, {"model.safetensors", q, "I32"});
  }
  {
    auto ts = base;
    std::erase_if(ts, [&](const auto& p) { return p.first == "lm_head.weight"; });
    expect_load_error(c, ts, {"lm_head.weight"});
  }
  {
    auto ts = base;
    ts.emplace_back("model.layers.2.mlp.up_proj.weight", Tensor::zeros(Shape{24, 16}, DType::kF32));
    expect_load_error(c, ts, {"model.layers.2.mlp.up_proj.weight", "2 layers"});
  }
}

TEST(Weights, MissingFilesAndDirectoriesAreClear) {
  EXPECT_THROW(load_model_dir("/nonexistent/lmstack/model"), IoError);
  const std::string dir = test::temp_dir("w_nofiles");
  write_file_atomic(path_join(dir, "config.json"), tiny("LlamaForCausalLM", true).to_json().dump());
  try {
    load_model_dir(dir);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos);
  }
  write_file_atomic(path_join(dir, "config.json"), "{\"architectures\": [\"Nope\"]}");
  try {
    load_model_dir(dir);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace lmstack::model
