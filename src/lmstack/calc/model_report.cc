// `calc model`: the shape, parameters by part (params.cc) and FLOPs per token (flops.h).
#include <fmt/format.h>

#include "lmstack/calc/params.h"
#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

void add_shape(const ModelShape& m, Report& r) {
  Section& s = r.section("shape", "Shape");
  add_row(s, "vocab_size", "vocabulary V", static_cast<double>(m.vocab_size), "", "config");
  add_row(s, "hidden_size", "hidden h", static_cast<double>(m.hidden_size), "", "config");
  add_row(s, "num_layers", "layers L", static_cast<double>(m.num_layers), "", "config");
  add_row(s, "num_heads", "query heads H", static_cast<double>(m.num_heads), "", "config");
  if (m.is_mla()) {
    add_row(s, "kv_lora_rank", "KV latent rank (MLA)", static_cast<double>(m.kv_lora_rank), "",
            "config");
  } else {
    add_row(s, "num_kv_heads", "KV heads", static_cast<double>(m.num_kv_heads), "",
            m.num_kv_heads == m.num_heads ? "MHA"
            : m.num_kv_heads == 1         ? "MQA"
                                  : fmt::format("GQA, groups of {}", m.num_heads / m.num_kv_heads));
    add_row(s, "head_dim", "head dim d", static_cast<double>(m.head_dim), "", "config or h/H");
  }
  add_row(s, "intermediate_size", "MLP width I", static_cast<double>(m.intermediate_size), "",
          fmt::format("{:.3g} x h ({})", static_cast<double>(m.intermediate_size) / m.hidden_size,
                      m.gated_mlp ? "SwiGLU, 3 matrices" : "GELU, 2 matrices"));
  if (m.is_moe())
    add_text(s, "experts", "experts",
             fmt::format("{} routed (top-{}) + {} shared, width {}", m.num_experts,
                         m.experts_per_token, m.num_shared_experts, m.moe_intermediate_size),
             fmt::format("{} dense layers first", m.first_dense_layers));
  add_text(s, "tied_embeddings", "embeddings tied", m.tied_embeddings ? "yes" : "no",
           "lm_head shares the embedding matrix when tied");
}

void add_params(const ParamCount& p, Report& r, bool moe) {
  Section& s = r.section("parameters", "Parameters");
  const double total = static_cast<double>(p.total());
  for (const ParamPart& part : p.parts) {
    const std::string share = total > 0 ? fmt::format(" ({:.1f}%)", 100 * part.total / total) : "";
    add_row(s, "params_" + part.key, part.label, static_cast<double>(part.total), "",
            part.formula + share);
  }
  add_row(s, "params_total", "total", total, "", "sum of the parts");
  if (moe)
    add_row(s, "params_active", "active per token", static_cast<double>(p.active()), "",
            "routed experts counted top-k of E");
  add_row(s, "params_matmul", "N (active matmul weights)", static_cast<double>(p.matmul_active()),
          "", "excludes embedding lookup, norms, biases; tied lm_head counted");
}

void add_flops(const ModelShape& m, const ParamCount& p, double T, AttnConvention c, Report& r) {
  Section& s = r.section("flops", fmt::format("FLOPs per token (context T = {:.0f})", T));
  const TokenFlops f = token_flops(m, p, T, c);
  const double N = static_cast<double>(p.matmul_active());
  add_row(s, "flops_matmul_forward", "weights, forward", f.matmul_forward, "FLOP", "2N",
          fmt::format("2 x {:.0f}", N));
  add_row(s, "flops_attention_forward", "attention, forward", f.attention_forward, "FLOP",
          attention_formula(c),
          fmt::format("L={} H={} d_qk={} d_v={} T={:.0f}", m.num_layers, m.num_heads,
                      m.qk_head_dim(), m.v_dim(), T));
  add_row(s, "flops_forward", "forward per token", f.forward(), "FLOP", "2N + attention");
  add_row(s, "flops_training", "training per token", f.training(), "FLOP",
          "6N + 3 x attention (backward = 2 x forward)");
  add_row(s, "flops_6n_total", "6 x total params (glossary rule)", 6.0 * p.total(), "FLOP",
          "6 x params_total", "the rough rule; the rows above are exact for this shape");
  add_row(s, "attention_share", "attention share of training",
          3 * f.attention_forward / f.training(), "%",
          "grows with T: attention/weights = (d_qk+d_v)*H*L*T / N");
}

}  // namespace

Report model_report(const ModelShape& m, double context, AttnConvention c) {
  Report r;
  r.title = fmt::format("calc model {}", m.name);
  const ParamCount p = count_parameters(m);
  add_shape(m, r);
  add_params(p, r, m.is_moe());
  add_flops(m, p, context, c, r);
  r.notes.push_back(fmt::format(
      "attention-FLOPs convention: {} (--attention palm|llmc|none). PaLM (App. B) counts every "
      "token against all T keys: 12*L*H*Q*T per token trained; llm.c counts the causal average "
      "T/2: 6*L*C*T.",
      attn_convention_name(c)));
  return r;
}

}  // namespace lmstack::calc
