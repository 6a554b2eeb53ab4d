// GPT-2 weight loading and export. HF's GPT-2 uses Conv1D, whose weight is [in, out]
// (y = x W + b), with q, k and v fused in c_attn [C, 3C]; ModelWeights wants nn.Linear's
// [out, in]. Loading transposes each Conv1D weight once (allocated under kWeights) and splits
// c_attn into row views wq/wk/wv; export does the reverse, so written checkpoints load in
// transformers. Names: [transformer.]{wte, wpe, h.{i}.{ln_1, attn.c_attn, attn.c_proj, ln_2,
// mlp.c_fc, mlp.c_proj}, ln_f}; openai-community/gpt2's own file has no "transformer." prefix.
#include <cstring>

#include "lmstack/model/weights_internal.h"

namespace lmstack::model::detail {
namespace {

constexpr const char* kPrefix = "transformer.";

std::string gpt2_prefix(const SafetensorsSet& tensors) {
  if (tensors.contains("transformer.wte.weight")) return kPrefix;
  if (tensors.contains("wte.weight")) return "";
  return kPrefix;  // the fetch of transformer.wte.weight reports it missing
}

std::string layer_prefix(const std::string& p, int i) { return p + "h." + std::to_string(i) + "."; }

void load_layer(const ModelConfig& c, const SafetensorsSet& t, const std::string& h,
                LayerWeights& l) {
  const int64_t C = c.hidden_size, F = c.intermediate_size;
  constexpr MemoryCategory kW = MemoryCategory::kWeights;
  l.attn_norm = fetch_small(t, h + "ln_1.weight", Shape{C});
  l.attn_norm_bias = fetch_small(t, h + "ln_1.bias", Shape{C});
  const Tensor qkv = transpose_2d(fetch_matrix(t, h + "attn.c_attn.weight", Shape{C, 3 * C}), kW);
  l.wq = qkv.slice(0, C);
  l.wk = qkv.slice(C, 2 * C);
  l.wv = qkv.slice(2 * C, 3 * C);
  const Tensor bqkv = fetch_small(t, h + "attn.c_attn.bias", Shape{3 * C});
  l.bq = bqkv.slice(0, C);
  l.bk = bqkv.slice(C, 2 * C);
  l.bv = bqkv.slice(2 * C, 3 * C);
  l.wo = transpose_2d(fetch_matrix(t, h + "attn.c_proj.weight", Shape{C, C}), kW);
  l.bo = fetch_small(t, h + "attn.c_proj.bias", Shape{C});
  l.mlp_norm = fetch_small(t, h + "ln_2.weight", Shape{C});
  l.mlp_norm_bias = fetch_small(t, h + "ln_2.bias", Shape{C});
  l.w_up = transpose_2d(fetch_matrix(t, h + "mlp.c_fc.weight", Shape{C, F}), kW);
  l.b_up = fetch_small(t, h + "mlp.c_fc.bias", Shape{F});
  l.w_down = transpose_2d(fetch_matrix(t, h + "mlp.c_proj.weight", Shape{F, C}), kW);
  l.b_down = fetch_small(t, h + "mlp.c_proj.bias", Shape{C});
}

// [r_k, C] row blocks (nn.Linear layout) -> one Conv1D weight [C, sum r_k].
Tensor to_conv1d(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(0);
  const int64_t cols = parts[0].dim(1);
  Tensor cat = Tensor::zeros(Shape{rows, cols}, parts[0].dtype(), MemoryCategory::kBuffers);
  auto* dst = static_cast<uint8_t*>(cat.raw_data());
  for (const Tensor& p : parts) {
    LMSTACK_CHECK(p.dtype() == cat.dtype() && p.dim(1) == cols, "to_conv1d: {} vs {}", p.summary(),
                  cat.summary());
    std::memcpy(dst, p.raw_data(), static_cast<size_t>(p.nbytes()));
    dst += p.nbytes();
  }
  return transpose_2d(cat, MemoryCategory::kBuffers);
}

// 1-D f32 pieces -> one vector in `dtype`.
Tensor concat_small(const std::vector<Tensor>& parts, DType dtype) {
  std::vector<float> all;
  for (const Tensor& p : parts) {
    const std::vector<float> v = p.to_f32_vector();
    all.insert(all.end(), v.begin(), v.end());
  }
  const Tensor f32 =
      Tensor::from_f32(Shape{static_cast<int64_t>(all.size())}, all, MemoryCategory::kBuffers);
  return dtype == DType::kF32 ? f32 : convert_float(f32, dtype, MemoryCategory::kBuffers);
}

}  // namespace

std::vector<HfTensorSpec> gpt2_tensor_specs(const ModelConfig& c) {
  const int64_t V = c.vocab_size, C = c.hidden_size, F = c.intermediate_size;
  const std::string p = kPrefix;
  std::vector<HfTensorSpec> s = {{p + "wte.weight", Shape{V, C}},
                                 {p + "wpe.weight", Shape{c.max_position, C}}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string h = layer_prefix(p, i);
    s.push_back({h + "ln_1.weight", Shape{C}, true, false});
    s.push_back({h + "ln_1.bias", Shape{C}, true, true});
    s.push_back({h + "attn.c_attn.weight", Shape{C, 3 * C}});
    s.push_back({h + "attn.c_attn.bias", Shape{3 * C}, false, true});
    s.push_back({h + "attn.c_proj.weight", Shape{C, C}});
    s.push_back({h + "attn.c_proj.bias", Shape{C}, false, true});
    s.push_back({h + "ln_2.weight", Shape{C}, true, false});
    s.push_back({h + "ln_2.bias", Shape{C}, true, true});
    s.push_back({h + "mlp.c_fc.weight", Shape{C, F}});
    s.push_back({h + "mlp.c_fc.bias", Shape{F}, false, true});
    s.push_back({h + "mlp.c_proj.weight", Shape{F, C}});
    s.push_back({h + "mlp.c_proj.bias", Shape{C}, false, true});
  }
  s.push_back({p + "ln_f.weight", Shape{C}, true, false});
  s.push_back({p + "ln_f.bias", Shape{C}, true, true});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", Shape{V, C}});
  return s;
}

ModelWeights load_gpt2_weights(const ModelConfig& c, const SafetensorsSet& tensors) {
  const int64_t V = c.vocab_size, C = c.hidden_size;
  const std::string p = gpt2_prefix(tensors);
  check_layer_count(tensors, p + "h.", c.num_layers);
  ModelWeights w;
  w.embed = fetch_matrix(tensors, p + "wte.weight", Shape{V, C});
  w.pos_embed = fetch_matrix(tensors, p + "wpe.weight", Shape{c.max_position, C});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i)
    load_layer(c, tensors, layer_prefix(p, i), w.layers[static_cast<size_t>(i)]);
  w.final_norm = fetch_small(tensors, p + "ln_f.weight", Shape{C});
  w.final_norm_bias = fetch_small(tensors, p + "ln_f.bias", Shape{C});
  w.lm_head =
      c.tie_word_embeddings ? w.embed : fetch_matrix(tensors, "lm_head.weight", Shape{V, C});
  return w;
}

std::vector<std::pair<std::string, Tensor>> gpt2_to_hf_tensors(const ModelConfig& c,
                                                               const ModelWeights& w, DType small) {
  const std::string p = kPrefix;
  auto sm = [&](const Tensor& t) { return concat_small({t}, small); };
  std::vector<std::pair<std::string, Tensor>> out = {{p + "wte.weight", w.embed},
                                                     {p + "wpe.weight", w.pos_embed}};
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string h = layer_prefix(p, i);
    out.emplace_back(h + "ln_1.weight", sm(l.attn_norm));
    out.emplace_back(h + "ln_1.bias", sm(l.attn_norm_bias));
    out.emplace_back(h + "attn.c_attn.weight", to_conv1d({l.wq, l.wk, l.wv}));
    out.emplace_back(h + "attn.c_attn.bias", concat_small({l.bq, l.bk, l.bv}, small));
    out.emplace_back(h + "attn.c_proj.weight", to_conv1d({l.wo}));
    out.emplace_back(h + "attn.c_proj.bias", sm(l.bo));
    out.emplace_back(h + "ln_2.weight", sm(l.mlp_norm));
    out.emplace_back(h + "ln_2.bias", sm(l.mlp_norm_bias));
    out.emplace_back(h + "mlp.c_fc.weight", to_conv1d({l.w_up}));
    out.emplace_back(h + "mlp.c_fc.bias", sm(l.b_up));
    out.emplace_back(h + "mlp.c_proj.weight", to_conv1d({l.w_down}));
    out.emplace_back(h + "mlp.c_proj.bias", sm(l.b_down));
  }
  out.emplace_back(p + "ln_f.weight", sm(w.final_norm));
  out.emplace_back(p + "ln_f.bias", sm(w.final_norm_bias));
  if (!c.tie_word_embeddings) out.emplace_back("lm_head.weight", w.lm_head);
  return out;
}

}  // namespace lmstack::model::detail
