// `lmstack calc train | plan`: per-GPU memory, time, bubble and communication of a training
// layout; and the search over layouts that fit (src/lmstack/calc/train_estimate.cc, planner.cc).
#include <memory>

#include "lmstack/calc/reports.h"
#include "lmstack/cli/calc_common.h"

namespace lmstack::cli {
namespace {

struct TrainArgs {
  std::string model, gpu = "h100-sxm", machine, recompute = "none", attention = "palm";
  bool no_sp = false;
  calc::TrainOptions o;
  calc::PlanOptions plan;
  std::string compare_recompute;
  CalcOutput out;
};

// Options shared by train and plan.
void add_common(CLI::App* sub, TrainArgs& a) {
  sub->add_option("model", a.model, "preset name or config.json path")->required();
  sub->add_option("--tokens", a.o.tokens, "training tokens D (e.g. 2e12)")->required();
  sub->add_option("--gpus", a.o.gpus, "GPUs in all")->capture_default_str();
  sub->add_option("--gpu", a.gpu, "hardware preset or 'this'")->capture_default_str();
  sub->add_option("--machine", a.machine, "doctor JSON for --gpu this");
  sub->add_option("--micro-batch", a.o.micro_batch, "sequences per micro-batch")
      ->capture_default_str();
  sub->add_option("--seq", a.o.seq, "tokens per sequence (default: max_position, <= 4096)");
  sub->add_option("--compute-efficiency", a.o.compute_efficiency,
                  "fraction of peak while computing (the step model adds bubble and comm)")
      ->capture_default_str();
  sub->add_option("--precision", a.o.precision, "mixed (2+2+12 B/param) or fp32 (4+4+8)")
      ->capture_default_str();
  sub->add_option("--dtype", a.o.dtype, "compute precision for the peak: bf16, fp8, f32")
      ->capture_default_str();
  sub->add_option("--gpus-per-node", a.o.gpus_per_node, "default 8 (72 on gb200-nvl72)");
  sub->add_option("--nic", a.o.nic, "link between nodes (calc list)")->capture_default_str();
  sub->add_option("--attention", a.attention, "attention-FLOPs convention: palm llmc none")
      ->capture_default_str();
  sub->add_option("--ep", a.o.ep, "expert-parallel ranks (MoE)")->capture_default_str();
  sub->add_option("--act-dtype", a.o.act_dtype,
                  "activations TP/PP/EP send: bf16, f32 (lmstack train runs f32)")
      ->capture_default_str();
  add_calc_output_flags(sub, a.out);
}

calc::TrainOptions finish(const TrainArgs& a) {
  calc::TrainOptions o = a.o;
  o.recompute = calc::parse_recompute(a.recompute);
  o.attention = calc::parse_attn_convention(a.attention);
  o.sequence_parallel = !a.no_sp;
  return o;
}

}  // namespace

CalcSubcommand setup_calc_train(CLI::App& calc) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = calc.add_subcommand(
      "train", "training: memory per GPU, FLOPs, time, bubble, communication per step");
  add_common(sub, *a);
  sub->add_option("--dp", a->o.dp, "data-parallel ranks (default gpus / (tp x pp))");
  sub->add_option("--tp", a->o.tp, "tensor-parallel ranks")->capture_default_str();
  sub->add_option("--pp", a->o.pp, "pipeline stages")->capture_default_str();
  sub->add_option("--zero", a->o.zero, "ZeRO stage 0-3")->capture_default_str();
  sub->add_option("--grad-accum", a->o.grad_accum, "micro-batches per step (pipeline m)")
      ->capture_default_str();
  sub->add_option("--global-batch-tokens", a->o.global_batch_tokens,
                  "tokens per step; derives --grad-accum = tokens / (dp x micro-batch x seq)");
  sub->add_option("--virtual-stages", a->o.virtual_stages,
                  "interleaved pipeline: model chunks per rank (v)")
      ->capture_default_str();
  sub->add_option("--mfu", a->o.mfu, "end-to-end MFU assumed for 'time at MFU'")
      ->capture_default_str();
  sub->add_option("--recompute", a->recompute, "activation recomputation: none selective full")
      ->capture_default_str();
  sub->add_flag("--no-sequence-parallel", a->no_sp, "TP without Megatron sequence parallelism");
  return {sub, [a] {
            const calc::ModelShape m = calc::resolve_model(a->model);
            const calc::HardwareSpec hw = calc::resolve_hardware(a->gpu, a->machine);
            return print_calc_report(calc::train_report(m, hw, finish(*a)), a->out);
          }};
}

CalcSubcommand setup_calc_plan(CLI::App& calc) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = calc.add_subcommand(
      "plan",
      "search TP x PP x DP x v x ZeRO layouts for a fixed global batch; rank them by step time");
  add_common(sub, *a);
  sub->add_option("--global-batch-tokens,--global-batch", a->plan.global_batch_tokens,
                  "tokens per optimizer step (Llama 3 405B: 16M)")
      ->capture_default_str();
  sub->add_option("--top", a->plan.top, "layouts to show")->capture_default_str();
  sub->add_option("--tp", a->plan.compare_tp, "compare: a layout's TP (e.g. a published one)");
  sub->add_option("--pp", a->plan.compare_pp, "compare: its pipeline stages");
  sub->add_option("--virtual-stages", a->plan.compare_virtual_stages,
                  "compare: its chunks per rank (default: the best)");
  sub->add_option("--zero", a->plan.compare_zero, "compare: its ZeRO stage (default: the best)");
  sub->add_option("--recompute", a->compare_recompute,
                  "compare: none selective full (default: the best)");
  return {sub, [a] {
            const calc::ModelShape m = calc::resolve_model(a->model);
            const calc::HardwareSpec hw = calc::resolve_hardware(a->gpu, a->machine);
            calc::PlanOptions p = a->plan;
            p.base = finish(*a);
            if (!a->compare_recompute.empty())
              p.compare_recompute = calc::parse_recompute(a->compare_recompute);
            if ((p.compare_tp > 0) != (p.compare_pp > 0))
              throw_error<RequestError>("--tp and --pp name the layout to compare: give both");
            return print_calc_report(calc::plan_report(m, hw, p), a->out);
          }};
}

}  // namespace lmstack::cli
