// Preset table for init-model (see presets.h). Real presets copy the shape fields of each
// checkpoint's config.json on the Hugging Face Hub (named in `source`); token ids are left
// out because init-model writes its own tokenizer. Tiny presets cover every attention kind:
// MHA (tiny-gpt2), GQA (tiny-llama, tiny-qwen2, tiny-qwen3) and MQA (tiny-mistral).
#include "lmstack/model/presets.h"

#include "lmstack/model/config.h"
#include "lmstack/model/presets_internal.h"

namespace lmstack::model {
namespace {

struct ArchSpelling {
  const char* arch;
  const char* class_name;
};
constexpr ArchSpelling kArchSpellings[] = {{"llama", "LlamaForCausalLM"},
                                           {"mistral", "MistralForCausalLM"},
                                           {"qwen2", "Qwen2ForCausalLM"},
                                           {"qwen3", "Qwen3ForCausalLM"},
                                           {"gpt2", "GPT2LMHeadModel"}};

Json gpt2_like(int vocab, int embd, int layers, int heads, int positions) {
  return {{"architectures", Json::array({"GPT2LMHeadModel"})},
          {"vocab_size", vocab},
          {"n_embd", embd},
          {"n_layer", layers},
          {"n_head", heads},
          {"n_positions", positions},
          {"n_inner", nullptr},
          {"layer_norm_epsilon", 1e-5},
          {"activation_function", "gelu_new"}};
}

std::vector<ModelPreset> build_presets() {
  constexpr const char* kL = "LlamaForCausalLM";
  std::vector<ModelPreset> p;
  p.push_back(
      {"gpt2", "gpt2", "openai-community/gpt2 (124M)", gpt2_like(50257, 768, 12, 12, 1024)});
  p.push_back({"smollm-135m", "llama", "HuggingFaceTB/SmolLM-135M",
               detail::llama_like(kL, 49152, 576, 1536, 30, 9, 3, 2048, 10000.0, 1e-5, true)});
  p.push_back({"smollm-360m", "llama", "HuggingFaceTB/SmolLM-360M",
               detail::llama_like(kL, 49152, 960, 2560, 32, 15, 5, 2048, 10000.0, 1e-5, true)});
  p.push_back({"tinyllama-1.1b", "llama", "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
               detail::llama_like(kL, 32000, 2048, 5632, 22, 32, 4, 2048, 10000.0, 1e-5, false)});
  p.push_back({"qwen2.5-0.5b", "qwen2", "Qwen/Qwen2.5-0.5B",
               detail::llama_like("Qwen2ForCausalLM", 151936, 896, 4864, 24, 14, 2, 32768, 1e6,
                                  1e-6, true)});
  Json llama32 =
      detail::llama_like(kL, 128256, 2048, 8192, 16, 32, 8, 131072, 500000.0, 1e-5, true);
  llama32["head_dim"] = 64;
  llama32["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", 32.0},
                             {"low_freq_factor", 1.0},
                             {"high_freq_factor", 4.0},
                             {"original_max_position_embeddings", 8192}};
  p.push_back({"llama-3.2-1b", "llama", "meta-llama/Llama-3.2-1B", llama32});
  Json qwen3 =
      detail::llama_like("Qwen3ForCausalLM", 151936, 1024, 3072, 28, 16, 8, 40960, 1e6, 1e-6, true);
  qwen3["head_dim"] = 128;
  p.push_back({"qwen3-0.6b", "qwen3", "Qwen/Qwen3-0.6B", qwen3});

  // Tiny test models: vocab 512 >= init-model's 259-token byte-level tokenizer.
  Json tiny_llama = detail::llama_like(kL, 512, 64, 160, 2, 4, 2, 256, 10000.0, 1e-5, false);
  tiny_llama["rope_scaling"] = {{"rope_type", "llama3"},
                                {"factor", 4.0},
                                {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0},
                                {"original_max_position_embeddings", 64}};
  p.push_back({"tiny-llama", "llama", "test (GQA 4/2, untied, llama3 RoPE scaling)", tiny_llama});
  p.push_back(
      {"tiny-mistral", "mistral", "test (MQA 4/1, untied)",
       detail::llama_like("MistralForCausalLM", 512, 64, 160, 2, 4, 1, 256, 10000.0, 1e-5, false)});
  p.push_back(
      {"tiny-qwen2", "qwen2", "test (GQA 4/2, q/k/v biases, tied)",
       detail::llama_like("Qwen2ForCausalLM", 512, 64, 160, 2, 4, 2, 256, 1e6, 1e-6, true)});
  Json tiny_qwen3 =
      detail::llama_like("Qwen3ForCausalLM", 512, 64, 160, 2, 4, 2, 256, 1e6, 1e-6, true);
  tiny_qwen3["head_dim"] = 32;  // q_dim 128 != hidden 64: exercises an explicit head_dim
  p.push_back({"tiny-qwen3", "qwen3", "test (q/k norm, head_dim 32 with hidden 64)", tiny_qwen3});
  p.push_back({"tiny-gpt2", "gpt2", "test (MHA, tied)", gpt2_like(512, 64, 2, 4, 128)});
  detail::append_moe_presets(p);
  return p;
}

std::string preset_list() {
  std::string s;
  for (const ModelPreset& p : model_presets()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace

namespace detail {

Json llama_like(const char* cls, int vocab, int hidden, int inter, int layers, int heads,
                int kv_heads, int max_pos, double theta, double eps, bool tied) {
  return {{"architectures", Json::array({cls})},
          {"vocab_size", vocab},
          {"hidden_size", hidden},
          {"intermediate_size", inter},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"max_position_embeddings", max_pos},
          {"rope_theta", theta},
          {"rms_norm_eps", eps},
          {"tie_word_embeddings", tied},
          {"hidden_act", "silu"}};
}

}  // namespace detail

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = build_presets();
  return presets;
}

std::string architecture_for(const std::string& arch) {
  std::string known;
  for (const ArchSpelling& a : kArchSpellings) {
    if (arch == a.arch) return a.class_name;
    known += (known.empty() ? "" : ", ") + std::string(a.arch);
  }
  throw_error<RequestError>("unknown --arch '{}' (known: {})", arch, known);
}

Json convert_config(const Json& config, const std::string& arch) {
  const ModelConfig c = ModelConfig::from_json(config, "preset config");
  const std::string cls = architecture_for(arch);
  if (cls == "GPT2LMHeadModel") {
    if (c.num_kv_heads != c.num_heads || c.head_dim * c.num_heads != c.hidden_size)
      throw_error<RequestError>(
          "--arch gpt2 needs plain multi-head attention (kv heads = heads, head_dim = hidden / "
          "heads); this config has {} kv heads, head_dim {}",
          c.num_kv_heads, c.head_dim);
    Json j = gpt2_like(c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.max_position);
    j["n_inner"] = c.intermediate_size;
    j["layer_norm_epsilon"] = c.norm_eps;
    return j;
  }
  const bool gpt2_source = c.arch == Arch::kGpt2;
  Json j =
      detail::llama_like(cls.c_str(), c.vocab_size, c.hidden_size, c.intermediate_size,
                         c.num_layers, c.num_heads, c.num_kv_heads, c.max_position,
                         gpt2_source ? 10000.0 : c.rope_theta, c.norm_eps, c.tie_word_embeddings);
  j["head_dim"] = c.head_dim;
  if (!gpt2_source && config.contains("rope_scaling")) j["rope_scaling"] = config["rope_scaling"];
  return j;
}

ModelPreset find_model_preset(const std::string& name, const std::string& arch) {
  const std::string wanted = name == "tiny" ? "tiny-" + (arch.empty() ? "llama" : arch) : name;
  for (const ModelPreset& p : model_presets()) {
    if (p.name != wanted) continue;
    if (arch.empty() || arch == p.arch) return p;
    if (p.name.rfind("tiny-", 0) != 0)
      throw_error<RequestError>(
          "preset '{}' is a {} model; --arch {} applies only to --config "
          "or tiny presets",
          p.name, p.arch, arch);
    ModelPreset q = p;
    q.config = convert_config(p.config, arch);
    q.arch = arch;
    q.source = p.source + ", re-targeted to " + arch;
    return q;
  }
  throw_error<RequestError>("unknown preset '{}' (known: tiny, {})", name, preset_list());
}

}  // namespace lmstack::model
