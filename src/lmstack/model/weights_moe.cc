// Weight specs, loading and export for the MoE MLP blocks (Mixtral's block_sparse_moe.
// {gate, experts.j.w1/w3/w2}; Qwen-MoE's mlp.{gate, experts.j.{gate,up,down}_proj,
// shared_expert.*, shared_expert_gate}; DeepSeek's mlp.{gate, gate.e_score_correction_bias,
// experts.j.*, shared_experts.*}) and for MLA attention (self_attn.{q_proj | q_a_proj,
// q_a_layernorm, q_b_proj}, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj}), the
// per-expert layout that transformers 4.57 and 5.x both write. Routers are read as f32.
#include <memory>

#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/weights_internal.h"

namespace lmstack::model::detail {
namespace {

struct ExpertNames {
  const char* block;  // "block_sparse_moe." or "mlp."
  const char* gate;   // the three matrices of an expert
  const char* up;
  const char* down;
  const char* shared;  // shared expert module ("" when none)
};

ExpertNames expert_names(const ModelConfig& c) {
  if (c.arch == Arch::kMixtral) return {"block_sparse_moe.", "w1", "w3", "w2", ""};
  const bool deepseek = c.arch == Arch::kDeepseekV2 || c.arch == Arch::kDeepseekV3;
  return {"mlp.", "gate_proj", "up_proj", "down_proj",
          deepseek ? "shared_experts." : "shared_expert."};
}

std::string layer_prefix(int i) { return "model.layers." + std::to_string(i) + "."; }

// One tensor of a layer: name, shape, kind (matrix / f32 small), and where it lives.
struct Entry {
  std::string name;
  Shape shape;
  bool small;  // f32 norm, bias or router
  bool is_norm, is_bias;
  Tensor* dst;
};

std::vector<Entry> moe_entries(const ModelConfig& c, int i, MoeLayerWeights& w) {
  const MoeConfig& m = c.moe;
  const ExpertNames n = expert_names(c);
  const std::string p = layer_prefix(i) + n.block;
  const int64_t C = c.hidden_size, F = m.expert_intermediate, S = m.shared_intermediate;
  std::vector<Entry> out = {
      {p + "gate.weight", Shape{m.num_experts, C}, true, false, false, &w.router}};
  if (m.score_bias)
    out.push_back({p + "gate.e_score_correction_bias", Shape{m.num_experts}, true, true, true,
                   &w.score_bias});
  w.w_gate.resize(static_cast<size_t>(m.num_experts));
  w.w_up.resize(static_cast<size_t>(m.num_experts));
  w.w_down.resize(static_cast<size_t>(m.num_experts));
  for (int e = 0; e < m.num_experts; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    const size_t k = static_cast<size_t>(e);
    out.push_back({x + n.gate + ".weight", Shape{F, C}, false, false, false, &w.w_gate[k]});
    out.push_back({x + n.up + ".weight", Shape{F, C}, false, false, false, &w.w_up[k]});
    out.push_back({x + n.down + ".weight", Shape{C, F}, false, false, false, &w.w_down[k]});
  }
  if (S > 0) {
    const std::string s = p + n.shared;
    out.push_back({s + "gate_proj.weight", Shape{S, C}, false, false, false, &w.shared_gate});
    out.push_back({s + "up_proj.weight", Shape{S, C}, false, false, false, &w.shared_up});
    out.push_back({s + "down_proj.weight", Shape{C, S}, false, false, false, &w.shared_down});
  }
  if (m.shared_gate)
    out.push_back(
        {p + "shared_expert_gate.weight", Shape{1, C}, true, false, false, &w.shared_expert_gate});
  return out;
}

std::vector<Entry> mla_entries(const ModelConfig& c, int i, LayerWeights& l, MlaLayerWeights& w) {
  const MlaConfig& m = c.mla;
  const std::string p = layer_prefix(i) + "self_attn.";
  const int64_t C = c.hidden_size, H = c.num_heads, qk = m.qk_head_dim(), r = m.kv_lora_rank;
  std::vector<Entry> out;
  if (m.q_lora_rank > 0) {
    const int64_t qr = m.q_lora_rank;
    out.push_back({p + "q_a_proj.weight", Shape{qr, C}, false, false, false, &w.q_a});
    out.push_back({p + "q_a_layernorm.weight", Shape{qr}, true, true, false, &w.q_a_norm});
    out.push_back({p + "q_b_proj.weight", Shape{H * qk, qr}, false, false, false, &l.wq});
  } else {
    out.push_back({p + "q_proj.weight", Shape{H * qk, C}, false, false, false, &l.wq});
  }
  out.push_back({p + "kv_a_proj_with_mqa.weight", Shape{r + m.qk_rope_head_dim, C}, false, false,
                 false, &w.kv_a});
  out.push_back({p + "kv_a_layernorm.weight", Shape{r}, true, true, false, &w.kv_a_norm});
  out.push_back({p + "kv_b_proj.weight", Shape{H * (m.qk_nope_head_dim + m.v_head_dim), r}, false,
                 false, false, &w.kv_b});
  out.push_back({p + "o_proj.weight", Shape{C, H * m.v_head_dim}, false, false, false, &l.wo});
  return out;
}

// The entries of layer i that replace the llama table's rows (attention for MLA, the MLP for
// sparse layers). `scratch` holds the weights objects the entries point into.
std::vector<Entry> layer_entries(const ModelConfig& c, int i, LayerWeights& l) {
  std::vector<Entry> out;
  if (c.mla.enabled()) {
    if (!l.mla) l.mla = std::make_shared<MlaLayerWeights>();
    out = mla_entries(c, i, l, *l.mla);
  }
  if (c.moe.is_sparse(i)) {
    if (!l.moe) l.moe = std::make_shared<MoeLayerWeights>();
    for (Entry& e : moe_entries(c, i, *l.moe)) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

void append_moe_mla_specs(const ModelConfig& c, int layer, std::vector<HfTensorSpec>& specs) {
  LayerWeights tmp;
  for (const Entry& e : layer_entries(c, layer, tmp))
    specs.push_back({e.name, e.shape, e.is_norm, e.is_bias});
}

void load_moe_mla_layer(const ModelConfig& c, const SafetensorsSet& tensors, int layer,
                        LayerWeights& l) {
  for (const Entry& e : layer_entries(c, layer, l))
    *e.dst =
        e.small ? fetch_small(tensors, e.name, e.shape) : fetch_matrix(tensors, e.name, e.shape);
}

void moe_mla_layer_to_hf(const ModelConfig& c, const LayerWeights& l, int layer, DType small,
                         std::vector<std::pair<std::string, Tensor>>& out) {
  LayerWeights view = l;  // shares the tensors; entries point into this copy's objects
  if (view.mla) view.mla = std::make_shared<MlaLayerWeights>(*l.mla);
  if (view.moe) view.moe = std::make_shared<MoeLayerWeights>(*l.moe);
  for (const Entry& e : layer_entries(c, layer, view)) {
    const Tensor& t = *e.dst;
    out.emplace_back(e.name, e.small && t.dtype() != small
                                 ? convert_float(t, small, MemoryCategory::kBuffers)
                                 : t);
  }
}

}  // namespace lmstack::model::detail
