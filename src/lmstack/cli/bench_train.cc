// `lmstack bench train`: times full training steps (forward + backward + AdamW) of a model on
// random tokens and reports tokens/s, achieved FLOP/s (PaLM convention, train/trainer.h) and
// MFU against doctor's measured peak (a quick probe when --machine is not given), with the
// split of one step into forward+backward and optimizer time. The median of --steps timed
// steps after one warm-up step.
#include "lmstack/cli/bench_train.h"

#include <cstdio>
#include <memory>

#include "lmstack/cli/command.h"
#include "lmstack/core/json.h"
#include "lmstack/core/machine_probe.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/data.h"
#include "lmstack/train/trainer.h"

namespace lmstack::cli {
namespace {

struct BenchTrainOptions {
  std::string model, dtype = "f32", recompute = "none", machine;
  int batch = 4, seq = 128, steps = 3, threads = 1;
};

double peak_flops(const BenchTrainOptions& o, ThreadPool& pool, bool bf16) {
  const MachineReport m =
      o.machine.empty() ? probe_machine(pool, ProbeOptions{.seconds_per_test = 0.1, .quick = true})
                        : machine_report_from_json(read_json_file(o.machine), o.machine);
  return (bf16 && m.peak_bf16_gflops() > 0 ? m.peak_bf16_gflops() : m.peak_f32_gflops()) * 1e9;
}

int run(const BenchTrainOptions& o) {
  ThreadPool pool(o.threads);
  const model::ModelDir md = model::load_model_dir(o.model);
  const DType dt = parse_dtype(o.dtype);
  train::TrainModel tm(md.config, md.weights, pool, {dt, o.recompute == "full"});
  train::AdamW opt(tm.params(), {});
  const size_t n = static_cast<size_t>(o.batch) * static_cast<size_t>(o.seq);
  std::vector<int32_t> in(n), tg(n);
  uint64_t state = 1;
  for (size_t i = 0; i < n; ++i) {
    in[i] = static_cast<int32_t>(train::splitmix64(state) %
                                 static_cast<uint64_t>(md.config.vocab_size));
    tg[i] = static_cast<int32_t>(train::splitmix64(state) %
                                 static_cast<uint64_t>(md.config.vocab_size));
  }
  std::vector<double> fb_s, opt_s;
  for (int s = 0; s <= o.steps; ++s) {
    tm.zero_grads();
    Timer t;
    tm.forward_backward(in.data(), tg.data(), o.batch, o.seq, 1.0f / static_cast<float>(n));
    const double fb = t.seconds();
    t.reset();
    train::clip_grad_norm(pool, tm.params(), 1.0);
    opt.step(pool, 1e-4f);
    tm.sync_compute_weights();
    if (s > 0) fb_s.push_back(fb), opt_s.push_back(t.seconds());  // step 0 warms up
  }
  const double step_s = median(fb_s) + median(opt_s);
  const double tok_s = static_cast<double>(n) / step_s;
  const double flops = train::train_flops_per_token(md.config, o.seq) * tok_s;
  const double peak = peak_flops(o, pool, dt == DType::kBF16);
  std::printf("model %s: %lld parameters, batch %d x seq %d, %s, recompute %s, %d threads\n",
              o.model.c_str(), static_cast<long long>(tm.num_parameters()), o.batch, o.seq,
              o.dtype.c_str(), o.recompute.c_str(), pool.num_threads());
  std::printf("step %.3f s (forward+backward %.3f s, clip+AdamW %.3f s), median of %d\n", step_s,
              median(fb_s), median(opt_s), o.steps);
  std::printf(
      "train %.0f tok/s, %.1f GFLOP/s (6N + 12LTd per token), MFU %.2f%% of %.0f GFLOP/s peak\n",
      tok_s, flops / 1e9, 100 * flops / peak, peak / 1e9);
  std::printf("activations %.1f MiB, weights+grads+Adam %.1f MiB\n",
              static_cast<double>(tm.activation_bytes()) / (1 << 20),
              static_cast<double>(tm.num_parameters()) * 16 / (1 << 20));
  return 0;
}

}  // namespace

void add_bench_train(CLI::App& bench, std::function<int()>& runner) {
  auto o = std::make_shared<BenchTrainOptions>();
  CLI::App* app = bench.add_subcommand("train", "training tokens/s and MFU of a model");
  app->add_option("--model", o->model, "Hugging Face model directory")->required();
  app->add_option("--batch", o->batch, "sequences per step")->check(CLI::PositiveNumber);
  app->add_option("--seq", o->seq, "tokens per sequence")->check(CLI::PositiveNumber);
  app->add_option("--dtype", o->dtype, "f32 | bf16");
  app->add_option("--recompute", o->recompute, "none | full");
  app->add_option("--steps", o->steps, "timed steps (after one warm-up)")
      ->check(CLI::PositiveNumber);
  app->add_option("--machine", o->machine, "doctor --json output (default: a quick probe)");
  add_threads_option(*app, o->threads);
  app->footer(
      "Examples:\n  lmstack bench train --model runs/tiny/init --batch 8 --seq 256 --dtype bf16");
  app->callback([o, &runner] { runner = [o] { return run(*o); }; });
}

}  // namespace lmstack::cli
