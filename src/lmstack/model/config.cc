// ModelConfig <-> Hugging Face config.json, per architecture (field names as transformers'
// LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config and GPT2Config spell them).
// One table row per architecture; no switch over architectures. The parameter count follows
// the tensors listed in model_dir.h's hf_tensor_specs (a test checks they agree).
#include "lmstack/model/config.h"

#include <algorithm>
#include <array>
#include <iterator>

#include "lmstack/model/config_arch.h"

namespace lmstack::model {
namespace {

using detail::parse_llama_common;
using detail::parse_rope;
using detail::write_llama_common;

struct ArchEntry {
  const char* class_name;
  const char* model_type;
  Arch arch;
  void (*parse)(const Json& j, const std::string& src, ModelConfig& c);
  void (*write)(const ModelConfig& c, Json& j);
};

// eos_token_id is an int, a list of ints, or null.
std::vector<int> parse_eos(const Json& j, const std::string& src) {
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return {};
  const Json& e = j["eos_token_id"];
  if (e.is_number_integer()) return {e.get<int>()};
  if (e.is_array()) {
    std::vector<int> ids;
    for (const Json& x : e) {
      if (!x.is_number_integer())
        throw_error<ConfigError>("{}: field 'eos_token_id' holds a non-integer", src);
      ids.push_back(x.get<int>());
    }
    return ids;
  }
  throw_error<ConfigError>("{}: field 'eos_token_id' must be an int or a list of ints", src);
}

// YaRN's fields as transformers reads them (modeling_rope_utils._compute_yarn_parameters): a
// null or absent optional field takes its default; factor is required (5.x derives a null one
// from max_position_embeddings / original_max_position_embeddings, which lmstack refuses rather
// than guess, since max_position_embeddings is parsed later).
void parse_yarn(const Json& s, const std::string& field_src, RopeScaling& r) {
  const auto opt = [&](const char* key, float fallback) {
    return s.contains(key) && !s[key].is_null() ? require<float>(s, key, field_src) : fallback;
  };
  r.factor = require<float>(s, "factor", field_src);
  r.original_max_position = s.contains("original_max_position_embeddings") &&
                                    !s["original_max_position_embeddings"].is_null()
                                ? require<int>(s, "original_max_position_embeddings", field_src)
                                : 0;
  r.beta_fast = opt("beta_fast", 0.0f);
  r.beta_slow = opt("beta_slow", 0.0f);
  r.mscale = opt("mscale", 0.0f);
  r.mscale_all_dim = opt("mscale_all_dim", 0.0f);
  r.attention_factor = opt("attention_factor", 0.0f);
  r.truncate = optional<bool>(s, "truncate", true, field_src);
  if (r.original_max_position < 0 || r.beta_fast < 0 || r.beta_slow < 0 || r.attention_factor < 0)
    throw_error<ConfigError>(
        "{}: yarn original_max_position_embeddings, beta_fast, beta_slow and attention_factor "
        "must not be negative",
        field_src);
}

// One RoPE description: transformers < 5's "rope_scaling" or transformers >= 5's
// "rope_parameters" (which also carries rope_theta). `field` names it in errors. A type lmstack
// does not implement (dynamic, longrope, ...) is refused by name, never defaulted.
RopeScaling parse_rope_object(const Json& s, const std::string& field, const std::string& src) {
  RopeScaling r;
  if (!s.is_object()) throw_error<ConfigError>("{}: field '{}' must be an object", src, field);
  const std::string field_src = src + " " + field;
  r.type = optional<std::string>(s, "rope_type", optional<std::string>(s, "type", "", field_src),
                                 field_src);
  if (r.type.empty() || r.type == "default") {
    r.type = "default";
    return r;
  }
  if (r.type == "linear") {
    r.factor = require<float>(s, "factor", field_src);
  } else if (r.type == "llama3") {
    r.factor = require<float>(s, "factor", field_src);
    r.low_freq_factor = require<float>(s, "low_freq_factor", field_src);
    r.high_freq_factor = require<float>(s, "high_freq_factor", field_src);
    r.original_max_position = require<int>(s, "original_max_position_embeddings", field_src);
    if (r.high_freq_factor <= r.low_freq_factor)
      throw_error<ConfigError>("{}: high_freq_factor {} must exceed low_freq_factor {}", field_src,
                               r.high_freq_factor, r.low_freq_factor);
  } else if (r.type == "yarn") {
    parse_yarn(s, field_src, r);
  } else {
    throw_error<ConfigError>(
        "{}: field '{}.rope_type' is '{}', which lmstack does not implement (supported: default, "
        "linear, llama3, yarn)",
        src, field, r.type);
  }
  if (r.factor <= 0) throw_error<ConfigError>("{}: factor must be positive", field_src);
  return r;
}

// rope_theta and the scaling, from either layout: transformers >= 5 writes only
// "rope_parameters" {rope_theta, rope_type, factor, ...}; older versions a top-level
// "rope_theta" and "rope_scaling". rope_parameters wins where both are present, as in
// transformers 5 (it converts the legacy fields only when rope_parameters is absent).
}  // namespace
namespace detail {
void parse_rope(const Json& j, const std::string& src, ModelConfig& c) {
  c.rope_theta = optional<float>(j, "rope_theta", 10000.0f, src);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const Json& p = j["rope_parameters"];
    if (p.is_object() && (p.contains("full_attention") || p.contains("sliding_attention")))
      throw_error<ConfigError>(
          "{}: field 'rope_parameters' holds one set per layer type (Gemma-style), which lmstack "
          "does not implement for {}",
          src, c.architecture);
    c.rope_scaling = parse_rope_object(p, "rope_parameters", src);
    c.rope_theta = optional<float>(p, "rope_theta", c.rope_theta, src + " rope_parameters");
    return;
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    c.rope_scaling = parse_rope_object(j["rope_scaling"], "rope_scaling", src);
}
}  // namespace detail
namespace {

Json rope_scaling_json(const RopeScaling& r) {
  if (r.type == "default") return nullptr;
  Json s = {{"rope_type", r.type}, {"factor", r.factor}};
  if (r.type == "llama3") {
    s["low_freq_factor"] = r.low_freq_factor;
    s["high_freq_factor"] = r.high_freq_factor;
    s["original_max_position_embeddings"] = r.original_max_position;
  }
  if (r.type == "yarn") {
    if (r.original_max_position > 0)
      s["original_max_position_embeddings"] = r.original_max_position;
    const auto put = [&](const char* key, float v) {
      if (v != 0.0f) s[key] = v;
    };
    put("beta_fast", r.beta_fast);
    put("beta_slow", r.beta_slow);
    put("mscale", r.mscale);
    put("mscale_all_dim", r.mscale_all_dim);
    put("attention_factor", r.attention_factor);
    if (!r.truncate) s["truncate"] = false;
  }
  return s;
}

DType parse_torch_dtype(const Json& j, const std::string& src) {
  // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
  std::string name = optional<std::string>(j, "torch_dtype", "", src);
  if (name.empty()) name = optional<std::string>(j, "dtype", "float32", src);
  DType t;
  try {
    t = parse_dtype(name);
  } catch (const ConfigError&) {
    throw_error<ConfigError>("{}: torch_dtype '{}' is not float32, bfloat16 or float16", src, name);
  }
  if (!dtype_info(t).is_float || is_quantized(t))
    throw_error<ConfigError>("{}: torch_dtype '{}' is not float32, bfloat16 or float16", src, name);
  return t;
}

const char* torch_dtype_name(DType t) {
  if (t == DType::kBF16) return "bfloat16";
  if (t == DType::kF16) return "float16";
  return "float32";
}

// Fields shared by Llama, Mistral, Qwen2 and Qwen3 (transformers' LlamaConfig names).
}  // namespace
namespace detail {
void parse_llama_common(const Json& j, const std::string& src, ModelConfig& c) {
  c.vocab_size = require<int>(j, "vocab_size", src);
  c.hidden_size = require<int>(j, "hidden_size", src);
  c.intermediate_size = require<int>(j, "intermediate_size", src);
  c.num_layers = require<int>(j, "num_hidden_layers", src);
  c.num_heads = require<int>(j, "num_attention_heads", src);
  c.num_kv_heads = optional<int>(j, "num_key_value_heads", c.num_heads, src);
  c.max_position = optional<int>(j, "max_position_embeddings", 2048, src);
  c.norm_eps = optional<float>(j, "rms_norm_eps", 1e-6f, src);
  parse_rope(j, src, c);
  c.tie_word_embeddings = optional<bool>(j, "tie_word_embeddings", false, src);
  c.norm = NormKind::kRmsNorm;
  c.mlp = MlpKind::kSwiGlu;
  const std::string act = optional<std::string>(j, "hidden_act", "silu", src);
  if (act != "silu")
    throw_error<ConfigError>("{}: hidden_act '{}' is not supported (only silu)", src, act);
  if (optional<bool>(j, "mlp_bias", false, src))
    throw_error<ConfigError>("{}: mlp_bias true is not supported", src);
  const bool attention_bias = optional<bool>(j, "attention_bias", false, src);
  c.qkv_bias = attention_bias;
  c.o_bias = attention_bias;
}
}  // namespace detail
namespace {

void parse_llama(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama_common(j, src, c);
  c.head_dim = optional<int>(j, "head_dim", 0, src);
  // LlamaAttention has no sliding window: transformers ignores the field, and so do we.
}

// layer_types: one "full_attention" or "sliding_attention" per layer (transformers >= 4.54,
// Gemma-style configs). A sliding layer without a window is refused, as transformers cannot
// build its mask either.
void parse_layer_types(const Json& j, const std::string& src, ModelConfig& c) {
  const Json& t = j["layer_types"];
  if (!t.is_array() || static_cast<int>(t.size()) != c.num_layers)
    throw_error<ConfigError>("{}: field 'layer_types' must list one type per layer ({} layers)",
                             src, c.num_layers);
  for (size_t l = 0; l < t.size(); ++l) {
    const std::string type = t[l].is_string() ? t[l].get<std::string>() : "";
    if (type == "sliding_attention") {
      if (c.sliding_window <= 0)
        throw_error<ConfigError>(
            "{}: field 'layer_types' makes layer {} sliding_attention but no sliding_window is "
            "set (use_sliding_window false or sliding_window null)",
            src, l);
      c.layer_window[l] = c.sliding_window;
    } else if (type != "full_attention") {
      throw_error<ConfigError>(
          "{}: field 'layer_types'[{}] is '{}' (supported: full_attention, sliding_attention)", src,
          l, t[l].dump());
    }
  }
}

// "sliding_window" as transformers reads it: absent means the config class's default (4096
// for MistralConfig, Qwen2Config and Qwen3Config), null means none.
int window_field(const Json& j, const std::string& src) {
  if (!j.contains("sliding_window")) return 4096;
  return optional<int>(j, "sliding_window", 0, src);
}

void parse_mistral(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama(j, src, c);
  // MistralModel windows every layer; it ignores layer_types (transformers warns and suggests
  // Ministral), so lmstack does too.
  c.sliding_window = window_field(j, src);
}

// Qwen2/Qwen3: the window applies only with use_sliding_window, and then to the layers that
// layer_types calls "sliding_attention"; without layer_types, to layers >= max_window_layers
// (Qwen2Config.__post_init__ in transformers 4.57 and 5.x).
void parse_qwen_windows(const Json& j, const std::string& src, ModelConfig& c) {
  c.sliding_window = optional<bool>(j, "use_sliding_window", false, src) ? window_field(j, src) : 0;
  const int max_window_layers = optional<int>(j, "max_window_layers", 28, src);
  c.layer_window.assign(static_cast<size_t>(std::max(c.num_layers, 0)), 0);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    parse_layer_types(j, src, c);
    return;
  }
  // transformers tests i >= max_window_layers for every layer i, so a negative value windows
  // them all (and must not index below 0 here).
  for (int l = std::max(max_window_layers, 0); l < c.num_layers; ++l)
    c.layer_window[static_cast<size_t>(l)] = c.sliding_window;
}

void parse_qwen2(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama_common(j, src, c);
  c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj have bias=True, o_proj bias=False
  c.o_bias = false;
  c.head_dim = optional<int>(j, "head_dim", 0, src);  // read by transformers >= 4.48
  parse_qwen_windows(j, src, c);
}

void parse_qwen3(const Json& j, const std::string& src, ModelConfig& c) {
  parse_llama_common(j, src, c);
  c.qk_norm = true;
  c.head_dim = optional<int>(j, "head_dim", 128, src);  // Qwen3Config's default
  parse_qwen_windows(j, src, c);
}

void parse_gpt2(const Json& j, const std::string& src, ModelConfig& c) {
  c.vocab_size = require<int>(j, "vocab_size", src);
  c.hidden_size = require<int>(j, "n_embd", src);
  c.num_layers = require<int>(j, "n_layer", src);
  c.num_heads = require<int>(j, "n_head", src);
  c.num_kv_heads = c.num_heads;
  c.intermediate_size = optional<int>(j, "n_inner", 4 * c.hidden_size, src);
  c.max_position = require<int>(j, "n_positions", src);
  c.norm_eps = optional<float>(j, "layer_norm_epsilon", 1e-5f, src);
  c.tie_word_embeddings = optional<bool>(j, "tie_word_embeddings", true, src);
  const std::string act = optional<std::string>(j, "activation_function", "gelu_new", src);
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    throw_error<ConfigError>(
        "{}: activation_function '{}' is not supported (gelu_new, gelu_pytorch_tanh)", src, act);
  c.head_dim = 0;
  c.norm = NormKind::kLayerNorm;
  c.mlp = MlpKind::kGeluTanh;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.learned_positions = true;
  c.rope_theta = 0;
}

}  // namespace
namespace detail {
void write_llama_common(const ModelConfig& c, Json& j) {
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.qkv_bias && c.o_bias;
  j["mlp_bias"] = false;
}
}  // namespace detail
namespace {

void write_mistral(const ModelConfig& c, Json& j) {
  write_llama_common(c, j);
  j["sliding_window"] = c.sliding_window > 0 ? Json(c.sliding_window) : Json(nullptr);
}

void write_qwen(const ModelConfig& c, Json& j) {
  write_mistral(c, j);
  j["attention_bias"] = c.arch == Arch::kQwen2;
  j["use_sliding_window"] = c.sliding_window > 0;
  Json types = Json::array();
  int max_window_layers = c.num_layers;
  for (int l = c.num_layers - 1; l >= 0 && c.attention_window(l) > 0; --l) max_window_layers = l;
  for (int l = 0; l < c.num_layers; ++l)
    types.push_back(c.attention_window(l) > 0 ? "sliding_attention" : "full_attention");
  j["max_window_layers"] = max_window_layers;
  j["layer_types"] = types;
}

void write_gpt2(const ModelConfig& c, Json& j) {
  j["vocab_size"] = c.vocab_size;
  j["n_embd"] = c.hidden_size;
  j["n_layer"] = c.num_layers;
  j["n_head"] = c.num_heads;
  j["n_inner"] = c.intermediate_size;
  j["n_positions"] = c.max_position;
  j["n_ctx"] = c.max_position;
  j["layer_norm_epsilon"] = c.norm_eps;
  j["activation_function"] = "gelu_new";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
}

constexpr std::array<ArchEntry, 10> kArchs = {{
    {"LlamaForCausalLM", "llama", Arch::kLlama, parse_llama, write_llama_common},
    {"MistralForCausalLM", "mistral", Arch::kMistral, parse_mistral, write_mistral},
    {"Qwen2ForCausalLM", "qwen2", Arch::kQwen2, parse_qwen2, write_qwen},
    {"Qwen3ForCausalLM", "qwen3", Arch::kQwen3, parse_qwen3, write_qwen},
    {"GPT2LMHeadModel", "gpt2", Arch::kGpt2, parse_gpt2, write_gpt2},
    // Mixture of experts and latent attention (config_moe.cc).
    {"MixtralForCausalLM", "mixtral", Arch::kMixtral, detail::parse_mixtral, detail::write_mixtral},
    {"Qwen2MoeForCausalLM", "qwen2_moe", Arch::kQwen2Moe, detail::parse_qwen_moe,
     detail::write_qwen_moe},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Arch::kQwen3Moe, detail::parse_qwen_moe,
     detail::write_qwen_moe},
    {"DeepseekV2ForCausalLM", "deepseek_v2", Arch::kDeepseekV2, detail::parse_deepseek,
     detail::write_deepseek},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Arch::kDeepseekV3, detail::parse_deepseek,
     detail::write_deepseek},
}};
static_assert(kArchs.size() == static_cast<size_t>(Arch::kDeepseekV3) + 1, "one row per Arch");

const ArchEntry* find_arch(const std::string& class_name) {
  for (const ArchEntry& e : kArchs)
    if (class_name == e.class_name) return &e;
  return nullptr;
}

const ArchEntry& arch_entry(Arch a) { return kArchs[static_cast<size_t>(a)]; }

std::string architecture_name(const Json& j, const std::string& src) {
  if (!j.is_object()) throw_error<ConfigError>("{}: config is not a JSON object", src);
  if (!j.contains("architectures")) {
    // Old GPT-2 configs name only model_type.
    const std::string mt = optional<std::string>(j, "model_type", "", src);
    for (const ArchEntry& e : kArchs)
      if (mt == e.model_type) return e.class_name;
    throw_error<ConfigError>("{}: missing required field 'architectures'", src);
  }
  const Json& a = j["architectures"];
  if (!a.is_array() || a.size() != 1 || !a[0].is_string())
    throw_error<ConfigError>("{}: field 'architectures' must be a list of one class name", src);
  return a[0].get<std::string>();
}

void validate(const ModelConfig& c, const std::string& src) {
  auto positive = [&](int v, const char* field) {
    if (v <= 0) throw_error<ConfigError>("{}: field '{}' must be positive (got {})", src, field, v);
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.num_layers, "num_hidden_layers");
  positive(c.num_heads, "num_attention_heads");
  positive(c.num_kv_heads, "num_key_value_heads");
  positive(c.max_position, "max_position_embeddings");
  positive(c.head_dim, "head_dim");
  if (c.num_heads % c.num_kv_heads != 0)
    throw_error<ConfigError>("{}: num_key_value_heads {} does not divide num_attention_heads {}",
                             src, c.num_kv_heads, c.num_heads);
  if (c.rope_theta < 0 || (!c.learned_positions && c.rope_theta == 0))
    throw_error<ConfigError>("{}: rope_theta must be positive", src);
  if (!(c.norm_eps > 0)) throw_error<ConfigError>("{}: the norm epsilon must be positive", src);
  if (c.sliding_window < 0) throw_error<ConfigError>("{}: sliding_window must be >= 0", src);
  if (!c.layer_window.empty() && std::ssize(c.layer_window) != c.num_layers)
    throw_error<ConfigError>("{}: {} per-layer windows for {} layers", src, c.layer_window.size(),
                             c.num_layers);
  if (!c.learned_positions && c.head_dim % 2 != 0)
    throw_error<ConfigError>("{}: head_dim {} must be even for RoPE", src, c.head_dim);
  detail::validate_moe_mla(c, src);
}

}  // namespace

std::vector<std::string> known_architectures() {
  std::vector<std::string> names;
  for (const ArchEntry& e : kArchs) names.emplace_back(e.class_name);
  return names;
}

ModelConfig ModelConfig::from_json(const Json& j, const std::string& source) {
  const std::string name = architecture_name(j, source);
  const ArchEntry* entry = find_arch(name);
  if (entry == nullptr) {
    std::string known;
    for (const std::string& k : known_architectures()) known += (known.empty() ? "" : ", ") + k;
    throw_error<ConfigError>("{}: unknown architecture '{}' (known: {})", source, name, known);
  }
  ModelConfig c;
  c.architecture = name;
  c.arch = entry->arch;
  entry->parse(j, source, c);
  if (c.head_dim == 0) {
    if (c.num_heads <= 0)
      throw_error<ConfigError>("{}: field 'num_attention_heads' must be positive", source);
    if (c.hidden_size % c.num_heads != 0)
      throw_error<ConfigError>("{}: num_attention_heads {} does not divide hidden_size {}", source,
                               c.num_heads, c.hidden_size);
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.dtype = parse_torch_dtype(j, source);
  c.bos_token_id = optional<int>(j, "bos_token_id", -1, source);
  c.eos_token_ids = parse_eos(j, source);
  validate(c, source);
  return c;
}

Json ModelConfig::to_json() const {
  const ArchEntry& e = arch_entry(arch);
  Json j = Json::object();
  j["architectures"] = Json::array({e.class_name});
  j["model_type"] = e.model_type;
  e.write(*this, j);
  j["torch_dtype"] = torch_dtype_name(dtype);
  j["bos_token_id"] = bos_token_id >= 0 ? Json(bos_token_id) : Json(nullptr);
  if (eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else if (eos_token_ids.size() == 1)
    j["eos_token_id"] = eos_token_ids[0];
  else
    j["eos_token_id"] = eos_token_ids;
  return j;
}

int64_t ModelConfig::num_parameters() const {
  if (moe.enabled() || mla.enabled()) return detail::moe_mla_num_parameters(*this);
  const int64_t C = hidden_size, V = vocab_size, F = intermediate_size;
  const int64_t qd = q_dim(), kvd = kv_dim();
  const int64_t norm_params = norm == NormKind::kLayerNorm ? 2 * C : C;  // weight (+ bias)
  int64_t layer = 2 * norm_params + C * qd + 2 * C * kvd + qd * C;
  if (qkv_bias) layer += qd + 2 * kvd;
  if (o_bias) layer += C;
  if (qk_norm) layer += 2 * static_cast<int64_t>(head_dim);
  layer += mlp == MlpKind::kSwiGlu ? 3 * C * F : 2 * C * F;
  if (mlp_bias) layer += F + C;
  int64_t total = V * C + num_layers * layer + norm_params;
  if (learned_positions) total += static_cast<int64_t>(max_position) * C;
  if (!tie_word_embeddings) total += V * C;
  return total;
}

}  // namespace lmstack::model
