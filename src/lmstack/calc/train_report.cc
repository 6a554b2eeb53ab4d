// `calc train`: TrainEstimate (train_estimate.cc) as a report with the formula of every row.
#include <fmt/format.h>

#include "lmstack/calc/parallel_groups.h"
#include "lmstack/calc/train_estimate.h"

namespace lmstack::calc {
namespace {

void add_layout(const ModelShape& m, const TrainEstimate& e, Report& r) {
  const TrainOptions& o = e.layout;
  Section& s = r.section("layout", "Layout");
  add_text(
      s, "layout", "GPUs = TP x PP x DP",
      fmt::format("{} = {} x {} x {} (EP {}, ZeRO-{})", o.gpus, o.tp, o.pp, o.dp, o.ep, o.zero),
      "Megatron order: TP innermost, then DP, then PP");
  for (const char* kind : {"tp", "dp", "pp"})
    add_text(s, fmt::format("{}_groups", kind), fmt::format("{} groups (world ranks)", kind),
             format_groups(parallel_groups(o.tp, o.pp, o.dp, kind)),
             "rank = tp_rank + TP x (dp_rank + DP x pp_rank)");
  const bool derived = o.global_batch_tokens > 0;
  add_row(s, "micro_batches", "micro-batches per step (m)", o.grad_accum, "",
          derived ? "global batch / (dp x micro_batch x seq)" : "--grad-accum",
          derived ? fmt::format("{:.6g} / ({} x {} x {})", o.global_batch_tokens, o.dp,
                                o.micro_batch, o.seq)
                  : "");
  add_row(s, "tokens_per_step", "tokens per step", e.tokens_per_step, "",
          "dp x micro_batch x seq x m",
          fmt::format("{} x {} x {} x {}", o.dp, o.micro_batch, o.seq, o.grad_accum));
  add_row(s, "stage_layers", "layers on the busiest stage", e.stage_layers, "", "ceil(L / pp)",
          fmt::format("ceil({} / {}), {} chunk(s) of {} (interleaved v = {})", m.num_layers, o.pp,
                      o.virtual_stages, e.stage_layers / o.virtual_stages, o.virtual_stages));
  add_row(s, "steps", "steps for D tokens", e.steps, "", "D / tokens per step");
}

void add_memory(const ModelShape& m, const HardwareSpec& hw, const TrainEstimate& e, Report& r) {
  const TrainOptions& o = e.layout;
  const TrainPrecision p = TrainPrecision::parse(o.precision);
  Section& s = r.section("memory", "Memory per GPU");
  add_row(s, "params_per_gpu", "parameters held", e.params_per_gpu, "",
          "(params - experts + experts/ep) / (tp x pp)");
  const char* zs = o.zero >= 3 ? " / dp (ZeRO-3)" : "";
  add_row(s, "weights_bytes", "weights", e.states.weights, "B",
          fmt::format("{} B/param{}", p.weight, zs));
  add_row(s, "gradients_bytes", "gradients", e.states.gradients, "B",
          fmt::format("{} B/param{}", p.grad, o.zero >= 2 ? " / dp (ZeRO-2+)" : ""));
  add_row(s, "optimizer_bytes", "optimizer state", e.states.optimizer, "B",
          fmt::format("{} B/param ({}){}", p.optimizer,
                      o.precision == "mixed" ? "fp32 master + m + v" : "m + v",
                      o.zero >= 1 ? " / dp (ZeRO-1+)" : ""));
  const std::string act_formula =
      o.recompute == Recompute::kFull        ? "2sbh per layer (full recompute)"
      : o.recompute == Recompute::kSelective ? "34 sbh/t per layer (selective)"
      : (o.tp > 1 && !o.sequence_parallel)   ? "sbh(10 + 24/t + 5as/(ht)) per layer"
                                             : "sbh/t (34 + 5as/h) per layer";
  add_row(s, "activations_bytes", "activations", e.activations, "B",
          act_formula + " x ceil(L/pp) x min(pp, m) [x (1 + (pp-1)/(pp v)) interleaved]",
          fmt::format("s={} b={} h={} a={} t={} layers/stage={} pp={} m={} v={}", o.seq,
                      o.micro_batch, m.hidden_size, m.num_heads, o.tp, e.stage_layers, o.pp,
                      o.grad_accum, o.virtual_stages));
  for (Recompute alt : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (alt == o.recompute) continue;
    ActivationShape a = train_activation_shape(m, e);
    a.recompute = alt;
    add_row(s, std::string("activations_if_") + recompute_name(alt),
            fmt::format("  (with --recompute {})", recompute_name(alt)), activation_bytes(a), "B",
            "");
  }
  add_row(s, "memory_total_bytes", "total", e.memory_total, "B",
          "weights + gradients + optimizer + activations");
  add_row(s, "memory_capacity_bytes", "GPU memory", hw.memory_bytes, "B", hw.name);
  add_text(s, "fits", "fits",
           hw.memory_bytes <= 0 ? "unknown (capacity unknown)"
           : e.fits ? fmt::format("yes ({:.0f}% used)", 100 * e.memory_total / hw.memory_bytes)
                    : fmt::format("NO: needs {:.2f}x the memory", e.memory_total / hw.memory_bytes),
           "total <= capacity (framework overhead and fragmentation not counted)");
}

void add_compute(const HardwareSpec& hw, const TrainEstimate& e, Report& r) {
  const TrainOptions& o = e.layout;
  Section& s = r.section("compute", "Compute");
  add_row(s, "flops_per_token", "training FLOPs per token", e.flops_per_token, "FLOP",
          std::string("6N + 3 x attention (") + attn_convention_name(o.attention) + ")");
  add_row(s, "total_flops", "total FLOPs", e.total_flops, "FLOP", "flops per token x D (~6ND)",
          fmt::format("{:.4g} x {:.4g}", e.flops_per_token, o.tokens));
  add_row(s, "peak_flops", "peak per GPU", hw.compute_flops(o.dtype), "FLOP/s",
          fmt::format("{} dense {}", hw.name, o.dtype));
  add_row(s, "time_s", "time at MFU", e.time_at_mfu_s, "s", "total / (gpus x peak x MFU)",
          fmt::format("{:.4g} / ({} x {:.4g} x {})", e.total_flops, o.gpus,
                      hw.compute_flops(o.dtype), o.mfu));
  add_row(s, "gpu_hours", "GPU-hours", e.time_at_mfu_s * o.gpus / 3600, "", "time x gpus / 3600");
  add_row(s, "bubble", "pipeline bubble", e.bubble, "%",
          "((v-1) max(m,pp) + m + pp - 1) / (v m) - 1 = (pp-1)/(v m) when m >= pp",
          fmt::format("v {}, m {}, pp {}", o.virtual_stages, o.grad_accum, o.pp));
}

void add_comm_row(Section& s, const std::string& key, const std::string& label, const CommCost& c,
                  int n) {
  if (n <= 1 || c.bytes <= 0) {
    add_text(s, key + "_bytes", label, "none", fmt::format("group of {}", n));
    return;
  }
  add_row(s, key + "_bytes", label + " bytes/GPU/step", c.bytes, "B", c.formula);
  add_row(s, key + "_time_s",
          fmt::format("  time on {} ({})", c.link, c.intra_node ? "in node" : "across nodes"),
          c.time_s, "s", "alpha-beta, calc comm");
}

void add_comm(const TrainEstimate& e, Report& r) {
  const TrainOptions& o = e.layout;
  Section& s = r.section("communication", "Communication per step");
  add_comm_row(s, "dp", fmt::format("DP (ZeRO-{})", o.zero), e.dp, o.dp);
  add_comm_row(s, "tp", "TP", e.tp, o.tp);
  add_comm_row(s, "pp", "PP", e.pp, o.pp);
  add_comm_row(s, "ep", "EP", e.ep, o.ep);
  add_row(s, "dp_exposed_s", "  DP not hidden by compute", e.dp_exposed_s, "s",
          o.zero <= 1 ? "all-reduce beyond the last micro-batch's backward (2/3 of its compute)"
                      : "each collective beyond the forward (1/3) or backward (2/3) it overlaps");
  add_row(s, "compute_step_s", "compute per step", e.compute_step_s, "s",
          "(flops/token + recompute) x tokens/step / (gpus x peak x efficiency) x imbalance",
          fmt::format("efficiency {}, imbalance {} x {} / {} = {:.4f}", o.compute_efficiency,
                      e.stage_layers, o.pp, e.stage_layers * o.pp / e.stage_imbalance,
                      e.stage_imbalance));
  add_row(s, "step_s", "step estimate", e.step_s, "s",
          "compute x (1 + bubble) + TP + PP + EP + exposed DP",
          fmt::format("{:.4g} x (1 + {:.4f}) + {:.4g} + {:.4g} + {:.4g} + {:.4g}", e.compute_step_s,
                      e.bubble, e.tp.time_s, e.pp.time_s, e.ep.time_s, e.dp_exposed_s));
  add_row(s, "mfu_predicted", "MFU predicted", e.mfu, "%",
          "flops/token x tokens/step / (step x gpus x peak)");
  add_row(s, "hw_flops_per_gpu", "FLOP/s per GPU incl. recomputation", e.hw_flops_per_gpu, "FLOP/s",
          "what Megatron-LM reports as teraFLOP/s per GPU");
  add_row(s, "time_at_step_s", "time at the step estimate", e.step_s * e.steps, "s",
          "steps x step");
}

}  // namespace

Report train_report(const ModelShape& m, const HardwareSpec& hw, const TrainOptions& o) {
  const TrainEstimate e = estimate_train(m, hw, o);
  Report r;
  r.title = fmt::format("calc train {} on {} x {} ({:.4g} tokens)", m.name, e.layout.gpus, hw.name,
                        e.layout.tokens);
  add_layout(m, e, r);
  add_memory(m, hw, e, r);
  add_compute(hw, e, r);
  add_comm(e, r);
  r.notes.push_back(
      "activations: Korthikanti et al. 2022 Table 2 (GPT block with dropout, 16-bit); "
      "SwiGLU/GQA blocks differ slightly in the constant 34. Embedding/logits buffers not "
      "counted.");
  r.notes.push_back(
      "memory: ZeRO paper accounting (2 + 2 + 12 B/param mixed precision, 4 + 4 + 8 fp32); "
      "TP/PP shard every parameter evenly.");
  return r;
}

}  // namespace lmstack::calc
