// `calc infer`: weights, KV cache, concurrency, prefill (compute bound) and decode (bandwidth
// bound) of a model on a GPU, and the batch where decode turns compute-bound. Decode reads all
// weights once per step (not the untied embedding table; MoE: only the experts routed to) plus
// every sequence's KV cache; prefill is bounded by peak FLOP/s (predict.h).
#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

// The KV-per-token rule in symbols and with this model's numbers.
std::pair<std::string, std::string> kv_formula(const ModelShape& m, const std::string& kv, int tp) {
  const double scale = kv_scale_bytes(kv);
  if (m.is_mla() && scale == 0)
    return {"L x (r_kv + d_rope) x bytes / tp (MLA latent)",
            fmt::format("{} x ({} + {}) x {} / {}", m.num_layers, m.kv_lora_rank,
                        m.qk_rope_head_dim, dtype_bytes(kv), tp)};
  if (m.is_mla())  // int8: one f32 scale per latent row
    return {"L x ((r_kv + d_rope) x bytes + scale) / tp (MLA latent)",
            fmt::format("{} x (({} + {}) x {} + {}) / {}", m.num_layers, m.kv_lora_rank,
                        m.qk_rope_head_dim, dtype_bytes(kv), scale, tp)};
  if (scale == 0)
    return {"2 x L x kv_heads x head_dim x bytes / tp",
            fmt::format("2 x {} x {} x {} x {} / {}", m.num_layers, m.num_kv_heads, m.head_dim,
                        dtype_bytes(kv), tp)};
  // int8: one f32 scale per token per kv head (lmstack's --kv-dtype int8)
  return {"2 x L x kv_heads x (head_dim x bytes + scale) / tp",
          fmt::format("2 x {} x {} x ({} x {} + {}) / {}", m.num_layers, m.num_kv_heads, m.head_dim,
                      dtype_bytes(kv), scale, tp)};
}

void add_memory(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                const InferOptions& o, const std::string& kv, Report& r) {
  Section& s = r.section("memory", fmt::format("Memory per GPU (TP {})", o.tp));
  const double w = weight_bytes(p, o.dtype) / o.tp;
  const double per_tok = kv_bytes_per_token(m, kv) / o.tp;
  const double ctx = o.prompt + o.output;
  add_row(s, "weights_bytes", "weights", w, "B", "params x bytes / tp",
          fmt::format("{} x {} / {}", p.total(), dtype_bytes(o.dtype), o.tp));
  const auto [kv_rule, kv_numbers] = kv_formula(m, kv, o.tp);
  add_row(s, "kv_bytes_per_token", "KV cache per token", per_tok, "B", kv_rule,
          fmt::format("{} = {:.0f} B", kv_numbers, per_tok));
  add_row(s, "kv_bytes_per_sequence", "KV cache per sequence", per_tok * ctx, "B",
          "per token x (prompt + output)",
          fmt::format("{:.0f} x ({} + {}) = {:.0f} B", per_tok, o.prompt, o.output, per_tok * ctx));
  add_row(s, "kv_cache_bytes", "KV cache, whole batch", per_tok * ctx * o.batch, "B",
          "per sequence x batch",
          fmt::format("{:.0f} x {} = {:.0f} B", per_tok * ctx, o.batch, per_tok * ctx * o.batch));
  add_row(s, "memory_total_bytes", "weights + KV", w + per_tok * ctx * o.batch, "B",
          "weights + KV, whole batch");
  add_row(s, "memory_capacity_bytes", "GPU memory", hw.memory_bytes, "B", hw.name);
  const double free_bytes = hw.memory_bytes - w;
  if (hw.memory_bytes > 0)
    add_row(s, "max_concurrency", "max sequences beside the weights",
            free_bytes > 0 ? std::floor(free_bytes / (per_tok * ctx)) : 0, "",
            "floor((capacity - weights) / KV per sequence)",
            fmt::format("floor(({:.4g} - {:.4g}) / {:.4g})", hw.memory_bytes, w, per_tok * ctx));
}

void add_speed(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
               const InferOptions& o, const std::string& kv, Report& r) {
  Section& s = r.section("speed", "Time bounds (roofline)");
  const double peak = hw.compute_flops(o.dtype) * o.tp;
  const TokenFlops pf = token_flops(m, p, o.prompt, AttnConvention::kLlmc);
  const double prefill_flops = pf.forward() * o.prompt * o.batch;
  add_row(s, "prefill_flops", "prefill FLOPs (batch)", prefill_flops, "FLOP",
          "(2N + causal attention L*H*(d_qk+d_v)*P) x P x batch");
  add_row(s, "prefill_s", "prefill time (compute bound)", prefill_flops / peak, "s",
          "FLOPs / (tp x peak)", fmt::format("{:.4g} / {:.4g}", prefill_flops, peak));
  const double mean_ctx = o.prompt + o.output / 2.0;
  const DecodeBound d = decode_bound(m, p, hw, o.dtype, kv, o.batch, mean_ctx, o.tp);
  add_row(
      s, "decode_weight_bytes", "weights read per decode step", d.weight_bytes_read, "B",
      m.is_moe() ? "non-expert + touched experts E(1-(1-k/E)^B)" : "all but the untied embedding");
  add_row(s, "decode_kv_bytes", "KV read per decode step", d.kv_bytes_read, "B",
          "batch x KV/token x mean context (prompt + output/2)");
  add_row(s, "decode_memory_s", "decode step, bandwidth bound", d.memory_time_s, "s",
          "(weights + KV) / (tp x HBM bandwidth)",
          fmt::format("({:.4g} + {:.4g}) / ({} x {:.4g})", d.weight_bytes_read, d.kv_bytes_read,
                      o.tp, hw.memory_bw));
  add_row(s, "decode_compute_s", "decode step, compute bound", d.compute_time_s, "s",
          "batch x forward FLOPs / (tp x peak)");
  add_text(s, "decode_bound", "decode is", d.memory_bound() ? "memory-bound" : "compute-bound",
           "the larger of the two times");
  add_row(s, "decode_tok_s_per_seq", "tokens/s per sequence", 1 / d.step_time_s(), "tok/s",
          "1 / step time");
  add_row(s, "decode_tok_s", "tokens/s, whole batch", o.batch / d.step_time_s(), "tok/s",
          "batch / step time");
  add_row(s, "request_s", "request time (prefill + decode)",
          prefill_flops / peak + o.output * d.step_time_s(), "s", "prefill + output x step");
}

// Smallest batch whose decode step is compute-bound (doubling, then bisection), or 0.
double crossover_batch(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                       const InferOptions& o, const std::string& kv, double ctx) {
  auto compute_bound = [&](double b) {
    return !decode_bound(m, p, hw, o.dtype, kv, b, ctx, o.tp).memory_bound();
  };
  double hi = 1;
  while (!compute_bound(hi)) {
    hi *= 2;
    if (hi > 1 << 24) return 0;
  }
  double lo = hi / 2;
  while (hi - lo > 1) {
    const double mid = std::floor((lo + hi) / 2);
    (compute_bound(mid) ? hi : lo) = mid;
  }
  return hi;
}

void add_crossover(const ModelShape& m, const ParamCount& p, const HardwareSpec& hw,
                   const InferOptions& o, const std::string& kv, Report& r) {
  Section& s = r.section("crossover", "Where decode turns compute-bound");
  const double ridge = hw.compute_flops(o.dtype) / hw.memory_bw;
  add_row(s, "ridge_flop_per_byte", "ridge point", ridge, "", "peak / bandwidth (FLOP/byte)");
  add_row(s, "crossover_batch_no_kv", "batch, weights only", ridge * dtype_bytes(o.dtype) / 2, "",
          "ridge x bytes/param / 2 (2 FLOPs per weight per sequence)");
  const double b = crossover_batch(m, p, hw, o, kv, o.prompt + o.output / 2.0);
  if (b > 0)
    add_row(s, "crossover_batch", "batch, with KV reads", b, "",
            "smallest B with compute time >= memory time");
  else
    add_text(s, "crossover_batch", "batch, with KV reads", "never",
             "each sequence's KV bytes outgrow its FLOPs: attention stays bandwidth-bound");
}

}  // namespace

Report infer_report(const ModelShape& m, const HardwareSpec& hw, const InferOptions& o) {
  if (o.batch < 1 || o.prompt < 1 || o.output < 0 || o.tp < 1)
    throw_error<RequestError>("--batch, --prompt, --tp must be >= 1 and --output >= 0");
  if (m.num_heads % o.tp != 0)
    throw_error<RequestError>("--tp {} does not divide the {} attention heads of {}", o.tp,
                              m.num_heads, m.name);
  // Weight-only int8/int4 formats keep a 16-bit KV cache unless told otherwise.
  std::string kv = o.kv_dtype;
  if (kv.empty()) kv = dtype_bytes(o.dtype) >= 2 || o.dtype == "fp8" ? o.dtype : "bf16";
  const ParamCount p = count_parameters(m);
  Report r;
  r.title = fmt::format("calc infer {} on {} ({} weights, {} KV, batch {}, prompt {}, output {})",
                        m.name, hw.name, o.dtype, kv, o.batch, o.prompt, o.output);
  add_memory(m, p, hw, o, kv, r);
  add_speed(m, p, hw, o, kv, r);
  add_crossover(m, p, hw, o, kv, r);
  r.notes.push_back(
      "bounds, not predictions of a kernel: a real run reaches some fraction of them");
  return r;
}

}  // namespace lmstack::calc
