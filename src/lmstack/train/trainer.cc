// The step driver (see trainer.h). Set-up and checkpoint plumbing are in small helpers; the
// loop itself is run_steps(). Loss per step = mean over its B·T·G tokens.
#include "lmstack/train/trainer.h"

#include <cmath>
#include <optional>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/presets.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/data.h"
#include "lmstack/train/train_log.h"

namespace lmstack::train {
namespace {

std::string tokenizer_json_of(const std::string& path) {
  if (path.empty()) return "";
  return is_directory(path) ? path_join(path, "tokenizer.json") : path;
}

// A random model written under <out>/init from a preset or a config.json, vocabulary sized to
// the data's tokenizer.
model::ModelDir init_from_scratch(const TrainConfig& tc, const DataManifest& data) {
  Json cfg = !tc.init_preset.empty() ? model::find_model_preset(tc.init_preset, "").config
                                     : read_json_file(tc.init_config);
  const int64_t vocab = cfg.value("vocab_size", int64_t{0});
  if (vocab < data.vocab_size) cfg["vocab_size"] = data.vocab_size;
  cfg["torch_dtype"] = "float32";
  model::InitModelOptions o;
  o.config =
      model::ModelConfig::from_json(cfg, tc.init_preset.empty() ? tc.init_config : tc.init_preset);
  o.out_dir = path_join(tc.out_dir, "init");
  o.seed = tc.seed;
  o.tokenizer_path = tokenizer_json_of(data.tokenizer);
  if (!o.tokenizer_path.empty() && !file_exists(o.tokenizer_path)) o.tokenizer_path.clear();
  model::init_model(o);
  return model::load_model_dir(o.out_dir);
}

Json settings_of(const TrainConfig& tc, const model::ModelConfig& mc, const DataManifest& data) {
  return {{"model", mc.to_json()},
          {"batch", tc.batch},
          {"seq", tc.seq},
          {"grad_accum", tc.grad_accum},
          {"dtype", std::string(dtype_name(tc.dtype))},
          {"seed", tc.seed},
          {"lr", tc.lr.lr},
          {"min_lr", tc.lr.min_lr},
          {"warmup", tc.lr.warmup},
          {"schedule", lr_schedule_name(tc.lr.schedule)},
          {"weight_decay", tc.adam.weight_decay},
          {"beta1", tc.adam.beta1},
          {"beta2", tc.adam.beta2},
          {"eps", tc.adam.eps},
          {"grad_clip", tc.grad_clip},
          {"data_vocab_size", data.vocab_size},
          {"data_train_tokens", data.train_tokens}};
}

model::ModelDirFiles files_of(const model::ModelDir& md) {
  model::ModelDirFiles f;
  if (!md.tokenizer_path.empty()) f.tokenizer_json = read_file(md.tokenizer_path);
  f.tokenizer_config = md.tokenizer_config;
  f.generation_config = md.generation_config;
  return f;
}

std::string format_eta(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}m{:02d}s", s / 60, s % 60);
}

// Everything one run holds, so the loop and its helpers share it explicitly.
struct Run {
  Run(const TrainConfig& config, ThreadPool& threads) : tc(config), pool(threads) {}
  const TrainConfig& tc;
  ThreadPool& pool;
  model::ModelDir md;
  DataManifest data;
  Json settings;
  std::unique_ptr<TrainModel> model;
  std::unique_ptr<AdamW> opt;
  std::unique_ptr<TokenLoader> train, val;
  std::unique_ptr<TrainLog> log;
  model::ModelDirFiles files;
  std::string last_checkpoint;
  int64_t step = 0;
};

Json metrics_line(Run& r, Json measured) {
  const TrainConfig& tc = r.tc;
  const bool mixed = tc.dtype != DType::kF32;
  int64_t master = 0, grads = 0, compute = 0;
  for (const ParamRef& p : r.model->params())
    master += p.value->nbytes(), grads += p.grad->nbytes();
  compute = mixed ? master / 2 : master;
  measured["weights_bytes"] = compute;
  measured["gradients_bytes"] = grads;
  measured["optimizer_bytes"] = r.opt->state_bytes() + (mixed ? master : 0);
  measured["activations_bytes"] = r.model->activation_bytes();
  measured["flops_per_token"] = train_flops_per_token(r.model->config(), tc.seq) / 3;
  Json setup = {{"dtype", std::string(dtype_name(tc.dtype))},
                {"micro_batch", tc.batch},
                {"batch", tc.batch},
                {"seq", tc.seq},
                {"grad_accum", tc.grad_accum},
                {"precision", mixed ? "mixed" : "fp32"},
                {"recompute", tc.recompute ? "full" : "none"},
                {"threads", r.pool.num_threads()},
                {"flops_convention", "palm"}};
  Json line = {{"schema", "lmstack.run.v1"},
               {"kind", "train"},
               {"model", r.model->config().to_json()},
               {"setup", setup},
               {"measured", measured}};
  if (!tc.machine.is_null()) line["machine"] = tc.machine;
  return line;
}

double evaluate(Run& r) {
  TokenLoader& v = *r.val;
  v.set_position({0});
  const int batches = static_cast<int>(
      std::min<int64_t>(r.tc.eval_batches, std::max<int64_t>(1, v.num_windows() / r.tc.batch)));
  const int b = static_cast<int>(std::min<int64_t>(r.tc.batch, v.num_windows()));
  std::vector<int32_t> in, tg;
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    v.next_batch(b, in, tg);
    sum += r.model->evaluate(in.data(), tg.data(), b, r.tc.seq);
  }
  return sum / batches;
}

void save(Run& r) {
  TrainerState s{r.step, r.train->position().windows_served, r.tc.seed, r.settings};
  r.last_checkpoint =
      save_checkpoint(r.tc.out_dir, *r.model, *r.opt, s, r.files, r.tc.keep_checkpoints);
  r.log->flush();
}

// One optimizer step; returns (mean loss, grad norm before clipping).
std::pair<double, double> train_step(Run& r) {
  const TrainConfig& tc = r.tc;
  r.model->zero_grads();
  std::vector<int32_t> in, tg;
  const float scale =
      1.0f / static_cast<float>(static_cast<int64_t>(tc.batch) * tc.seq * tc.grad_accum);
  double loss = 0;
  for (int m = 0; m < tc.grad_accum; ++m) {
    r.train->next_batch(tc.batch, in, tg);
    loss +=
        r.model->forward_backward(in.data(), tg.data(), tc.batch, tc.seq, scale) / tc.grad_accum;
  }
  if (!std::isfinite(loss))
    throw_error<Error>("step {}: the loss is {}; stopping without saving this state", r.step + 1,
                       loss);
  const double norm = clip_grad_norm(r.pool, r.model->params(), tc.grad_clip);
  r.opt->step(r.pool, static_cast<float>(learning_rate(tc.lr, r.step)));
  r.model->sync_compute_weights();
  ++r.step;
  return {loss, norm};
}

void run_steps(Run& r, TrainResult& result) {
  const TrainConfig& tc = r.tc;
  const double flops_tok = train_flops_per_token(r.model->config(), tc.seq);
  const double tokens_per_step = static_cast<double>(tc.batch) * tc.seq * tc.grad_accum;
  Timer since_print, wall;
  double step_seconds = 0;
  while (r.step < tc.steps) {
    Timer t;
    const double lr = learning_rate(tc.lr, r.step);
    const auto [loss, norm] = train_step(r);
    const double dt = t.seconds();
    step_seconds += dt;
    const double tok_s = tokens_per_step / dt;
    const double mfu = tc.peak_flops > 0 ? flops_tok * tok_s / tc.peak_flops : 0;
    Json m = {{"step", r.step}, {"loss", loss},         {"lr", lr},    {"grad_norm", norm},
              {"tok_s", tok_s}, {"train_tok_s", tok_s}, {"step_s", dt}};
    if (tc.peak_flops > 0) m["mfu"] = mfu;
    result.last_loss = loss, result.tok_s = tok_s, result.mfu = mfu;
    const bool last = r.step == tc.steps;
    if (r.val && ((tc.eval_every > 0 && r.step % tc.eval_every == 0) || last)) {
      result.last_eval_loss = evaluate(r);
      m["eval_loss"] = result.last_eval_loss;
    }
    r.log->append(metrics_line(r, m));
    if (tc.progress && (since_print.seconds() >= 1.0 || last || r.step == result.first_step + 1)) {
      const double eta = step_seconds / static_cast<double>(r.step - result.first_step) *
                         static_cast<double>(tc.steps - r.step);
      fmt::print(stderr,
                 "step {}/{}  loss {:.4f}{}  lr {:.2e}  gnorm {:.3f}  {:.0f} tok/s{}  ETA {}\n",
                 r.step, tc.steps, loss,
                 m.contains("eval_loss") ? fmt::format("  val {:.4f}", result.last_eval_loss) : "",
                 lr, norm, tok_s, tc.peak_flops > 0 ? fmt::format("  MFU {:.1f}%", 100 * mfu) : "",
                 format_eta(eta));
      since_print.reset();
    }
    const bool stop = tc.stop && tc.stop->load();
    if ((tc.save_every > 0 && r.step % tc.save_every == 0) || last || stop)
      save(r);
    else if (wall.seconds() > 5)
      r.log->flush(), wall.reset();
    if (stop) {
      result.interrupted = true;
      fmt::print(stderr, "interrupted: saved {}\n", r.last_checkpoint);
      break;
    }
  }
  result.last_step = r.step;
}

}  // namespace

double train_flops_per_token(const model::ModelConfig& c, int seq) {
  const double hid = c.hidden_size, f = c.intermediate_size;
  const double attn = hid * c.q_dim() * 2 + hid * c.kv_dim() * 2;
  const double mlp = (c.mlp == model::MlpKind::kSwiGlu ? 3 : 2) * hid * f;
  const double matmul = c.num_layers * (attn + mlp) + hid * c.vocab_size;
  return 6 * matmul + 12.0 * c.num_layers * seq * c.q_dim();
}

TrainResult run_training(const TrainConfig& config, ThreadPool& pool) {
  TrainConfig tc = config;
  tc.lr.total = tc.steps;
  Run r(tc, pool);
  r.data = read_data_manifest(tc.data_dir);
  const std::optional<std::string> ckpt = tc.resume ? latest_checkpoint(tc.out_dir) : std::nullopt;
  if (tc.resume && !ckpt)
    fmt::print(stderr, "no checkpoint in {}: starting from step 0\n", tc.out_dir);
  if (ckpt)
    r.md = model::load_model_dir(*ckpt);
  else if (!tc.model_dir.empty())
    r.md = model::load_model_dir(tc.model_dir);
  else
    r.md = init_from_scratch(tc, r.data);
  if (r.data.vocab_size > r.md.config.vocab_size)
    throw_error<ConfigError>("the data's vocabulary ({}) is larger than the model's ({})",
                             r.data.vocab_size, r.md.config.vocab_size);
  r.settings = settings_of(tc, r.md.config, r.data);
  TrainerState state;
  if (ckpt) {
    state = read_trainer_state(*ckpt);
    const std::string diff = describe_settings_mismatch(state.settings, r.settings);
    if (!diff.empty())
      throw_error<ConfigError>("cannot resume from {}: its settings differ from this run's:\n{}",
                               *ckpt, diff);
  }
  r.model = std::make_unique<TrainModel>(r.md.config, r.md.weights, pool,
                                         TrainModelOptions{tc.dtype, tc.recompute});
  r.opt = std::make_unique<AdamW>(r.model->params(), tc.adam);
  if (ckpt) load_optimizer_state(*ckpt, *r.model, *r.opt);
  r.train = std::make_unique<TokenLoader>(tc.data_dir, "train", tc.seq, tc.seed, true);
  r.train->set_position({state.windows_served});
  if (!r.data.val_shards.empty())
    r.val = std::make_unique<TokenLoader>(tc.data_dir, "val", tc.seq, 0, false);
  r.files = files_of(r.md);
  r.log = std::make_unique<TrainLog>(tc.log_path, ckpt ? state.step : -1);
  r.step = state.step;
  r.last_checkpoint = ckpt.value_or("");
  TrainResult result;
  result.first_step = r.step;
  result.num_parameters = r.model->num_parameters();
  try {
    run_steps(r, result);
  } catch (const Error& e) {  // the third error boundary: report, keep the last checkpoint
    r.log->flush();
    fmt::print(stderr, "training stopped at step {}: {}\nlast good checkpoint: {}\n", r.step,
               e.what(), r.last_checkpoint.empty() ? "none" : r.last_checkpoint);
    throw;
  }
  r.log->flush();
  result.checkpoint = r.last_checkpoint;
  return result;
}

}  // namespace lmstack::train
