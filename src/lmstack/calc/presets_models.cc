// Model presets compiled in, so `calc` needs no data files. Every value is copied from the
// config.json of the Hugging Face repository named in the comment above each entry (fields
// renamed per model_shape.h); the parameter counts these produce are checked in
// tests/calc/params_test.cc against the counts Hugging Face reports.
#include <algorithm>
#include <array>
#include <cctype>

#include "lmstack/calc/model_shape.h"

namespace lmstack::calc {
namespace {

// GPT-2 family: n_embd, n_layer, n_head, n_positions=1024, vocab 50257, n_inner=4*n_embd, tied,
// LayerNorm, biases on every linear, learned position embeddings.
ModelShape gpt2(const char* name, int64_t hidden, int64_t layers, int64_t heads) {
  ModelShape m;
  m.name = name;
  m.vocab_size = 50257;
  m.hidden_size = hidden;
  m.num_layers = layers;
  m.num_heads = m.num_kv_heads = heads;
  m.head_dim = hidden / heads;
  m.intermediate_size = 4 * hidden;
  m.max_position = 1024;
  m.tied_embeddings = true;
  m.gated_mlp = false;
  m.layer_norm = true;
  m.qkv_bias = m.o_bias = m.mlp_bias = true;
  m.learned_positions = true;
  return m;
}

// GPT-3: the GPT-2 block at other sizes (learned positions, LayerNorm, biases, tied).
ModelShape gpt3(const char* name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                int64_t max_pos) {
  ModelShape m = gpt2(name, hidden, layers, heads);
  m.vocab_size = vocab;
  m.max_position = max_pos;
  return m;
}

// Llama-style decoder (RMSNorm, SwiGLU, RoPE, no biases).
ModelShape llama(const char* name, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads,
                 int64_t kv_heads, int64_t inter, int64_t max_pos, bool tied) {
  ModelShape m;
  m.name = name;
  m.vocab_size = vocab;
  m.hidden_size = hidden;
  m.num_layers = layers;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.intermediate_size = inter;
  m.max_position = max_pos;
  m.tied_embeddings = tied;
  return m;
}

ModelShape with_qkv_bias(ModelShape m) {
  m.qkv_bias = true;
  return m;
}

ModelShape with_experts(ModelShape m, int64_t experts, int64_t top_k) {
  m.num_experts = experts;
  m.experts_per_token = top_k;
  m.moe_intermediate_size = m.intermediate_size;
  return m;
}

// Qwen2-MoE: every layer sparse, one gated shared expert of its own width.
ModelShape qwen2_moe(ModelShape m, int64_t experts, int64_t top_k, int64_t moe_inter,
                     int64_t shared_inter) {
  m.qkv_bias = true;
  m.num_experts = experts;
  m.experts_per_token = top_k;
  m.moe_intermediate_size = moe_inter;
  m.num_shared_experts = 1;
  m.shared_intermediate_size = shared_inter;
  m.shared_expert_gate = true;
  return m;
}

// DeepSeek MLA + MoE decoder.
struct DeepSeekDims {
  int64_t vocab, hidden, layers, heads, inter, moe_inter, routed, shared, top_k, dense, q_lora,
      max_pos;
  bool router_bias;
};
ModelShape deepseek(const char* name, const DeepSeekDims& d) {
  ModelShape m =
      llama(name, d.vocab, d.hidden, d.layers, d.heads, d.heads, d.inter, d.max_pos, false);
  m.num_experts = d.routed;
  m.num_shared_experts = d.shared;
  m.experts_per_token = d.top_k;
  m.moe_intermediate_size = d.moe_inter;
  m.first_dense_layers = d.dense;
  m.router_bias = d.router_bias;
  m.q_lora_rank = d.q_lora;
  m.kv_lora_rank = 512;      // both DeepSeek configs: kv_lora_rank 512
  m.qk_nope_head_dim = 128;  // qk_nope_head_dim 128
  m.qk_rope_head_dim = 64;   // qk_rope_head_dim 64
  m.v_head_dim = 128;        // v_head_dim 128
  m.head_dim = 192;
  return m;
}

std::vector<ModelShape> build_table() {
  return {
      // huggingface.co/openai-community/gpt2 (124M): n_embd 768, n_layer 12, n_head 12
      gpt2("gpt2-124m", 768, 12, 12),
      // huggingface.co/openai-community/gpt2-medium: n_embd 1024, n_layer 24, n_head 16
      gpt2("gpt2-350m", 1024, 24, 16),
      // huggingface.co/openai-community/gpt2-large: n_embd 1280, n_layer 36, n_head 20
      gpt2("gpt2-774m", 1280, 36, 20),
      // huggingface.co/openai-community/gpt2-xl: n_embd 1600, n_layer 48, n_head 25
      gpt2("gpt2-1.5b", 1600, 48, 25),
      // GPT-3 175B has no Hugging Face repository: Brown et al. 2020 Table 2.1 (96 layers,
      // d_model 12288, 96 heads, context 2048) with Megatron-LM's vocabulary padded to 51,200
      // (Narayanan et al. 2021 sec. 5.1; eq. 2 gives 174.6B, as their Table 2)
      gpt3("gpt3-175b", 51200, 12288, 96, 96, 2048),
      // huggingface.co/meta-llama/Llama-2-7b-hf: vocab 32000, hidden 4096, 32 layers, 32 heads,
      // 32 kv heads, intermediate 11008, max_position 4096, untied
      llama("llama-2-7b", 32000, 4096, 32, 32, 32, 11008, 4096, false),
      // huggingface.co/meta-llama/Llama-2-70b-hf: hidden 8192, 80 layers, 64 heads, 8 kv heads,
      // intermediate 28672
      llama("llama-2-70b", 32000, 8192, 80, 64, 8, 28672, 4096, false),
      // huggingface.co/meta-llama/Meta-Llama-3-8B: vocab 128256, hidden 4096, 32 layers, 32 heads,
      // 8 kv heads, intermediate 14336, max_position 8192, untied
      llama("llama-3-8b", 128256, 4096, 32, 32, 8, 14336, 8192, false),
      // huggingface.co/meta-llama/Meta-Llama-3-70B: hidden 8192, 80 layers, 64 heads, 8 kv heads,
      // intermediate 28672
      llama("llama-3-70b", 128256, 8192, 80, 64, 8, 28672, 8192, false),
      // huggingface.co/meta-llama/Llama-3.1-405B: hidden 16384, 126 layers, 128 heads, 8 kv heads,
      // intermediate 53248, max_position 131072
      llama("llama-3.1-405b", 128256, 16384, 126, 128, 8, 53248, 131072, false),
      // huggingface.co/Qwen/Qwen2.5-7B: vocab 152064, hidden 3584, 28 layers, 28 heads, 4 kv
      // heads, intermediate 18944, max_position 131072, untied, q/k/v biases (Qwen2 attention)
      with_qkv_bias(llama("qwen2.5-7b", 152064, 3584, 28, 28, 4, 18944, 131072, false)),
      // huggingface.co/mistralai/Mistral-7B-v0.1: vocab 32000, hidden 4096, 32 layers, 32 heads,
      // 8 kv heads, intermediate 14336, max_position 32768
      llama("mistral-7b", 32000, 4096, 32, 32, 8, 14336, 32768, false),
      // huggingface.co/mistralai/Mixtral-8x7B-v0.1: as Mistral, num_local_experts 8,
      // num_experts_per_tok 2, expert intermediate 14336
      with_experts(llama("mixtral-8x7b", 32000, 4096, 32, 32, 8, 14336, 32768, false), 8, 2),
      // huggingface.co/Qwen/Qwen1.5-MoE-A2.7B: vocab 151936, hidden 2048, 24 layers, 16 heads,
      // 16 kv heads, intermediate 5632, 60 experts top-4 of moe_intermediate 1408, shared expert
      // 5632 with its sigmoid gate, decoder_sparse_step 1, max_position 8192, untied
      qwen2_moe(llama("qwen1.5-moe-a2.7b", 151936, 2048, 24, 16, 16, 5632, 8192, false), 60, 4,
                1408, 5632),
      // huggingface.co/deepseek-ai/DeepSeek-V2-Lite: vocab 102400, hidden 2048, 27 layers, 16
      // heads, intermediate 10944, moe_intermediate 1408, 64 routed + 2 shared experts, top-6,
      // first_k_dense_replace 1, q_lora_rank null, max_position 163840
      deepseek("deepseek-v2-lite",
               {102400, 2048, 27, 16, 10944, 1408, 64, 2, 6, 1, 0, 163840, false}),
      // huggingface.co/deepseek-ai/DeepSeek-V3: vocab 129280, hidden 7168, 61 layers, 128 heads,
      // intermediate 18432, moe_intermediate 2048, 256 routed + 1 shared experts, top-8,
      // first_k_dense_replace 3, q_lora_rank 1536, e_score_correction_bias (noaux_tc routing)
      deepseek("deepseek-v3",
               {129280, 7168, 61, 128, 18432, 2048, 256, 1, 8, 3, 1536, 163840, true}),
      // huggingface.co/HuggingFaceTB/SmolLM-135M: vocab 49152, hidden 576, 30 layers, 9 heads,
      // 3 kv heads, intermediate 1536, max_position 2048, tied
      llama("smollm-135m", 49152, 576, 30, 9, 3, 1536, 2048, true),
      // huggingface.co/TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T: vocab 32000, hidden
      // 2048, 22 layers, 32 heads, 4 kv heads, intermediate 5632, max_position 2048, untied
      llama("tinyllama-1.1b", 32000, 2048, 22, 32, 4, 5632, 2048, false),
  };
}

const std::vector<ModelShape>& table() {
  static const std::vector<ModelShape> t = build_table();
  return t;
}

struct Alias {
  const char* alias;
  const char* name;
};
constexpr std::array<Alias, 6> kAliases = {{{"gpt2", "gpt2-124m"},
                                            {"gpt2-medium", "gpt2-350m"},
                                            {"gpt2-large", "gpt2-774m"},
                                            {"gpt2-xl", "gpt2-1.5b"},
                                            {"mistral-7b-v0.1", "mistral-7b"},
                                            {"smollm", "smollm-135m"}}};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelShape& m : table()) names.push_back(m.name);
  return names;
}

ModelShape model_preset(const std::string& name) {
  std::string key = lower(name);
  for (const Alias& a : kAliases)
    if (key == a.alias) key = a.name;
  for (const ModelShape& m : table())
    if (m.name == key) return m;
  std::string known;
  for (const std::string& n : model_preset_names()) known += " " + n;
  throw_error<ConfigError>("unknown model preset '{}' (and no such config.json); known:{}", name,
                           known);
}

}  // namespace lmstack::calc
