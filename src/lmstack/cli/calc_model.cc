// `lmstack calc model | infer | roofline | list`: one model's parameters and FLOPs, its
// inference memory and time bounds on a GPU, and the roofline of kernels on a GPU.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "lmstack/calc/reports.h"
#include "lmstack/cli/calc_common.h"
#include "lmstack/core/file.h"

namespace lmstack::cli {
namespace {

struct ModelArgs {
  std::string model;
  std::string attention = "palm";
  double context = 0;
  CalcOutput out;
};

struct InferArgs {
  std::string model, gpu = "h100-sxm", machine;
  calc::InferOptions o;
  CalcOutput out;
};

struct RooflineArgs {
  std::string gpu = "h100-sxm", machine, gemm, attention, decode, plot;
  int batch = 1;
  double context = 1024;
  calc::RooflineOptions o;
  CalcOutput out;
};

void add_gpu_options(CLI::App* sub, std::string& gpu, std::string& machine) {
  sub->add_option("--gpu", gpu,
                  "hardware preset (v100 a100-40g a100-80g h100-sxm h100-pcie h200 b200 "
                  "gb200-nvl72) or 'this' (lmstack doctor's report)")
      ->capture_default_str();
  sub->add_option("--machine", machine,
                  "doctor JSON for --gpu this (default ~/.cache/lmstack/doctor.json, else a "
                  "quick probe)");
}

}  // namespace

CalcSubcommand setup_calc_model(CLI::App& calc) {
  auto a = std::make_shared<ModelArgs>();
  CLI::App* sub = calc.add_subcommand("model", "parameters by part and FLOPs per token");
  sub->add_option("model", a->model, "preset name (calc list) or config.json path")->required();
  sub->add_option("--attention", a->attention,
                  "attention-FLOPs convention: palm (12LHQT per trained token), llmc (6LCT, "
                  "causal half) or none")
      ->capture_default_str();
  sub->add_option("--context", a->context,
                  "context length T for the attention term "
                  "(default: max_position_embeddings)");
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            const calc::ModelShape m = calc::resolve_model(a->model);
            // Default T: the model's context, capped at 4096 as in `calc train` (a 128K
            // context makes attention dominate; pass --context to see that).
            const double T = a->context > 0 ? a->context
                             : m.max_position > 0
                                 ? std::min<double>(static_cast<double>(m.max_position), 4096)
                                 : 4096;
            return print_calc_report(
                calc::model_report(m, T, calc::parse_attn_convention(a->attention)), a->out);
          }};
}

CalcSubcommand setup_calc_infer(CLI::App& calc) {
  auto a = std::make_shared<InferArgs>();
  CLI::App* sub = calc.add_subcommand(
      "infer", "inference: weights, KV cache, concurrency, prefill and decode time bounds");
  sub->add_option("model", a->model, "preset name or config.json path")->required();
  add_gpu_options(sub, a->gpu, a->machine);
  sub->add_option("--dtype", a->o.dtype, "weights: f32 bf16 f16 fp8 int8 int4 q8_0 q4_0")
      ->capture_default_str();
  sub->add_option("--kv-dtype", a->o.kv_dtype,
                  "KV cache element type (default: --dtype, "
                  "bf16 for int8/int4 weights)");
  sub->add_option("--batch", a->o.batch, "sequences decoded together")->capture_default_str();
  sub->add_option("--prompt", a->o.prompt, "prompt tokens per sequence")->capture_default_str();
  sub->add_option("--output", a->o.output, "generated tokens per sequence")->capture_default_str();
  sub->add_option("--tp", a->o.tp, "tensor-parallel GPUs")->capture_default_str();
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            const calc::ModelShape m = calc::resolve_model(a->model);
            const calc::HardwareSpec hw = calc::resolve_hardware(a->gpu, a->machine);
            return print_calc_report(calc::infer_report(m, hw, a->o), a->out);
          }};
}

CalcSubcommand setup_calc_roofline(CLI::App& calc) {
  auto a = std::make_shared<RooflineArgs>();
  CLI::App* sub = calc.add_subcommand(
      "roofline", "arithmetic intensity, ridge point, attainable FLOP/s and bound of kernels");
  add_gpu_options(sub, a->gpu, a->machine);
  sub->add_option("--dtype", a->o.dtype, "element type")->capture_default_str();
  sub->add_option("--gemm", a->gemm, "GEMM M,N,K");
  sub->add_option("--attention", a->attention, "fused causal attention B,HEADS,SEQ,HEAD_DIM");
  sub->add_option("--decode", a->decode, "a decode step of this model (with --batch, --context)");
  sub->add_option("--batch", a->batch, "decode batch")->capture_default_str();
  sub->add_option("--context", a->context, "decode context tokens")->capture_default_str();
  sub->add_option("--plot", a->plot, "also draw the roofline with the points: FILE.svg");
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            const calc::HardwareSpec hw = calc::resolve_hardware(a->gpu, a->machine);
            calc::RooflineOptions o = a->o;
            if (!a->gemm.empty()) {
              const auto v = parse_numbers(a->gemm, 3, "--gemm");
              o.points.push_back(calc::gemm_point(v[0], v[1], v[2], o.dtype));
            }
            if (!a->attention.empty()) {
              const auto v = parse_numbers(a->attention, 4, "--attention");
              o.points.push_back(calc::attention_point(v[0], v[1], v[2], v[3], o.dtype));
            }
            if (!a->decode.empty())
              o.points.push_back(calc::decode_point(calc::resolve_model(a->decode), hw, o.dtype,
                                                    a->batch, a->context));
            if (o.points.empty())
              throw_error<RequestError>("calc roofline: give --gemm, --attention or --decode");
            if (!a->plot.empty()) {
              if (!a->plot.ends_with(".svg"))
                throw_error<RequestError>("--plot {}: only .svg is written", a->plot);
              write_file_atomic(a->plot, calc::roofline_svg(hw, o));
            }
            print_calc_report(calc::roofline_report(hw, o), a->out);
            std::fflush(stdout);
            if (!a->plot.empty()) std::fprintf(stderr, "wrote %s\n", a->plot.c_str());
            return 0;
          }};
}

CalcSubcommand setup_calc_list(CLI::App& calc) {
  CLI::App* sub = calc.add_subcommand("list", "list the model, GPU and link presets");
  return {sub, [] {
            std::printf("models:");
            for (const auto& n : calc::model_preset_names()) std::printf(" %s", n.c_str());
            std::printf("\ngpus:");
            for (const auto& n : calc::hardware_preset_names()) std::printf(" %s", n.c_str());
            std::printf(" this\nlinks:");
            for (const auto& n : calc::link_preset_names()) std::printf(" %s", n.c_str());
            std::printf("\n");
            return 0;
          }};
}

}  // namespace lmstack::cli
