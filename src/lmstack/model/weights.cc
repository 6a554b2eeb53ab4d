// Weight loading and export for the llama family (Llama, Mistral, Qwen2, Qwen3), plus the
// helpers every architecture shares (weights_internal.h). HF names: model.embed_tokens,
// model.layers.{i}.{input_layernorm, self_attn.{q,k,v,o}_proj, self_attn.{q,k}_norm,
// post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head. One table row per
// per-layer tensor drives specs, loading and export alike.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "lmstack/core/half.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/weights_internal.h"

namespace lmstack::model {
namespace detail {
namespace {

// Matrices may also be block-quantized (safetensors.h: U8 bytes named in the metadata).
void check_float(const SafetensorsSet& tensors, const std::string& name, bool allow_quantized) {
  const SafetensorsFile& f = tensors.file_of(name);
  const SafetensorsEntry& e = f.entry(name);
  const bool quantized = e.has_dtype && is_quantized(e.dtype);
  if (!e.has_dtype || !(dtype_info(e.dtype).is_float || (allow_quantized && quantized)))
    throw_error<FormatError>("{}: tensor '{}': dtype {}{} is not allowed for {} (F32, BF16{})",
                             f.path(), name, e.dtype_name,
                             quantized ? fmt::format(" ({})", dtype_name(e.dtype)) : "",
                             allow_quantized ? "weights" : "norms and biases",
                             allow_quantized ? ", F16 or a quantized dtype" : " or F16");
  if (e.shape.size() > static_cast<size_t>(kMaxDims))
    throw_error<FormatError>("{}: tensor '{}': rank {} exceeds {}", f.path(), name, e.shape.size(),
                             kMaxDims);
}

void check_shape(const SafetensorsSet& tensors, const std::string& name, const Shape& want) {
  const SafetensorsFile& f = tensors.file_of(name);
  const Shape got(f.entry(name).shape);
  if (!(got == want))
    throw_error<FormatError>("{}: tensor '{}' has shape {} but config.json implies {}", f.path(),
                             name, got.str(), want.str());
}

}  // namespace

Tensor fetch_matrix(const SafetensorsSet& tensors, const std::string& name, const Shape& shape) {
  check_float(tensors, name, /*allow_quantized=*/true);
  check_shape(tensors, name, shape);
  return tensors.tensor(name);
}

Tensor fetch_small(const SafetensorsSet& tensors, const std::string& name, const Shape& shape) {
  check_float(tensors, name, /*allow_quantized=*/false);
  check_shape(tensors, name, shape);
  Tensor t = tensors.tensor(name);
  return t.dtype() == DType::kF32 ? t : convert_float(t, DType::kF32, MemoryCategory::kWeights);
}

void check_layer_count(const SafetensorsSet& tensors, const std::string& prefix, int num_layers) {
  for (const std::string& name : tensors.names()) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    if (index.empty() ||
        !std::all_of(index.begin(), index.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      continue;
    if (index.size() > 6 || std::stoi(index) >= num_layers)
      throw_error<FormatError>("{}: tensor '{}' but config.json has only {} layers",
                               tensors.file_of(name).path(), name, num_layers);
  }
}

Tensor convert_float(const Tensor& t, DType to, MemoryCategory category) {
  if (t.dtype() == to) return t.clone(category);
  Tensor out = Tensor::zeros(t.shape(), to, category);
  const int64_t n = t.numel();
  std::vector<float> tmp;
  const float* f32 = nullptr;
  if (t.dtype() == DType::kF32) {
    f32 = t.data<float>();
  } else {
    tmp.resize(static_cast<size_t>(n));
    LMSTACK_CHECK(t.dtype() == DType::kBF16 || t.dtype() == DType::kF16, "convert from {}",
                  dtype_name(t.dtype()));
    if (t.dtype() == DType::kBF16)
      convert_bf16_to_f32(t.data<uint16_t>(), tmp.data(), n);
    else
      convert_f16_to_f32(t.data<uint16_t>(), tmp.data(), n);
    f32 = tmp.data();
  }
  if (to == DType::kF32)
    std::memcpy(out.data<float>(), f32, static_cast<size_t>(n) * sizeof(float));
  else if (to == DType::kBF16)
    convert_f32_to_bf16(f32, out.data<uint16_t>(), n);
  else if (to == DType::kF16)
    convert_f32_to_f16(f32, out.data<uint16_t>(), n);
  else
    LMSTACK_CHECK(false, "convert to {}", dtype_name(to));
  return out;
}

namespace {
// Cache-blocked transpose of fixed-size elements (Elem is uint16_t or uint32_t).
template <class Elem>
void transpose_blocked(const Elem* src, Elem* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kBlock = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock)
      for (int64_t r = r0; r < std::min(rows, r0 + kBlock); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kBlock); ++c)
          dst[c * rows + r] = src[r * cols + c];
}
}  // namespace

Tensor transpose_2d(const Tensor& t, MemoryCategory category) {
  LMSTACK_CHECK(t.rank() == 2, "transpose_2d of {}", t.shape().str());
  const int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out = Tensor::zeros(Shape{cols, rows}, t.dtype(), category);
  const int elem = dtype_info(t.dtype()).block_bytes;
  if (elem == 4)
    transpose_blocked(t.data<uint32_t>(), out.data<uint32_t>(), rows, cols);
  else if (elem == 2)
    transpose_blocked(t.data<uint16_t>(), out.data<uint16_t>(), rows, cols);
  else
    LMSTACK_CHECK(false, "transpose_2d of {}", dtype_name(t.dtype()));
  return out;
}

}  // namespace detail

namespace {

enum class Kind : uint8_t { kMatrix, kNorm, kBias };

// One per-layer tensor of the llama family: HF suffix, where it goes, its shape, and whether
// the config has it.
struct LayerField {
  const char* suffix;
  Tensor LayerWeights::*member;
  Kind kind;
  Shape (*shape)(const ModelConfig& c);
  bool (*present)(const ModelConfig& c);
};

bool always(const ModelConfig&) { return true; }
bool has_qkv_bias(const ModelConfig& c) { return c.qkv_bias; }
bool has_o_bias(const ModelConfig& c) { return c.o_bias; }
bool has_qk_norm(const ModelConfig& c) { return c.qk_norm; }
Shape hidden(const ModelConfig& c) { return Shape{c.hidden_size}; }
Shape head(const ModelConfig& c) { return Shape{c.head_dim}; }
Shape q_out(const ModelConfig& c) { return Shape{c.q_dim()}; }
Shape kv_out(const ModelConfig& c) { return Shape{c.kv_dim()}; }
Shape q_mat(const ModelConfig& c) { return Shape{c.q_dim(), c.hidden_size}; }
Shape kv_mat(const ModelConfig& c) { return Shape{c.kv_dim(), c.hidden_size}; }
Shape o_mat(const ModelConfig& c) { return Shape{c.hidden_size, c.q_dim()}; }
Shape up_mat(const ModelConfig& c) { return Shape{c.intermediate_size, c.hidden_size}; }
Shape down_mat(const ModelConfig& c) { return Shape{c.hidden_size, c.intermediate_size}; }

constexpr std::array<LayerField, 15> kLlamaLayer = {{
    {"input_layernorm.weight", &LayerWeights::attn_norm, Kind::kNorm, hidden, always},
    {"self_attn.q_proj.weight", &LayerWeights::wq, Kind::kMatrix, q_mat, always},
    {"self_attn.q_proj.bias", &LayerWeights::bq, Kind::kBias, q_out, has_qkv_bias},
    {"self_attn.k_proj.weight", &LayerWeights::wk, Kind::kMatrix, kv_mat, always},
    {"self_attn.k_proj.bias", &LayerWeights::bk, Kind::kBias, kv_out, has_qkv_bias},
    {"self_attn.v_proj.weight", &LayerWeights::wv, Kind::kMatrix, kv_mat, always},
    {"self_attn.v_proj.bias", &LayerWeights::bv, Kind::kBias, kv_out, has_qkv_bias},
    {"self_attn.o_proj.weight", &LayerWeights::wo, Kind::kMatrix, o_mat, always},
    {"self_attn.o_proj.bias", &LayerWeights::bo, Kind::kBias, hidden, has_o_bias},
    {"self_attn.q_norm.weight", &LayerWeights::q_norm, Kind::kNorm, head, has_qk_norm},
    {"self_attn.k_norm.weight", &LayerWeights::k_norm, Kind::kNorm, head, has_qk_norm},
    {"post_attention_layernorm.weight", &LayerWeights::mlp_norm, Kind::kNorm, hidden, always},
    {"mlp.gate_proj.weight", &LayerWeights::w_gate, Kind::kMatrix, up_mat, always},
    {"mlp.up_proj.weight", &LayerWeights::w_up, Kind::kMatrix, up_mat, always},
    {"mlp.down_proj.weight", &LayerWeights::w_down, Kind::kMatrix, down_mat, always},
}};

// False for the rows that MLA attention or a sparse layer's MoE block replace (weights_moe.cc).
bool in_table(const ModelConfig& c, int i, const LayerField& f) {
  const std::string_view s = f.suffix;
  if (c.mla.enabled() && s.starts_with("self_attn.")) return false;
  return !(c.moe.is_sparse(i) && s.starts_with("mlp."));
}

std::string layer_name(int i, const LayerField& f) {
  return "model.layers." + std::to_string(i) + "." + f.suffix;
}

std::vector<HfTensorSpec> llama_tensor_specs(const ModelConfig& c) {
  const int64_t V = c.vocab_size, C = c.hidden_size;
  std::vector<HfTensorSpec> specs = {{"model.embed_tokens.weight", Shape{V, C}}};
  for (int i = 0; i < c.num_layers; ++i) {
    for (const LayerField& f : kLlamaLayer)
      if (f.present(c) && in_table(c, i, f))
        specs.push_back(
            {layer_name(i, f), f.shape(c), f.kind == Kind::kNorm, f.kind == Kind::kBias});
    detail::append_moe_mla_specs(c, i, specs);
  }
  specs.push_back({"model.norm.weight", Shape{C}, true, false});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", Shape{V, C}});
  return specs;
}

ModelWeights load_llama_weights(const ModelConfig& c, const SafetensorsSet& tensors) {
  const int64_t V = c.vocab_size, C = c.hidden_size;
  detail::check_layer_count(tensors, "model.layers.", c.num_layers);
  ModelWeights w;
  w.embed = detail::fetch_matrix(tensors, "model.embed_tokens.weight", Shape{V, C});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    for (const LayerField& f : kLlamaLayer) {
      if (!f.present(c) || !in_table(c, i, f)) continue;
      l.*f.member = f.kind == Kind::kMatrix
                        ? detail::fetch_matrix(tensors, layer_name(i, f), f.shape(c))
                        : detail::fetch_small(tensors, layer_name(i, f), f.shape(c));
    }
    detail::load_moe_mla_layer(c, tensors, i, l);
  }
  w.final_norm = detail::fetch_small(tensors, "model.norm.weight", Shape{C});
  // An explicit lm_head wins over tying (a quantized model may keep a higher-precision
  // embedding table and a separately quantized output projection).
  const bool tied = c.tie_word_embeddings && !tensors.contains("lm_head.weight");
  w.lm_head = tied ? w.embed : detail::fetch_matrix(tensors, "lm_head.weight", Shape{V, C});
  return w;
}

Tensor small_as(const Tensor& t, DType dtype) {
  return t.dtype() == dtype ? t : detail::convert_float(t, dtype, MemoryCategory::kBuffers);
}

std::vector<std::pair<std::string, Tensor>> llama_to_hf(const ModelConfig& c, const ModelWeights& w,
                                                        DType small) {
  std::vector<std::pair<std::string, Tensor>> out = {{"model.embed_tokens.weight", w.embed}};
  for (int i = 0; i < c.num_layers; ++i) {
    for (const LayerField& f : kLlamaLayer) {
      if (!f.present(c) || !in_table(c, i, f)) continue;
      const Tensor& t = w.layers[static_cast<size_t>(i)].*f.member;
      out.emplace_back(layer_name(i, f), f.kind == Kind::kMatrix ? t : small_as(t, small));
    }
    detail::moe_mla_layer_to_hf(c, w.layers[static_cast<size_t>(i)], i, small, out);
  }
  out.emplace_back("model.norm.weight", small_as(w.final_norm, small));
  if (!c.tie_word_embeddings) out.emplace_back("lm_head.weight", w.lm_head);
  return out;
}

}  // namespace

std::shared_ptr<MoeLayerWeights> clone_handles(const MoeLayerWeights& w) {
  return std::make_shared<MoeLayerWeights>(w);
}

std::shared_ptr<MlaLayerWeights> clone_handles(const MlaLayerWeights& w) {
  return std::make_shared<MlaLayerWeights>(w);
}

int64_t ModelWeights::bytes() const {
  // Tied or split tensors share storage; distinct (address, size) pairs count once.
  std::map<const void*, int64_t> seen;
  auto add = [&](const Tensor& t) {
    if (!t.defined() || t.nbytes() == 0) return;
    int64_t& b = seen[t.raw_data()];
    b = std::max(b, t.nbytes());
  };
  for (const Tensor* t : {&embed, &pos_embed, &final_norm, &final_norm_bias, &lm_head}) add(*t);
  for (const LayerWeights& l : layers) {
    for (const Tensor* t : {&l.attn_norm, &l.attn_norm_bias, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq,
                            &l.bk, &l.bv, &l.bo, &l.q_norm, &l.k_norm, &l.mlp_norm,
                            &l.mlp_norm_bias, &l.w_gate, &l.w_up, &l.w_down, &l.b_up, &l.b_down})
      add(*t);
    if (l.moe)
      for (const Tensor* t : l.moe->tensors()) add(*t);
    if (l.mla)
      for (const Tensor* t : l.mla->tensors()) add(*t);
  }
  int64_t total = 0;
  for (const auto& [ptr, b] : seen) total += b;
  return total;
}

std::vector<HfTensorSpec> hf_tensor_specs(const ModelConfig& config) {
  return config.arch == Arch::kGpt2 ? detail::gpt2_tensor_specs(config)
                                    : llama_tensor_specs(config);
}

ModelWeights load_weights(const ModelConfig& config, const SafetensorsSet& tensors) {
  return config.arch == Arch::kGpt2 ? detail::load_gpt2_weights(config, tensors)
                                    : load_llama_weights(config, tensors);
}

std::vector<std::pair<std::string, Tensor>> to_hf_tensors(const ModelConfig& config,
                                                          const ModelWeights& weights,
                                                          DType small_dtype) {
  return config.arch == Arch::kGpt2 ? detail::gpt2_to_hf_tensors(config, weights, small_dtype)
                                    : llama_to_hf(config, weights, small_dtype);
}

}  // namespace lmstack::model
