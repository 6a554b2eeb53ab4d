// Loading GGUF models (see gguf_model.h). The config is assembled as the Hugging Face
// config.json the file stands for and parsed by ModelConfig::from_json, so one set of checks
// covers both formats; GGUF keys are read first so a missing one is reported by its GGUF name.
// Tensor names follow llama.cpp's llm_arch tensor tables (llama-arch.cpp).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <set>

#include "lmstack/model/gguf_internal.h"
#include "lmstack/model/weights_internal.h"

namespace lmstack::model {
namespace {

struct GgufArch {
  const char* gguf_name;
  const char* class_name;
};
constexpr std::array<GgufArch, 4> kGgufArchs = {{{"llama", "LlamaForCausalLM"},
                                                 {"qwen2", "Qwen2ForCausalLM"},
                                                 {"qwen3", "Qwen3ForCausalLM"},
                                                 {"gpt2", "GPT2LMHeadModel"}}};

const GgufArch& find_arch(const GgufFile& f) {
  const std::string& name = f.get_string("general.architecture");
  for (const GgufArch& a : kGgufArchs)
    if (name == a.gguf_name) return a;
  throw_error<ConfigError>(
      "{}: general.architecture '{}' is not supported (supported: llama, qwen2, qwen3, gpt2, "
      "qwen2moe, qwen3moe, deepseek2)",
      f.path(), name);
}

std::string torch_dtype_of(const GgufFile& f) {
  const std::string probe = "blk.0.attn_output.weight";
  if (!f.has_tensor(probe)) return "float32";
  const uint32_t t = f.tensor_info(probe).ggml_type;
  if (t == ggml_type_of(DType::kF16)) return "float16";
  if (t == ggml_type_of(DType::kBF16)) return "bfloat16";
  return "float32";
}

// The shape-defining keys of the llama family, as config.json fields.
void llama_fields(const GgufFile& f, const std::string& a, Json& j) {
  const int64_t heads = f.get_int(a + ".attention.head_count");
  const int64_t hidden = f.get_int(a + ".embedding_length");
  j["hidden_size"] = hidden;
  j["intermediate_size"] = f.get_int(a + ".feed_forward_length");
  j["num_hidden_layers"] = f.get_int(a + ".block_count");
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = f.get_int(a + ".attention.head_count_kv", heads);
  j["max_position_embeddings"] = f.get_int(a + ".context_length");
  j["rms_norm_eps"] = f.get_float(a + ".attention.layer_norm_rms_epsilon");
  j["rope_theta"] = f.get_float(a + ".rope.freq_base", 10000.0);
  const int64_t head_dim = f.get_int(a + ".attention.key_length", heads > 0 ? hidden / heads : 0);
  if (f.get_int(a + ".attention.value_length", head_dim) != head_dim)
    throw_error<ConfigError>("{}: {}.attention.value_length differs from key_length {}", f.path(),
                             a, head_dim);
  if (f.get_int(a + ".rope.dimension_count", head_dim) != head_dim)
    throw_error<ConfigError>(
        "{}: {}.rope.dimension_count {} != head dim {} (partial rotary "
        "embeddings are not supported)",
        f.path(), a, f.get_int(a + ".rope.dimension_count"), head_dim);
  j["head_dim"] = head_dim;
  j["rope_scaling"] = gguf_detail::rope_scaling_from_gguf(f, a);
}

void gpt2_fields(const GgufFile& f, const std::string& a, Json& j) {
  j["n_embd"] = f.get_int(a + ".embedding_length");
  j["n_layer"] = f.get_int(a + ".block_count");
  j["n_head"] = f.get_int(a + ".attention.head_count");
  j["n_inner"] = f.get_int(a + ".feed_forward_length");
  j["n_positions"] = f.get_int(a + ".context_length");
  j["layer_norm_epsilon"] = f.get_float(a + ".attention.layer_norm_epsilon");
}

// The window keys gguf_write.cc writes: the window, and an optional per-layer bool pattern.
void read_sliding_window(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const int64_t window = f.get_int(a + ".attention.sliding_window", 0);
  if (window < 0 || window > INT32_MAX)
    throw_error<FormatError>("{}: {}.attention.sliding_window {} is out of range", f.path(), a,
                             window);
  c.sliding_window = static_cast<int>(window);
  c.layer_window.clear();
  const std::string key = a + ".attention.sliding_window_pattern";
  if (!f.has(key)) return;
  const std::vector<int64_t>& pattern = f.get_ints(key);
  if (std::ssize(pattern) != c.num_layers)
    throw_error<FormatError>("{}: {} has {} entries for {} layers", f.path(), key, pattern.size(),
                             c.num_layers);
  for (int64_t on : pattern) c.layer_window.push_back(on != 0 ? c.sliding_window : 0);
}

int64_t vocab_rows(const GgufFile& f) {
  const GgufTensorInfo& e = f.tensor_info("token_embd.weight");
  if (e.ne.size() != 2)
    throw_error<FormatError>("{}: tensor 'token_embd.weight' has {} dims, expected 2", f.path(),
                             e.ne.size());
  return e.ne[1];
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const bool moe = gguf_detail::is_moe_gguf(f);  // names its class in moe_config_fields
  const std::string a = moe ? f.get_string("general.architecture") : find_arch(f).gguf_name;
  Json j = {{"torch_dtype", torch_dtype_of(f)}};
  if (!moe) j["architectures"] = {find_arch(f).class_name};
  j["vocab_size"] = vocab_rows(f);
  j["tie_word_embeddings"] = !f.has_tensor("output.weight");
  if (moe)
    gguf_detail::moe_config_fields(f, j);
  else if (a == "gpt2")
    gpt2_fields(f, a, j);
  else
    llama_fields(f, a, j);
  if (f.has("tokenizer.ggml.bos_token_id"))
    j["bos_token_id"] = f.get_int("tokenizer.ggml.bos_token_id");
  if (f.has("tokenizer.ggml.eos_token_id"))
    j["eos_token_id"] = f.get_int("tokenizer.ggml.eos_token_id");
  ModelConfig c = ModelConfig::from_json(j, f.path());
  read_sliding_window(f, a, c);
  if (c.arch == Arch::kLlama || c.arch == Arch::kMixtral) {  // llama.cpp's llama: optional biases
    c.qkv_bias = f.has_tensor("blk.0.attn_q.bias");
    c.o_bias = f.has_tensor("blk.0.attn_output.bias");
  }
  if (f.has_tensor("rope_freqs.weight")) {
    if (c.arch == Arch::kGpt2 || c.rope_scaling.type != "default")
      throw_error<ConfigError>("{}: rope_freqs.weight together with {} is not supported", f.path(),
                               c.arch == Arch::kGpt2 ? "gpt2" : "rope scaling keys");
    const std::vector<float> factors = f.tensor("rope_freqs.weight").to_f32_vector();
    c.rope_scaling =
        detail::llama3_scaling_from_factors(factors, c.head_dim, c.rope_theta, f.path());
  }
  return c;
}

namespace gguf_detail {

Tensor TensorSource::matrix(const std::string& name, const Shape& shape) {
  Tensor t = fetch(name, shape);
  if (t.rank() != 2) throw_error<FormatError>("{}: tensor '{}' is not a matrix", f_.path(), name);
  return t;
}

Tensor TensorSource::small(const std::string& name, const Shape& shape) {
  Tensor t = fetch(name, shape);
  if (is_quantized(t.dtype()))
    throw_error<FormatError>("{}: tensor '{}' is {}; norms, biases and routers must be float",
                             f_.path(), name, dtype_name(t.dtype()));
  return t.dtype() == DType::kF32 ? t
                                  : detail::convert_float(t, DType::kF32, MemoryCategory::kWeights);
}

void TensorSource::check_all_used(const std::string& arch) const {
  for (const GgufTensorInfo& t : f_.tensors())
    if (!used_.count(t.name))
      throw_error<FormatError>("{}: tensor '{}' is not part of a {} model with this config",
                               f_.path(), t.name, arch);
}

Tensor TensorSource::fetch(const std::string& name, const Shape& shape) {
  if (!f_.has_tensor(name)) throw_error<FormatError>("{}: missing tensor '{}'", f_.path(), name);
  const Shape got = f_.tensor_info(name).shape();
  if (!(got == shape))
    throw_error<FormatError>(
        "{}: tensor '{}' has shape {} (ne reversed) but the metadata implies {}", f_.path(), name,
        got.str(), shape.str());
  used_.insert(name);
  return f_.tensor(name);
}

void load_llama_attention(const ModelConfig& c, TensorSource& src, int i, bool permuted,
                          LayerWeights& l) {
  const int64_t C = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim();
  l.wq = src.matrix(blk(i, "attn_q.weight"), Shape{Q, C});
  l.wk = src.matrix(blk(i, "attn_k.weight"), Shape{KV, C});
  l.wv = src.matrix(blk(i, "attn_v.weight"), Shape{KV, C});
  l.wo = src.matrix(blk(i, "attn_output.weight"), Shape{C, Q});
  if (c.qkv_bias) {
    l.bq = src.small(blk(i, "attn_q.bias"), Shape{Q});
    l.bk = src.small(blk(i, "attn_k.bias"), Shape{KV});
    l.bv = src.small(blk(i, "attn_v.bias"), Shape{KV});
  }
  if (c.o_bias) l.bo = src.small(blk(i, "attn_output.bias"), Shape{C});
  if (c.qk_norm) {
    l.q_norm = src.small(blk(i, "attn_q_norm.weight"), Shape{c.head_dim});
    l.k_norm = src.small(blk(i, "attn_k_norm.weight"), Shape{c.head_dim});
  }
  if (permuted) {
    // The copies replace the mapped originals, which are not read again: their pages leave the
    // resident set and the ledger (as model/repack.cc does), so Q and K are not held twice
    // (they were: weights 10% above calc's prediction for llama GGUF files).
    const auto unpermute = [](Tensor& t, int heads) {
      const Tensor mapped = t;
      t = detail::permute_rope_rows(mapped, heads, true);
      mapped.drop_mapped_pages();
    };
    unpermute(l.wq, c.num_heads);
    unpermute(l.wk, c.num_kv_heads);
    if (l.bq.defined()) unpermute(l.bq, c.num_heads);
    if (l.bk.defined()) unpermute(l.bk, c.num_kv_heads);
  }
}

void load_dense_mlp(const ModelConfig& c, TensorSource& src, int i, int64_t F, LayerWeights& l) {
  const int64_t C = c.hidden_size;
  l.w_gate = src.matrix(blk(i, "ffn_gate.weight"), Shape{F, C});
  l.w_up = src.matrix(blk(i, "ffn_up.weight"), Shape{F, C});
  l.w_down = src.matrix(blk(i, "ffn_down.weight"), Shape{C, F});
}

}  // namespace gguf_detail

namespace {

using gguf_detail::blk;
using gguf_detail::TensorSource;

void load_llama_layer(const ModelConfig& c, TensorSource& src, int i, bool permuted,
                      LayerWeights& l) {
  const int64_t C = c.hidden_size;
  l.attn_norm = src.small(blk(i, "attn_norm.weight"), Shape{C});
  if (c.moe.enabled() || c.mla.enabled()) {
    gguf_detail::load_moe_mla_layer(c, src, i, permuted, l);
  } else {
    gguf_detail::load_llama_attention(c, src, i, permuted, l);
    l.mlp_norm = src.small(blk(i, "ffn_norm.weight"), Shape{C});
    gguf_detail::load_dense_mlp(c, src, i, c.intermediate_size, l);
  }
}

void load_gpt2_layer(const ModelConfig& c, TensorSource& src, int i, LayerWeights& l) {
  const int64_t C = c.hidden_size, F = c.intermediate_size;
  l.attn_norm = src.small(blk(i, "attn_norm.weight"), Shape{C});
  l.attn_norm_bias = src.small(blk(i, "attn_norm.bias"), Shape{C});
  const Tensor qkv = src.matrix(blk(i, "attn_qkv.weight"), Shape{3 * C, C});
  l.wq = qkv.slice(0, C);
  l.wk = qkv.slice(C, 2 * C);
  l.wv = qkv.slice(2 * C, 3 * C);
  const Tensor bqkv = src.small(blk(i, "attn_qkv.bias"), Shape{3 * C});
  l.bq = bqkv.slice(0, C);
  l.bk = bqkv.slice(C, 2 * C);
  l.bv = bqkv.slice(2 * C, 3 * C);
  l.wo = src.matrix(blk(i, "attn_output.weight"), Shape{C, C});
  l.bo = src.small(blk(i, "attn_output.bias"), Shape{C});
  l.mlp_norm = src.small(blk(i, "ffn_norm.weight"), Shape{C});
  l.mlp_norm_bias = src.small(blk(i, "ffn_norm.bias"), Shape{C});
  l.w_up = src.matrix(blk(i, "ffn_up.weight"), Shape{F, C});
  l.b_up = src.small(blk(i, "ffn_up.bias"), Shape{F});
  l.w_down = src.matrix(blk(i, "ffn_down.weight"), Shape{C, F});
  l.b_down = src.small(blk(i, "ffn_down.bias"), Shape{C});
}

}  // namespace

ModelWeights load_gguf_weights(const ModelConfig& c, const GgufFile& f) {
  const int64_t V = c.vocab_size, C = c.hidden_size;
  const bool gpt2 = c.arch == Arch::kGpt2;
  const bool permuted = f.get_string("general.architecture") == "llama";
  TensorSource src(f);
  ModelWeights w;
  w.embed = src.matrix("token_embd.weight", Shape{V, C});
  if (gpt2) w.pos_embed = src.matrix("position_embd.weight", Shape{c.max_position, C});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    if (gpt2)
      load_gpt2_layer(c, src, i, l);
    else
      load_llama_layer(c, src, i, permuted, l);
  }
  w.final_norm = src.small("output_norm.weight", Shape{C});
  if (gpt2) w.final_norm_bias = src.small("output_norm.bias", Shape{C});
  w.lm_head = c.tie_word_embeddings ? w.embed : src.matrix("output.weight", Shape{V, C});
  if (src.has("rope_freqs.weight")) src.mark_used("rope_freqs.weight");  // read by the config
  src.check_all_used(f.get_string("general.architecture"));
  return w;
}

ModelDir load_gguf_model(const std::string& path) {
  const GgufFile file(path);
  ModelDir m;
  m.path = path;
  m.config = gguf_model_config(file);
  m.weights = load_gguf_weights(m.config, file);
  m.tokenizer_path = path;
  return m;
}

namespace detail {

Tensor permute_rope_rows(const Tensor& t, int heads, bool to_hf) {
  const int64_t rows = t.dim(0);
  LMSTACK_CHECK(heads > 0 && rows % (2 * heads) == 0, "permute_rope_rows: {} rows, {} heads", rows,
                heads);
  const Tensor src = t.rank() == 1 ? t.reshape(Shape{rows, 1}) : t;
  Tensor out = Tensor::zeros(src.shape(), src.dtype(), MemoryCategory::kWeights);
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  const auto row_bytes = static_cast<size_t>(src.row_bytes());
  const auto* in = static_cast<const uint8_t*>(src.raw_data());
  auto* o = static_cast<uint8_t*>(out.raw_data());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t hf_row = h * head_dim + j * half + i;
        const int64_t gguf_row = h * head_dim + 2 * i + j;
        const int64_t from = to_hf ? gguf_row : hf_row, to = to_hf ? hf_row : gguf_row;
        std::memcpy(o + to * row_bytes, in + from * row_bytes, row_bytes);
      }
  return t.rank() == 1 ? out.reshape(t.shape()) : out;
}

}  // namespace detail
}  // namespace lmstack::model
