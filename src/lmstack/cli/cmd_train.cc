// `lmstack train`: trains a Hugging Face model (or a preset initialized at random) on token
// shards with hand-written backward passes and AdamW (train/trainer.h). Ctrl-C saves a
// checkpoint after the current step; --resume continues bit-exactly from <out>/latest.
#include <csignal>
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/machine_probe.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/dist/comm.h"
#include "lmstack/train/trainer.h"

namespace lmstack::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

struct TrainCliOptions {
  train::TrainConfig config;
  std::string schedule = "cosine", dtype = "f32", recompute = "none", machine;
  int threads = 1;
  double bucket_mb = 25;
};

void add_options(CLI::App& app, TrainCliOptions& o) {
  train::TrainConfig& c = o.config;
  auto* model = app.add_option("--model", c.model_dir, "initial weights: a Hugging Face directory");
  app.add_option("--init-preset", c.init_preset,
                 "or start from random weights of a preset (tiny-llama, ...)")
      ->excludes(model);
  app.add_option("--init-config", c.init_config, "or from random weights of an HF config.json")
      ->excludes(model);
  app.add_option("--data", c.data_dir, "prepare-data output directory")->required();
  app.add_option("--out", c.out_dir, "output directory (checkpoints, latest)")->required();
  app.add_option("--steps", c.steps, "optimizer steps")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "sequences per micro-batch")->check(CLI::PositiveNumber);
  app.add_option("--seq", c.seq, "tokens per sequence")->check(CLI::PositiveNumber);
  app.add_option("--grad-accum", c.grad_accum, "micro-batches per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr.lr, "peak learning rate");
  app.add_option("--min-lr", c.lr.min_lr, "learning rate at the end of the decay");
  app.add_option("--warmup", c.lr.warmup, "linear warmup steps");
  app.add_option("--schedule", o.schedule, "cosine | linear | constant");
  app.add_option("--weight-decay", c.adam.weight_decay,
                 "AdamW decoupled weight decay (matrices only)");
  app.add_option("--beta1", c.adam.beta1);
  app.add_option("--beta2", c.adam.beta2);
  app.add_option("--eps", c.adam.eps);
  app.add_option("--grad-clip", c.grad_clip, "max global gradient norm (0: off)");
  app.add_option("--dtype", o.dtype,
                 "f32 (parity) | bf16 (bf16 matmul weights, fp32 master + Adam)");
  app.add_option("--recompute", o.recompute, "none | full (recompute each layer in the backward)");
  app.add_option("--seed", c.seed, "seed of the data order (and of --init-* weights)");
  app.add_option("--eval-every", c.eval_every, "validation loss every N steps (and at the end)");
  app.add_option("--eval-batches", c.eval_batches, "validation batches per evaluation");
  app.add_option("--save-every", c.save_every, "checkpoint every N steps (and at the end)");
  app.add_option("--keep", c.keep_checkpoints, "checkpoints kept (0: all)");
  app.add_flag("--resume", c.resume, "continue from <out>/latest (bit-exact)");
  app.add_option("--log", c.log_path, "JSONL log, one lmstack.run.v1 record per step");
  app.add_option("--machine", o.machine, "doctor --json output: its peak FLOP/s gives the MFU");
  app.add_option("--dp", c.dp, "data-parallel ranks: mpirun -np / (tp x pp) (default: that)");
  app.add_option("--zero", c.zero,
                 "ZeRO stage: 0 (DDP), 1 (optimizer), 2 (+gradients), 3 (+weights)")
      ->check(CLI::Range(0, 3));
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket size in MB (PyTorch DDP: 25)")
      ->check(CLI::PositiveNumber);
  app.add_option("--tp", c.tp, "tensor-parallel ranks (Megatron: heads, MLP, vocabulary split)")
      ->check(CLI::PositiveNumber);
  app.add_flag(
      "--sequence-parallel", c.sequence_parallel,
      "with --tp: norms and residuals on 1/tp of the tokens (reduce-scatter + all-gather)");
  app.add_option("--pp", c.pp, "pipeline-parallel stages (layers split into --pp stages)")
      ->check(CLI::PositiveNumber);
  app.add_option("--pp-schedule", c.pp_schedule,
                 "gpipe | 1f1b | interleaved (micro-batches per step: --grad-accum)")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved"}));
  app.add_option("--pp-chunks", c.pp_chunks, "model chunks per rank of --pp-schedule interleaved")
      ->check(CLI::Range(2, 64));
  app.add_option("--pp-layers", c.pp_layers,
                 "layers per (virtual) stage, comma-separated (default: even)")
      ->delimiter(',');
  app.add_option("--ep", c.ep,
                 "expert-parallel ranks: the MoE experts split over groups of --ep ranks, tokens "
                 "sent to them with all-to-alls; dense part data-parallel over all ranks")
      ->check(CLI::PositiveNumber);
  app.add_option("--moe-aux-loss-coef", c.moe_aux_loss_coef,
                 "MoE load-balancing loss weight (default: the config's router_aux_loss_coef, "
                 "else 0.01)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--moe-bias-update-rate", c.moe_bias_update_rate,
                 "DeepSeek-V3 aux-loss-free balancing: bias += rate * sign(mean - load) per step")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--trace", c.trace_path,
                 "Chrome trace JSON (Perfetto) of forward/backward/communication per rank");
  add_threads_option(app, o.threads);
}

int run(TrainCliOptions& o) {
  train::TrainConfig& c = o.config;
  if (c.model_dir.empty() && c.init_preset.empty() && c.init_config.empty() && !c.resume)
    throw_error<RequestError>("give --model DIR, --init-preset NAME or --init-config FILE");
  c.lr.schedule = train::parse_lr_schedule(o.schedule);
  c.dtype = parse_dtype(o.dtype);
  if (c.dtype != DType::kF32 && c.dtype != DType::kBF16)
    throw_error<RequestError>("--dtype {}: training supports f32 and bf16", o.dtype);
  if (o.recompute != "none" && o.recompute != "full")
    throw_error<RequestError>("--recompute {}: use none or full", o.recompute);
  c.recompute = o.recompute == "full";
  if (!o.machine.empty()) {
    c.machine = read_json_file(o.machine);
    const MachineReport m = machine_report_from_json(c.machine, o.machine);
    c.peak_flops = (c.dtype == DType::kBF16 && m.peak_bf16_gflops() > 0 ? m.peak_bf16_gflops()
                                                                        : m.peak_f32_gflops()) *
                   1e9;
  }
  c.bucket_bytes = static_cast<int64_t>(o.bucket_mb * 1e6);
  c.stop = &g_stop;
  std::signal(SIGINT, on_sigint);
  ThreadPool pool(o.threads);
  dist::Comm& world = dist::world();
  train::TrainResult r;
  try {
    r = train::run_training(c, pool);
  } catch (const std::exception& e) {  // the other ranks would wait in their next collective
    if (world.size() > 1) dist::abort_all(e.what());
    throw;
  }
  std::signal(SIGINT, SIG_DFL);
  if (world.rank() != 0) return r.interrupted ? 130 : 0;
  if (r.comm_hidden_fraction >= 0)
    std::printf("communication hidden under the backward: %.1f%% (trace %s)\n",
                100 * r.comm_hidden_fraction, c.trace_path.c_str());
  std::printf(
      "trained steps %lld-%lld of a %lld-parameter model: loss %.4f%s, %.0f tok/s; checkpoint %s\n",
      static_cast<long long>(r.first_step), static_cast<long long>(r.last_step),
      static_cast<long long>(r.num_parameters), r.last_loss,
      r.last_eval_loss >= 0 ? fmt::format(", val loss {:.4f}", r.last_eval_loss).c_str() : "",
      r.tok_s, r.checkpoint.c_str());
  return r.interrupted ? 130 : 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<TrainCliOptions>();
  add_options(app, *o);
  return [o] { return run(*o); };
}

const RegisterCommand kRegister{
    {"train", "train a model on token shards (hand-written backward, AdamW, checkpoints)",
     "  lmstack train --init-preset tiny-llama --data data/poems --out runs/tiny --steps 200\n"
     "  lmstack train --init-preset tiny-mixtral --data data/poems --out runs/moe --steps 200 "
     "--log runs/moe/log.jsonl\n"
     "  lmstack train --model runs/tiny/checkpoints/step-00000200 --data data/poems --out runs/ft "
     "--lr 1e-4 --dtype bf16 --recompute full --log ft.jsonl\n"
     "  lmstack train --init-preset tiny-llama --data data/poems --out runs/tiny --steps 200 "
     "--resume\n"
     "  lmstack doctor --json --out doctor.json && lmstack train ... --machine doctor.json\n"
     "  mpirun -np 2 lmstack train --dp 2 --zero 1 --init-preset tiny-llama --data data/poems "
     "--out runs/dp2 --batch 8 --trace dp2.json\n"
     "  mpirun -np 4 lmstack train --tp 2 --pp 2 --pp-schedule 1f1b --grad-accum 8 "
     "--init-preset tiny-llama --data data/poems --out runs/tp2pp2 --trace mp.json",
     setup}};

}  // namespace
}  // namespace lmstack::cli
