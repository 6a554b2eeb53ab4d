// A tiny random Llama built in memory for engine tests (no files, no tokenizer): vocab 96,
// hidden 32, 2 layers, 4 heads over 2 KV heads. Weights are seeded normals, scaled so that
// logits are far from ties and greedy decoding is stable across batch shapes.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"

namespace lmstack::serve::test {

struct TinyModel {
  model::ModelConfig config;
  model::ModelWeights weights;
};

inline Tensor random_tensor(const Shape& shape, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& v : values) v = normal(rng);
  return Tensor::from_f32(shape, values, MemoryCategory::kWeights);
}

inline Tensor ones(int64_t n) {
  return Tensor::from_f32({n}, std::vector<float>(static_cast<size_t>(n), 1.0f),
                          MemoryCategory::kWeights);
}

// `vocab` other than 96: a model that cannot draft for the default one (speculative tests).
inline std::unique_ptr<TinyModel> make_tiny_model(uint32_t seed = 1, int vocab = 96) {
  auto m = std::make_unique<TinyModel>();
  model::ModelConfig& c = m->config;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = vocab;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position = 1024;
  std::mt19937 rng(seed);
  const int64_t C = c.hidden_size, F = c.intermediate_size;
  m->weights.embed = random_tensor({c.vocab_size, C}, 1.0f, rng);
  for (int l = 0; l < c.num_layers; ++l) {
    model::LayerWeights w;
    w.attn_norm = ones(C);
    w.mlp_norm = ones(C);
    w.wq = random_tensor({c.q_dim(), C}, 0.3f, rng);
    w.wk = random_tensor({c.kv_dim(), C}, 0.3f, rng);
    w.wv = random_tensor({c.kv_dim(), C}, 0.3f, rng);
    w.wo = random_tensor({C, c.q_dim()}, 0.3f, rng);
    w.w_gate = random_tensor({F, C}, 0.3f, rng);
    w.w_up = random_tensor({F, C}, 0.3f, rng);
    w.w_down = random_tensor({C, F}, 0.3f, rng);
    m->weights.layers.push_back(std::move(w));
  }
  m->weights.final_norm = ones(C);
  m->weights.lm_head = random_tensor({c.vocab_size, C}, 1.0f, rng);
  return m;
}

// A deterministic pseudo-random prompt of `n` tokens in [1, vocab).
inline std::vector<int32_t> make_prompt(int n, uint32_t seed, int vocab = 96) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 1));
  return p;
}

}  // namespace lmstack::serve::test
