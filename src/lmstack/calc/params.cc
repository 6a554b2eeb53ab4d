// Parameter counting by part. Shapes follow the Hugging Face modeling files: GPT-2 (Conv1D
// c_attn/c_proj/c_fc with biases, wte/wpe, ln_1/ln_2/ln_f), Llama/Mistral/Qwen2/3 (q/k/v/o,
// gate/up/down, RMSNorm), Mixtral (block_sparse_moe.gate + experts), DeepSeek-V2/V3 (MLA:
// q_a/q_b or q_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; DeepseekMoE with shared
// experts, first_k_dense_replace dense layers).
#include "lmstack/calc/params.h"

#include <fmt/format.h>

namespace lmstack::calc {
namespace {

class PartBuilder {
 public:
  void add(const std::string& key, const std::string& label, int64_t weights, int64_t extra,
           std::string formula, int64_t active_weights = -1) {
    if (weights == 0 && extra == 0) return;
    const int64_t act = active_weights < 0 ? weights : active_weights;
    parts_.push_back({key, label, weights + extra, act + extra, act, std::move(formula)});
  }
  std::vector<ParamPart> take() { return std::move(parts_); }

 private:
  std::vector<ParamPart> parts_;
};

void add_attention(const ModelShape& m, PartBuilder& b) {
  const int64_t L = m.num_layers, h = m.hidden_size, H = m.num_heads;
  if (m.is_mla()) {
    const int64_t qk = m.qk_head_dim(), r = m.kv_lora_rank, rope = m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      const int64_t rq = m.q_lora_rank;
      b.add("attn_q", "attention Q (q_a, q_b; latent rank)", L * (h * rq + rq * H * qk), L * rq,
            fmt::format("L*(h*rq + rq*H*dqk) + L*rq = {}*({}*{} + {}*{}*{}) + {}*{}", L, h, rq, rq,
                        H, qk, L, rq));
    } else {
      b.add("attn_q", "attention Q", L * h * H * qk, 0,
            fmt::format("L*h*H*dqk = {}*{}*{}*{}", L, h, H, qk));
    }
    b.add(
        "attn_kv_a", "attention KV down (latent + rope key)", L * h * (r + rope), L * r,
        fmt::format("L*h*(r_kv + d_rope) + L*r_kv = {}*{}*({} + {}) + {}*{}", L, h, r, rope, L, r));
    b.add("attn_kv_b", "attention KV up (k_nope, v)", L * r * H * (m.qk_nope_head_dim + m.v_dim()),
          0,
          fmt::format("L*r_kv*H*(d_nope + d_v) = {}*{}*{}*({} + {})", L, r, H, m.qk_nope_head_dim,
                      m.v_dim()));
  } else {
    const int64_t d = m.head_dim, kv = m.num_kv_heads;
    const int64_t qb = m.qkv_bias ? L * H * d : 0, kb = m.qkv_bias ? L * kv * d : 0;
    b.add("attn_q", "attention Q", L * h * H * d, qb,
          fmt::format("L*h*H*d = {}*{}*{}*{}{}", L, h, H, d, m.qkv_bias ? " (+ bias L*H*d)" : ""));
    b.add("attn_k", "attention K", L * h * kv * d, kb,
          fmt::format("L*h*KV*d = {}*{}*{}*{}{}", L, h, kv, d, m.qkv_bias ? " (+ bias)" : ""));
    b.add("attn_v", "attention V", L * h * kv * d, kb,
          fmt::format("L*h*KV*d = {}*{}*{}*{}{}", L, h, kv, d, m.qkv_bias ? " (+ bias)" : ""));
  }
  b.add("attn_o", "attention O", L * H * m.v_dim() * h, m.o_bias ? L * h : 0,
        fmt::format("L*H*d_v*h = {}*{}*{}*{}{}", L, H, m.v_dim(), h,
                    m.o_bias ? " (+ bias L*h)" : ""));
}

void add_mlp(const ModelShape& m, PartBuilder& b) {
  const int64_t h = m.hidden_size, mats = m.gated_mlp ? 3 : 2;
  const int64_t dense_layers = m.is_moe() ? m.first_dense_layers : m.num_layers;
  const int64_t I = m.intermediate_size;
  b.add("mlp", m.gated_mlp ? "MLP (gate, up, down)" : "MLP (fc, proj)", dense_layers * mats * h * I,
        m.mlp_bias ? dense_layers * (I + h) : 0,
        fmt::format("L_dense*{}*h*I = {}*{}*{}*{}{}", mats, dense_layers, mats, h, I,
                    m.mlp_bias ? " (+ biases L*(I+h))" : ""));
  if (!m.is_moe()) return;
  const int64_t Lm = m.num_moe_layers(), E = m.num_experts, k = m.experts_per_token;
  const int64_t Ie = m.moe_intermediate_size, per_expert = mats * h * Ie;
  b.add("experts", "routed experts", Lm * E * per_expert, 0,
        fmt::format("L_moe*E*{}*h*I_e = {}*{}*{}*{}*{} (active: top-{} of {})", mats, Lm, E, mats,
                    h, Ie, k, E),
        Lm * k * per_expert);
  const int64_t Is = m.shared_intermediate_size > 0 ? m.shared_intermediate_size : Ie;
  b.add("shared_experts", "shared experts", Lm * m.num_shared_experts * mats * h * Is,
        m.shared_expert_gate ? Lm * h : 0,
        fmt::format("L_moe*S*{}*h*I_s = {}*{}*{}*{}*{}{}", mats, Lm, m.num_shared_experts, mats, h,
                    Is, m.shared_expert_gate ? " (+ sigmoid gate L_moe*h)" : ""));
  b.add("router", "router (gate)", Lm * E * h, m.router_bias ? Lm * E : 0,
        fmt::format("L_moe*E*h = {}*{}*{}{}", Lm, E, h, m.router_bias ? " (+ bias L_moe*E)" : ""));
}

void add_norms(const ModelShape& m, PartBuilder& b) {
  const int64_t h = m.hidden_size, per_norm = m.layer_norm ? 2 * h : h;
  int64_t n = (2 * m.num_layers + 1) * per_norm;
  std::string f =
      fmt::format("(2L+1)*{}h = (2*{}+1)*{}", m.layer_norm ? "2" : "", m.num_layers, per_norm);
  if (m.qk_norm) {
    n += m.num_layers * 2 * m.head_dim;
    f += fmt::format(" + q/k norms L*2*d = {}*2*{}", m.num_layers, m.head_dim);
  }
  b.add("norms", m.layer_norm ? "norms (LayerNorm w+b)" : "norms (RMSNorm)", 0, n, f);
}

}  // namespace

ParamCount count_parameters(const ModelShape& m) {
  PartBuilder b;
  const int64_t V = m.vocab_size, h = m.hidden_size;
  b.add("embedding", "token embedding", 0, V * h, fmt::format("V*h = {}*{}", V, h));
  if (m.learned_positions)
    b.add("position", "position embedding", 0, m.max_position * h,
          fmt::format("P*h = {}*{}", m.max_position, h));
  add_attention(m, b);
  add_mlp(m, b);
  add_norms(m, b);
  if (m.tied_embeddings) {
    // Stored once (as the embedding) but used as a matmul weight by the output projection.
    ParamPart p{"lm_head", "lm_head (tied to embedding)",
                0,         0,
                V * h,     fmt::format("tied: 0 extra (matmul uses V*h = {}*{})", V, h)};
    ParamCount c{b.take()};
    c.parts.push_back(p);
    return c;
  }
  b.add("lm_head", "lm_head", V * h, 0, fmt::format("V*h = {}*{}", V, h));
  return ParamCount{b.take()};
}

int64_t ParamCount::total() const {
  int64_t n = 0;
  for (const ParamPart& p : parts) n += p.total;
  return n;
}

int64_t ParamCount::active() const {
  int64_t n = 0;
  for (const ParamPart& p : parts) n += p.active;
  return n;
}

int64_t ParamCount::matmul_active() const {
  int64_t n = 0;
  for (const ParamPart& p : parts) n += p.matmul;
  return n;
}

int64_t ParamCount::get(const std::string& key) const {
  for (const ParamPart& p : parts)
    if (p.key == key) return p.total;
  return 0;
}

}  // namespace lmstack::calc
