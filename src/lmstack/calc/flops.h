// FLOPs per token of a ModelShape: 2N per token forward and 6N training (N = active matmul
// weights, params.h), plus the attention score/value matmuls, whose convention differs:
//   PaLM (Chowdhery et al. 2022, App. B): training 6N + 12*L*H*Q*T, i.e. every token attends
//     to all T positions (no causal halving); forward is one third: 2N + 4*L*H*Q*T.
//   llm.c (train_gpt2.cu, gpt2_estimate_mfu): training 6N + 6*L*C*T (C = H*Q), half of PaLM's:
//     a causal token attends to T/2 positions on average; forward 2N + 2*L*C*T.
// With MLA the Q.K and P.V widths differ; Q*2 becomes (d_qk + d_v) in both conventions.
#pragma once

#include <string>

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/params.h"

namespace lmstack::calc {

enum class AttnConvention { kPalm, kLlmc, kNone };
// "palm", "llmc", "none"; ConfigError otherwise.
AttnConvention parse_attn_convention(const std::string& s);
const char* attn_convention_name(AttnConvention c);

struct TokenFlops {
  double matmul_forward = 0;     // 2N
  double attention_forward = 0;  // convention's attention term at context T
  double forward() const { return matmul_forward + attention_forward; }
  double training() const { return 3 * forward(); }  // backward = 2x forward
};

// FLOPs per token at context length `context` (T).
TokenFlops token_flops(const ModelShape& m, const ParamCount& p, double context, AttnConvention c);
// The convention's attention formula in symbols, e.g. "4*L*H*Q*T".
std::string attention_formula(AttnConvention c);

}  // namespace lmstack::calc
