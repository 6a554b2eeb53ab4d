// Prediction functions; the formulas and their sources are in predict.h.
#include "lmstack/calc/predict.h"

#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"

namespace lmstack::calc {

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  throw_error<ConfigError>("unknown recompute mode '{}'; known: none selective full", s);
}

const char* recompute_name(Recompute r) {
  return r == Recompute::kNone ? "none" : r == Recompute::kSelective ? "selective" : "full";
}

TrainPrecision TrainPrecision::parse(const std::string& s) {
  if (s == "mixed") return mixed();
  if (s == "fp32") return fp32();
  throw_error<ConfigError>("unknown training precision '{}'; known: mixed fp32", s);
}

StateBytes zero_state_bytes(double params, const TrainPrecision& p, int stage, int dp) {
  LMSTACK_CHECK(stage >= 0 && stage <= 3 && dp >= 1, "zero stage {} dp {}", stage, dp);
  StateBytes s{params * p.weight, params * p.grad, params * p.optimizer};
  if (stage >= 1) s.optimizer /= dp;
  if (stage >= 2) s.gradients /= dp;
  if (stage >= 3) s.weights /= dp;
  return s;
}

double dp_comm_bytes(double params, const TrainPrecision& p, int stage, int dp,
                     double micro_batches, GradReduce reduce) {
  if (dp <= 1) return 0;
  const double f = static_cast<double>(dp - 1) / dp, G = params * p.grad, W = params * p.weight;
  if (stage <= 1) return 2 * f * G;
  const double reductions = reduce == GradReduce::kPerMicroBatch ? micro_batches : 1;
  return f * (reductions * G + (stage == 3 ? 2 * micro_batches : 1) * W);
}

EpBytes ep_comm_bytes(const EpShape& s) {
  EpBytes b;
  if (s.ep > 1) {
    const double off = (s.ep - 1.0) / s.ep, calls = s.moe_layers * s.micro_batches;
    b.all_to_all = 4 * calls * s.tokens * s.top_k * s.hidden * s.act_bytes * off +
                   calls * (s.ep - 1.0) * (s.num_experts / s.ep) * 4;
  }
  const int d = s.ep > 0 ? s.dp / s.ep : 1;
  if (d > 1) b.expert_all_reduce = 2.0 * (d - 1) / d * s.expert_params / s.ep * s.grad_bytes;
  return b;
}

double activation_bytes_per_layer(const ActivationShape& a) {
  const double sbh = a.seq * a.micro_batch * a.hidden, t = a.tp;
  const bool sp = a.sequence_parallel && a.tp > 1;
  if (a.recompute == Recompute::kFull) return 2 * sbh / (sp ? t : 1);  // only the layer input
  // Table 2: the 5as/h term is the attention scores/softmax/dropout; selective drops it.
  const double scores = a.recompute == Recompute::kSelective ? 0 : 5 * a.heads * a.seq / a.hidden;
  if (sp || a.tp == 1) return sbh / t * (34 + scores);
  return sbh * (10 + 24 / t + scores / t);  // TP without SP: LayerNorm/dropout inputs replicated
}

double activation_bytes(const ActivationShape& a) {
  const double in_flight = std::min<double>(a.pp, a.micro_batches);
  const double layers = a.stage_layers > 0 ? a.stage_layers : a.layers / a.pp;
  const double interleave = a.virtual_stages > 1 ? 1 + (a.pp - 1.0) / (a.pp * a.virtual_stages) : 1;
  return activation_bytes_per_layer(a) * layers * in_flight * interleave;
}

double weight_bytes(const ParamCount& p, const std::string& dtype) {
  return static_cast<double>(p.total()) * dtype_bytes(dtype);
}

double kv_scale_bytes(const std::string& kv_dtype) { return kv_dtype == "int8" ? 4 : 0; }

double kv_bytes_per_token(const ModelShape& m, const std::string& kv_dtype) {
  const double b = dtype_bytes(kv_dtype), L = static_cast<double>(m.num_layers);
  const double scale = kv_scale_bytes(kv_dtype);
  if (m.is_mla()) return L * (static_cast<double>(m.kv_lora_rank + m.qk_rope_head_dim) * b + scale);
  return 2 * L * static_cast<double>(m.num_kv_heads) *
         (static_cast<double>(m.head_dim) * b + scale);
}

double expected_experts_touched(double experts, double top_k, double tokens) {
  return experts * (1 - std::pow(1 - top_k / experts, tokens));
}

DecodeBound decode_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                         const std::string& dtype, const std::string& kv_dtype, double batch,
                         double context, int tp) {
  DecodeBound d;
  // Every weight is read once per step, except the untied embedding table (only `batch` rows
  // are gathered) and routed experts (only those some token in the batch routes to).
  double params = static_cast<double>(p.total());
  if (!m.tied_embeddings) params -= static_cast<double>(p.get("embedding"));
  if (m.is_moe()) {
    const double experts = static_cast<double>(p.get("experts"));
    const double touched = expected_experts_touched(
        static_cast<double>(m.num_experts), static_cast<double>(m.experts_per_token), batch);
    params -= experts * (1 - touched / static_cast<double>(m.num_experts));
  }
  d.weight_bytes_read = params * dtype_bytes(dtype);
  d.kv_bytes_read = batch * context * kv_bytes_per_token(m, kv_dtype);
  d.memory_time_s = (d.weight_bytes_read + d.kv_bytes_read) / (tp * hw.memory_bw);
  const TokenFlops f = token_flops(m, p, context, AttnConvention::kLlmc);
  d.compute_time_s = batch * (f.matmul_forward + 2 * f.attention_forward) /
                     (tp * hw.compute_flops(dtype));  // decode attends to all T keys: 2x llm.c
  return d;
}

double prefill_tok_s_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                           const std::string& dtype, double prompt, AttnConvention c) {
  return hw.compute_flops(dtype) / token_flops(m, p, prompt, c).forward();
}

double train_tok_s_bound(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                         const std::string& dtype, double seq, AttnConvention c) {
  return hw.compute_flops(dtype) / token_flops(m, p, seq, c).training();
}

}  // namespace lmstack::calc
