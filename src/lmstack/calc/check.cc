// `calc check`: recompute what a run measured (docs/formats/run_metrics.md) from its model,
// setup and machine with the functions of predict.h, and compare. Byte counts and FLOPs are
// exact predictions (ratio within tolerance); speeds are roofline bounds (ratio <= 1 + tolerance,
// the ratio being the fraction of the roofline reached).
#include <fmt/format.h>

#include <cmath>

#include "lmstack/calc/parallel_check.h"
#include "lmstack/calc/params.h"
#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

struct Checker {
  const CheckOptions& o;
  Report& r;
  int flagged = 0;

  void exact(const std::string& key, const std::optional<double>& measured, double predicted,
             const std::string& unit, const std::string& formula) {
    if (!measured) return;
    const double ratio = *measured / predicted;
    const bool ok = std::fabs(ratio - 1) <= o.tolerance;
    emit(key, *measured, predicted, ratio, unit, formula,
         ok ? "ok" : fmt::format("FLAG: off by more than {:.3g}%", 100 * o.tolerance));
  }

  void bound(const std::string& key, const std::optional<double>& measured, double predicted,
             const std::string& unit, const std::string& formula) {
    if (!measured) return;
    const double ratio = *measured / predicted;
    std::string verdict = fmt::format("ok ({:.1f}% of the roofline)", 100 * ratio);
    if (ratio > 1 + o.tolerance) verdict = "FLAG: faster than the bound (check the inputs)";
    if (ratio < o.min_efficiency)
      verdict = fmt::format("FLAG: under {:.3g}% of the bound", 100 * o.min_efficiency);
    emit(key, *measured, predicted, ratio, unit, formula, verdict);
  }

  void emit(const std::string& key, double measured, double predicted, double ratio,
            const std::string& unit, const std::string& formula, const std::string& verdict) {
    Section& s = r.section(key, key);
    add_row(s, key, "predicted", predicted, unit, formula);
    add_row(s, key + "_measured", "measured", measured, unit, "from the run");
    add_row(s, key + "_ratio", "measured / predicted", ratio, "x", "");
    add_text(s, key + "_verdict", "verdict", verdict);
    if (verdict.starts_with("FLAG")) ++flagged;
  }
};

double context_of(const RunSetup& s) {
  return s.context > 0 ? s.context : s.prompt_tokens + s.generated_tokens;
}

}  // namespace

HardwareSpec hardware_for_run(const RunMetrics& run, const CheckOptions& o) {
  if (run.machine.is_string()) return hardware_preset(run.machine.get<std::string>());
  if (run.machine.is_object())
    return hardware_from_doctor(machine_report_from_json(run.machine, "run machine"), 0);
  return resolve_hardware(o.hw_name, o.machine_file);
}

Report check_report(const RunMetrics& run, const HardwareSpec& hw, const CheckOptions& o,
                    int* num_flagged) {
  const ModelShape m = model_from_json_field(run.model, "run");
  const ParamCount p = count_parameters(m);
  const RunSetup& s = run.setup;
  const std::string kv = s.kv_dtype.empty() ? s.dtype : s.kv_dtype;
  const AttnConvention conv = parse_attn_convention(s.flops_convention);
  Report r;
  r.title = fmt::format("calc check: {} run of {} on {} (tolerance {:.3g}%)", run.kind, m.name,
                        hw.name, 100 * o.tolerance);
  Checker c{o, r};
  const double shard = static_cast<double>(s.tp) * s.pp;
  // --ep: a rank holds the dense part (reduced over dp, sharded by ZeRO) and 1/ep of the
  // routed experts (f32 weights, gradients, m and v, reduced over the dp/ep ranks holding them).
  const double experts = s.ep > 1 ? static_cast<double>(p.get("experts")) : 0;
  const double dense = (static_cast<double>(p.total()) - experts) / shard,
               local_experts = experts / s.ep, per_rank = dense + local_experts;
  const TrainPrecision prec = TrainPrecision::parse(s.precision);
  if (s.ep > 1)
    c.exact("weights_bytes", run.measured.weights_bytes, per_rank * dtype_bytes(s.dtype), "B",
            fmt::format("(dense {:.0f} + experts {:.0f} / ep {}) x {} B", dense, experts, s.ep,
                        dtype_bytes(s.dtype)));
  else
    c.exact(
        "weights_bytes", run.measured.weights_bytes,
        weight_bytes(p, s.dtype) / shard / (s.zero >= 3 ? s.dp : 1), "B",
        fmt::format("{} params x {} B ({}) / (tp x pp)", p.total(), dtype_bytes(s.dtype), s.dtype));
  c.exact("kv_cache_bytes", run.measured.kv_cache_bytes,
          kv_bytes_per_token(m, kv) * context_of(s) * s.batch / s.tp, "B",
          fmt::format("KV/token ({}) x context {:.0f} x batch {}", kv, context_of(s), s.batch));
  const ActivationShape a{static_cast<double>(s.seq),
                          static_cast<double>(s.micro_batch),
                          static_cast<double>(m.hidden_size),
                          static_cast<double>(m.num_heads),
                          static_cast<double>(m.num_layers),
                          s.tp,
                          s.pp,
                          static_cast<double>(s.grad_accum),
                          true,
                          parse_recompute(s.recompute)};
  c.exact("activations_bytes", run.measured.activations_bytes, activation_bytes(a), "B",
          "Korthikanti et al. Table 2 x layers");
  StateBytes st = zero_state_bytes(dense, prec, s.zero, s.dp);
  st.weights += local_experts * prec.weight;
  st.gradients += local_experts * prec.grad;
  st.optimizer += local_experts * prec.optimizer;
  c.exact("gradients_bytes", run.measured.gradients_bytes, st.gradients, "B",
          "params x grad bytes");
  c.exact("optimizer_bytes", run.measured.optimizer_bytes, st.optimizer, "B",
          s.precision == "mixed" ? "params x 12 (master, m, v)" : "params x 8 (m, v)");
  c.exact("comm_bytes", run.measured.comm_bytes,
          dp_comm_bytes(dense, prec, s.zero, s.dp, s.grad_accum), "B",
          s.zero <= 1
              ? "ring all-reduce of grads: 2(dp-1)/dp x G (ZeRO 1: reduce-scatter G + "
                "all-gather W, the same bytes when W = G)"
              : (s.zero == 2 ? "(dp-1)/dp x (G + W)" : "(dp-1)/dp x (G + 2 x grad_accum x W)"));
  if ((s.dp > 1 || s.zero > 0) && run.measured.weights_bytes && run.measured.gradients_bytes &&
      run.measured.optimizer_bytes)
    c.exact("model_state_bytes_per_param",
            (*run.measured.weights_bytes + *run.measured.gradients_bytes +
             *run.measured.optimizer_bytes) /
                per_rank,
            st.total() / per_rank, "B",
            fmt::format("ZeRO-{} over dp {}: paper (mixed, K = 12) 16 | 2+2+12/N | 2+14/N | 16/N; "
                        "fp32 here 16 | 4+4+8/N | 4+12/N | 16/N",
                        s.zero, s.dp));
  if (s.ep > 1) {
    EpShape e;
    e.tokens = static_cast<double>(s.micro_batch) * s.seq;
    e.top_k = static_cast<double>(m.experts_per_token), e.hidden = m.hidden_size;
    e.moe_layers = static_cast<double>(m.num_moe_layers());
    e.num_experts = static_cast<double>(m.num_experts), e.micro_batches = s.grad_accum;
    e.act_bytes = dtype_bytes(s.dtype), e.ep = s.ep, e.dp = s.dp;
    e.expert_params = experts, e.grad_bytes = prec.grad;
    const EpBytes b = ep_comm_bytes(e);
    c.exact("ep_all_to_all_bytes", run.measured.ep_all_to_all_bytes, b.all_to_all, "B",
            "4 x moe layers x m x T·k·h·act B x (ep-1)/ep (uniform routing) + row counts");
    if (s.dp / s.ep > 1)
      c.exact("expert_all_reduce_bytes", run.measured.expert_all_reduce_bytes, b.expert_all_reduce,
              "B", "2(d-1)/d x experts/ep x grad B, d = dp/ep");
  }
  const double flops_ctx = s.seq > 0 ? s.seq : std::max(1.0, static_cast<double>(s.prompt_tokens));
  c.exact("flops_per_token", run.measured.flops_per_token,
          token_flops(m, p, flops_ctx, conv).forward(), "FLOP",
          fmt::format("2N + attention ({}) at T = {:.0f}", attn_convention_name(conv), flops_ctx));
  const DecodeBound d = decode_bound(m, p, hw, s.dtype, kv, s.batch,
                                     s.prompt_tokens + s.generated_tokens / 2.0, s.tp);
  c.bound(
      "decode_tok_s", run.measured.decode_tok_s, s.batch / d.step_time_s(), "tok/s",
      fmt::format("batch / max(bytes / {}, FLOPs / peak)", format_quantity(hw.memory_bw, "B/s")));
  c.bound("prefill_tok_s", run.measured.prefill_tok_s,
          prefill_tok_s_bound(m, p, hw, s.dtype, std::max(1, s.prompt_tokens), conv) * s.tp,
          "tok/s",
          fmt::format("peak {} / forward FLOPs per token",
                      format_quantity(hw.compute_flops(s.dtype), "FLOP/s")));
  c.bound("train_tok_s", run.measured.train_tok_s,
          train_tok_s_bound(m, p, hw, s.dtype, std::max(1, s.seq), conv) * shard * s.dp, "tok/s",
          "GPUs x peak / training FLOPs per token");
  if (run.parallel.is_object())  // per rank of a TP/PP run, by the rules of parallel_check.h
    c.flagged += add_parallel_checks(m, s, run.parallel, o.tolerance, r);
  if (r.sections.empty()) r.notes.push_back("the run measured nothing calc can predict");
  if (num_flagged) *num_flagged = c.flagged;
  return r;
}

}  // namespace lmstack::calc
