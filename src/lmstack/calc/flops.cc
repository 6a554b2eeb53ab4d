// FLOPs per token; conventions and sources in flops.h.
#include "lmstack/calc/flops.h"

#include "lmstack/core/error.h"

namespace lmstack::calc {

AttnConvention parse_attn_convention(const std::string& s) {
  if (s == "palm") return AttnConvention::kPalm;
  if (s == "llmc" || s == "llm.c") return AttnConvention::kLlmc;
  if (s == "none") return AttnConvention::kNone;
  throw_error<ConfigError>("unknown attention-FLOPs convention '{}'; known: palm llmc none", s);
}

const char* attn_convention_name(AttnConvention c) {
  switch (c) {
    case AttnConvention::kPalm:
      return "palm";
    case AttnConvention::kLlmc:
      return "llmc";
    case AttnConvention::kNone:
      return "none";
  }
  return "?";
}

std::string attention_formula(AttnConvention c) {
  switch (c) {
    case AttnConvention::kPalm:
      return "2*L*H*(d_qk+d_v)*T (= 4*L*H*Q*T, PaLM)";
    case AttnConvention::kLlmc:
      return "L*H*(d_qk+d_v)*T (= 2*L*C*T, llm.c: causal, T/2 keys on average)";
    case AttnConvention::kNone:
      return "0 (attention matmuls ignored)";
  }
  return "";
}

TokenFlops token_flops(const ModelShape& m, const ParamCount& p, double context, AttnConvention c) {
  TokenFlops f;
  f.matmul_forward = 2.0 * static_cast<double>(p.matmul_active());
  // One token: Q.K over T keys costs 2*d_qk*T per head, P.V costs 2*d_v*T (PaLM counts all T).
  const double full = 2.0 * static_cast<double>(m.num_layers * m.num_heads) *
                      static_cast<double>(m.qk_head_dim() + m.v_dim()) * context;
  if (c == AttnConvention::kPalm) f.attention_forward = full;
  if (c == AttnConvention::kLlmc) f.attention_forward = full / 2;
  return f;
}

}  // namespace lmstack::calc
