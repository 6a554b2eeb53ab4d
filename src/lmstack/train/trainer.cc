// The step driver (see trainer.h). Set-up and checkpoint plumbing are in small helpers; the
// loop itself is run_steps(). Loss per step = mean over its B·T·G tokens.
#include "lmstack/train/trainer.h"

#include <algorithm>
#include <array>
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
#include "lmstack/train/data_parallel.h"
#include "lmstack/train/expert_data_parallel.h"
#include "lmstack/train/model_parallel_trainer.h"
#include "lmstack/train/moe_balance.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "lmstack/train/train_log.h"

namespace lmstack::train {
namespace {

std::string tokenizer_json_of(const std::string& path) {
  if (path.empty()) return "";
  return is_directory(path) ? path_join(path, "tokenizer.json") : path;
}

// A random model written under <out>/init from a preset or a config.json, vocabulary sized to
// the data's tokenizer.
model::ModelDir init_from_scratch(const TrainConfig& tc, const DataManifest& data,
                                  dist::Comm& comm) {
  Json cfg = !tc.init_preset.empty() ? model::find_model_preset(tc.init_preset, "").config
                                     : read_json_file(tc.init_config);
  const int64_t vocab = optional<int64_t>(cfg, "vocab_size", 0,
                                          tc.init_preset.empty() ? tc.init_config : tc.init_preset);
  if (vocab < data.vocab_size) cfg["vocab_size"] = data.vocab_size;
  cfg["torch_dtype"] = "float32";
  model::InitModelOptions o;
  o.config =
      model::ModelConfig::from_json(cfg, tc.init_preset.empty() ? tc.init_config : tc.init_preset);
  o.out_dir = path_join(tc.out_dir, "init");
  o.seed = tc.seed;
  o.tokenizer_path = tokenizer_json_of(data.tokenizer);
  if (!o.tokenizer_path.empty() && !file_exists(o.tokenizer_path)) o.tokenizer_path.clear();
  if (comm.rank() == 0) model::init_model(o);
  comm.barrier();  // rank 0 wrote it; every rank loads the same weights
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
  dist::Comm* comm = nullptr;
  std::unique_ptr<TraceRecorder> trace;
  std::unique_ptr<DataParallel> dp;        // null: the single-process path
  std::unique_ptr<ExpertDataParallel> ep;  // --ep > 1: the experts beside dp's dense part
  int64_t train_activation_bytes = 0;      // after the last training step (evaluation may differ)
  MoeStepLoads moe;                        // expert loads of the last step (MoE models)
};

// Bytes this rank holds: weights (bf16 compute copies in mixed precision), f32 gradients,
// optimizer state (m, v, and the f32 master in mixed precision), activations of the last
// training step.
std::array<int64_t, 6> held_bytes(Run& r) {
  const bool mixed = r.tc.dtype != DType::kF32;
  int64_t master = 0, grads = 0, opt = 0, peak_master = 0, peak_grads = 0;
  if (r.dp) {
    const HeldBytes h = r.dp->held_bytes();
    master = h.weights, grads = h.gradients, opt = h.optimizer;
    peak_master = h.peak_weights, peak_grads = h.peak_gradients;
    if (r.ep) {  // the experts this rank holds: weights, gradients, m and v, all f32
      const int64_t e = r.ep->weight_bytes();
      master += e, grads += e, opt += 2 * e, peak_master += e, peak_grads += e;
    }
  } else {
    for (const ParamRef& p : r.model->params())
      master += p.value->nbytes(), grads += p.grad->nbytes();
    opt = r.opt->state_bytes(), peak_master = master, peak_grads = grads;
  }
  return {mixed ? master / 2 : master,
          grads,
          opt + (mixed ? master : 0),
          r.train_activation_bytes,
          mixed ? peak_master / 2 : peak_master,
          peak_grads};
}

// Per-rank bytes held and moved this step, gathered from every rank (collective).
// step_comm: the world's (dense data parallelism); ep_step: the expert-parallel group's
// all-to-alls in all_to_all_bytes and the expert-data group's all-reduce in all_reduce_bytes.
Json per_rank_json(Run& r, const dist::CommStats& step_comm, const dist::CommStats& ep_step) {
  const std::array<int64_t, 6> h = held_bytes(r);
  const std::array<int64_t, 11> mine = {h[0],
                                        h[1],
                                        h[2],
                                        h[3],
                                        h[4],
                                        h[5],
                                        step_comm.all_reduce_bytes,
                                        step_comm.reduce_scatter_bytes,
                                        step_comm.all_gather_bytes,
                                        ep_step.all_to_all_bytes,
                                        ep_step.all_reduce_bytes};
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(r.comm->size()));
  r.comm->all_gather(mine.data(), all.data(), static_cast<int64_t>(sizeof(mine)), DType::kI8);
  Json ranks = Json::array();
  for (int q = 0; q < r.comm->size(); ++q) {
    const int64_t* v = all.data() + static_cast<size_t>(q) * mine.size();
    ranks.push_back({{"rank", q},
                     {"weights_bytes", v[0]},
                     {"gradients_bytes", v[1]},
                     {"optimizer_bytes", v[2]},
                     {"activations_bytes", v[3]},
                     {"peak_weights_bytes", v[4]},
                     {"peak_gradients_bytes", v[5]},
                     {"comm_bytes",
                      {{"all_reduce", v[6]},
                       {"reduce_scatter", v[7]},
                       {"all_gather", v[8]},
                       {"ep_all_to_all", v[9]},
                       {"expert_all_reduce", v[10]},
                       {"total", v[6] + v[7] + v[8] + v[9] + v[10]}}}});
  }
  return ranks;
}

Json metrics_line(Run& r, Json measured) {
  const TrainConfig& tc = r.tc;
  const bool mixed = tc.dtype != DType::kF32;
  const std::array<int64_t, 6> h = held_bytes(r);
  measured["weights_bytes"] = h[0];
  measured["gradients_bytes"] = h[1];
  measured["optimizer_bytes"] = h[2];
  measured["activations_bytes"] = h[3];
  measured["flops_per_token"] = train_flops_per_token(r.model->config(), tc.seq) / 3;
  Json setup = {{"dtype", std::string(dtype_name(tc.dtype))},
                {"micro_batch", tc.batch / r.comm->size()},  // per rank
                {"batch", tc.batch},
                {"seq", tc.seq},
                {"grad_accum", tc.grad_accum},
                {"precision", mixed ? "mixed" : "fp32"},
                {"recompute", tc.recompute ? "full" : "none"},
                {"threads", r.pool.num_threads()},
                {"dp", r.comm->size()},
                {"zero", r.dp ? r.dp->zero() : 0},
                {"ep", r.ep ? r.ep->ep() : 1},
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
  if (r.dp) r.dp->release_gathered();  // every rank evaluated the same batches
  return sum / batches;
}

// The log first: a kill between the two then leaves the log ahead of the checkpoint, which
// resume trims (TrainLog drops lines past the checkpoint's step). Flushed after, a kill could
// leave a checkpoint whose steps the log never got, and the resumed log would lack them.
void save(Run& r) {
  r.log->flush();
  TrainerState s{r.step, r.train->position().windows_served, r.tc.seed, r.settings};
  r.last_checkpoint =
      r.dp ? save_sharded_checkpoint(
                 r.tc.out_dir, *r.model, *r.dp, *r.comm, s, r.files, r.tc.keep_checkpoints,
                 r.ep ? r.ep->checkpoint_tensors() : std::vector<WholeShardTensor>{},
                 r.ep ? r.ep->ep() : 1)
           : save_checkpoint(r.tc.out_dir, *r.model, *r.opt, s, r.files, r.tc.keep_checkpoints);
}

// One optimizer step; returns (mean loss, grad norm before clipping). Data parallel: this
// rank's slice of each global micro-batch, gradients reduced by the engine during the last
// backward, loss averaged over ranks (one rank: the whole batch, the model's own optimizer).
std::pair<double, double> train_step(Run& r) {
  const TrainConfig& tc = r.tc;
  const int local = tc.batch / r.comm->size();
  const size_t first = static_cast<size_t>(r.comm->rank()) * static_cast<size_t>(local) *
                       static_cast<size_t>(tc.seq);
  if (r.dp) {
    r.dp->zero_grads();
    r.dp->reset_peaks();
    if (r.ep) r.ep->zero_grads();
  } else {
    r.model->zero_grads();
  }
  std::vector<int32_t> in, tg;
  const float scale =
      1.0f / static_cast<float>(static_cast<int64_t>(tc.batch) * tc.seq * tc.grad_accum);
  double loss = 0;
  moe_begin_step(r.moe, r.model->config());
  for (int m = 0; m < tc.grad_accum; ++m) {
    r.train->next_batch(tc.batch, in, tg);  // the global batch; this rank reads its slice
    if (r.dp) r.dp->begin_micro_batch(m == tc.grad_accum - 1);
    loss += r.model->forward_backward(in.data() + first, tg.data() + first, local, tc.seq, scale) /
            tc.grad_accum;
    moe_add_micro_batch(r.moe, *r.model);
  }
  moe_reduce_step(r.moe, *r.comm);
  if (r.dp) {
    r.dp->finish_gradients();
    if (r.ep) r.ep->finish_gradients();
    loss = dist::sum_in_rank_order(*r.comm, loss) / r.comm->size();
  }
  if (!std::isfinite(loss))
    throw_error<Error>("step {}: the loss is {}; stopping without saving this state", r.step + 1,
                       loss);
  const float lr = static_cast<float>(learning_rate(tc.lr, r.step));
  double norm = 0;
  if (r.dp) {
    norm = r.dp->clip_grad_norm(tc.grad_clip, r.ep ? r.ep->sum_squares_share() : 0);
    r.dp->optimizer_step(lr);
    if (r.ep) {
      r.ep->scale_grads(clip_coefficient(norm, tc.grad_clip));
      r.ep->optimizer_step(lr);
    }
  } else {
    norm = clip_grad_norm(r.pool, r.model->params(), tc.grad_clip);
    r.opt->step(r.pool, lr);
  }
  if (tc.moe_bias_update_rate > 0)
    moe_update_score_biases(*r.model, r.moe, tc.moe_bias_update_rate);
  r.model->sync_compute_weights();
  ++r.step;
  return {loss, norm};
}

// Bytes of expert parallelism so far: the EP group's all-to-alls (all_to_all_bytes) and the
// expert-data group's gradient all-reduce (all_reduce_bytes); zeros without --ep.
dist::CommStats ep_stats(Run& r) {
  dist::CommStats s;
  if (!r.ep) return s;
  s.all_to_all_bytes = r.ep->ep_comm().stats().all_to_all_bytes;
  s.all_reduce_bytes = r.ep->expert_dp_comm().stats().all_reduce_bytes;
  return s;
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
    const dist::CommStats before = r.comm->stats(), ep_before = ep_stats(r);
    const auto [loss, norm] = train_step(r);
    r.train_activation_bytes = r.model->activation_bytes();
    const double dt = t.seconds();
    step_seconds += dt;
    const double tok_s = tokens_per_step / dt;
    const double mfu = tc.peak_flops > 0 ? flops_tok * tok_s / tc.peak_flops : 0;
    Json m = {{"step", r.step}, {"loss", loss},         {"lr", lr},    {"grad_norm", norm},
              {"tok_s", tok_s}, {"train_tok_s", tok_s}, {"step_s", dt}};
    if (tc.peak_flops > 0) m["mfu"] = mfu;
    moe_log_fields(r.model->config(), r.moe, m);
    if (r.dp) {
      dist::CommStats moved = r.comm->stats();
      moved.all_reduce_bytes -= before.all_reduce_bytes;
      moved.reduce_scatter_bytes -= before.reduce_scatter_bytes;
      moved.all_gather_bytes -= before.all_gather_bytes;
      m["comm_bytes"] =
          moved.all_reduce_bytes + moved.reduce_scatter_bytes + moved.all_gather_bytes;
      dist::CommStats ep_moved = ep_stats(r);
      ep_moved.all_to_all_bytes -= ep_before.all_to_all_bytes;
      ep_moved.all_reduce_bytes -= ep_before.all_reduce_bytes;
      if (r.ep) {
        m["ep_all_to_all_bytes"] = ep_moved.all_to_all_bytes;
        m["expert_all_reduce_bytes"] = ep_moved.all_reduce_bytes;
      }
      m["ranks"] = per_rank_json(r, moved, ep_moved);
    }
    result.last_loss = loss, result.tok_s = tok_s, result.mfu = mfu;
    const bool last = r.step == tc.steps;
    if (r.val && ((tc.eval_every > 0 && r.step % tc.eval_every == 0) || last)) {
      result.last_eval_loss = evaluate(r);
      m["eval_loss"] = result.last_eval_loss;
    }
    r.log->append(metrics_line(r, m));
    if (tc.progress && r.comm->rank() == 0 &&
        (since_print.seconds() >= 1.0 || last || r.step == result.first_step + 1)) {
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
    bool stop = tc.stop && tc.stop->load();
    if (r.dp) stop = dist::sum_in_rank_order(*r.comm, stop ? 1 : 0) > 0;  // saving is collective
    if ((tc.save_every > 0 && r.step % tc.save_every == 0) || last || stop)
      save(r);
    else if (wall.seconds() > 5)
      r.log->flush(), wall.reset();
    if (stop) {
      result.interrupted = true;
      if (r.comm->rank() == 0) fmt::print(stderr, "interrupted: saved {}\n", r.last_checkpoint);
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
  // A sparse layer's active matmuls: the router, k routed experts and the shared expert.
  const model::MoeConfig& e = c.moe;
  const double moe = hid * e.num_experts + 3 * hid * (e.top_k * e.expert_intermediate) +
                     3 * hid * e.shared_intermediate + (e.shared_gate ? hid : 0);
  const int sparse = e.num_sparse_layers();
  const double matmul =
      c.num_layers * attn + (c.num_layers - sparse) * mlp + sparse * moe + hid * c.vocab_size;
  return 6 * matmul + 12.0 * c.num_layers * seq * c.q_dim();
}

namespace {

// Optimizer state of the single-process path from any checkpoint layout.
void load_single_process_optimizer(const std::string& dir, TrainModel& model, AdamW& opt) {
  if (!file_exists(path_join(dir, "index.json"))) return load_optimizer_state(dir, model, opt);
  const CheckpointReader reader(dir);
  for (size_t i = 0; i < model.params().size(); ++i) {
    const ParamRef& p = model.params()[i];
    reader.read(StateKind::kExpAvg, p.name, 0, p.value->numel(), opt.exp_avg()[i].data<float>());
    reader.read(StateKind::kExpAvgSq, p.name, 0, p.value->numel(),
                opt.exp_avg_sq()[i].data<float>());
  }
  const std::string path = path_join(dir, "trainer_state.json");
  opt.set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
}

void check_parallel_config(const TrainConfig& tc, const dist::Comm& comm) {
  if (tc.ep > 1 && tc.tp * tc.pp > 1)
    throw_error<ConfigError>(
        "--ep with --tp/--pp is not supported (expert parallelism runs with "
        "data parallelism only)");
  if (tc.ep > 1 && tc.zero == 3)
    throw_error<ConfigError>("--ep with --zero 3 is not supported (use --zero 0-2)");
  if (tc.ep > 1 && tc.recompute) throw_error<ConfigError>("--ep with --recompute is not supported");
  if (tc.ep < 1) throw_error<ConfigError>("--ep {}: must be at least 1", tc.ep);
  if (tc.tp * tc.pp > 1) return;  // the mesh checks its own shape (model_parallel_trainer.cc)
  if (tc.dp > 0 && tc.dp != comm.size())
    throw_error<ConfigError>("--dp {} but the launcher started {} rank(s) (mpirun -np {})", tc.dp,
                             comm.size(), tc.dp);
  if (tc.batch % comm.size() != 0)
    throw_error<ConfigError>("--batch {} (the global micro-batch) is not divisible by the {} ranks",
                             tc.batch, comm.size());
}

// Sets up the engine (data parallel path) or the single-process optimizer.
void setup_optimizer(Run& r, const std::optional<std::string>& ckpt) {
  const TrainConfig& tc = r.tc;
  const bool parallel = r.comm->size() > 1 || tc.zero > 0 || !tc.trace_path.empty() || tc.ep > 1;
  if (!parallel) {
    r.opt = std::make_unique<AdamW>(r.model->params(), tc.adam);
    if (ckpt) load_single_process_optimizer(*ckpt, *r.model, *r.opt);
    return;
  }
  if (!tc.trace_path.empty()) r.trace = std::make_unique<TraceRecorder>(r.comm->rank());
  DataParallelOptions o{tc.zero, tc.bucket_bytes, {}};
  if (tc.ep > 1) {
    r.ep = std::make_unique<ExpertDataParallel>(*r.model, *r.comm, tc.ep, r.pool, tc.adam);
    o.exclude = ExpertDataParallel::is_expert_param;
  }
  r.dp = std::make_unique<DataParallel>(*r.model, *r.comm, r.pool, o, tc.adam, r.trace.get());
  if (ckpt) {
    const CheckpointReader reader(*ckpt);
    load_sharded_state(reader, *ckpt, *r.dp);
    if (r.ep) r.ep->load(reader, *ckpt);
  }
  r.model->sync_compute_weights();
}

// True when `dir` was written by another layout (world size, ZeRO stage) than this run's.
bool layout_differs(const std::string& dir, const Run& r) {
  const std::string path = path_join(dir, "trainer_state.json");
  const Json j = read_json_file(path);
  return optional<int>(j, "world_size", 1, path) != r.comm->size() ||
         optional<int>(j, "zero", 0, path) != (r.dp ? r.dp->zero() : 0) ||
         optional<int>(j, "ep", 1, path) != (r.ep ? r.ep->ep() : 1);
}

}  // namespace

TrainResult run_training(const TrainConfig& config, ThreadPool& pool) {
  TrainConfig tc = config;
  tc.lr.total = tc.steps;
  Run r(tc, pool);
  r.comm = tc.comm ? tc.comm : &dist::world();
  check_parallel_config(tc, *r.comm);
  const bool rank0 = r.comm->rank() == 0;
  r.data = read_data_manifest(tc.data_dir);
  const std::optional<std::string> ckpt = tc.resume ? latest_checkpoint(tc.out_dir) : std::nullopt;
  if (tc.resume && !ckpt && rank0)
    fmt::print(stderr, "no checkpoint in {}: starting from step 0\n", tc.out_dir);
  // A sharded checkpoint's weights are whole on every rank until DataParallel takes its chunks;
  // a TP/PP run reads only its slices (model_parallel_checkpoint.h).
  if (ckpt)
    r.md = load_checkpoint_model(*ckpt, tc.tp * tc.pp == 1);
  else if (!tc.model_dir.empty())
    r.md = model::load_model_dir(tc.model_dir);
  else
    r.md = init_from_scratch(tc, r.data, *r.comm);
  if (r.data.vocab_size > r.md.config.vocab_size)
    throw_error<ConfigError>("the data's vocabulary ({}) is larger than the model's ({})",
                             r.data.vocab_size, r.md.config.vocab_size);
  check_moe_train_config(tc, r.md.config);
  // A resume keeps the run's aux-loss weight (config.json does not carry it).
  if (ckpt && tc.moe_aux_loss_coef < 0 && r.md.config.moe.enabled())
    tc.moe_aux_loss_coef =
        optional<double>(read_trainer_state(*ckpt).settings, "moe_aux_loss_coef", -1.0, *ckpt);
  r.settings = settings_of(tc, r.md.config, r.data);
  if (r.md.config.moe.enabled()) {
    r.settings["moe_aux_loss_coef"] = moe_aux_loss_weight(tc, r.md.config);
    r.settings["moe_bias_update_rate"] = tc.moe_bias_update_rate;
  }
  TrainerState state;
  if (ckpt) {
    state = read_trainer_state(*ckpt);
    const std::string diff = describe_settings_mismatch(state.settings, r.settings);
    if (!diff.empty())
      throw_error<ConfigError>("cannot resume from {}: its settings differ from this run's:\n{}",
                               *ckpt, diff);
  }
  if (tc.tp * tc.pp > 1) {
    state.settings = r.settings;
    return run_model_parallel_training(tc, r.md, r.data, state, ckpt, *r.comm, pool);
  }
  int64_t num_parameters = 0;  // of the whole model, before ZeRO-3 or --ep shard it
  model::ModelWeights whole = r.md.weights;
  for (const auto& field : weight_fields(whole, r.md.config.tie_word_embeddings))
    num_parameters += field.second->numel();
  if (tc.ep > 1) {  // this rank holds its experts only
    const EpPlacement e = ep_placement(r.md.config, r.comm->size(), r.comm->rank(), tc.ep);
    whole = keep_experts(r.md.weights, e.first, e.count);
    r.md.weights = whole;  // let the other experts' loaded tensors go
  }
  r.model = std::make_unique<TrainModel>(
      r.md.config, whole, pool,
      TrainModelOptions{tc.dtype, tc.recompute, moe_aux_loss_weight(tc, r.md.config)});
  setup_optimizer(r, ckpt);
  r.train = std::make_unique<TokenLoader>(tc.data_dir, "train", tc.seq, tc.seed, true);
  r.train->set_position({state.windows_served});
  if (!r.data.val_shards.empty())
    r.val = std::make_unique<TokenLoader>(tc.data_dir, "val", tc.seq, 0, false);
  r.files = model_dir_files(r.md);
  r.log = std::make_unique<TrainLog>(rank0 ? tc.log_path : "", ckpt ? state.step : -1);
  r.step = state.step;
  r.last_checkpoint = ckpt.value_or("");
  TrainResult result;
  result.first_step = r.step;
  result.num_parameters = num_parameters;
  try {
    // A resume with no step left and another layout reshards: it writes the checkpoint anew.
    if (ckpt && r.step >= tc.steps && layout_differs(*ckpt, r)) save(r);
    run_steps(r, result);
  } catch (const Error& e) {  // the third error boundary: report, keep the last checkpoint
    r.log->flush();
    fmt::print(stderr, "{}training stopped at step {}: {}\nlast good checkpoint: {}\n",
               r.comm->size() > 1 ? fmt::format("rank {}: ", r.comm->rank()) : "", r.step, e.what(),
               r.last_checkpoint.empty() ? "none" : r.last_checkpoint);
    throw;
  }
  r.log->flush();
  if (r.trace) {
    result.comm_hidden_fraction = r.trace->hidden_fraction("backward");
    write_trace(tc.trace_path, *r.trace, *r.comm);
  }
  result.checkpoint = r.last_checkpoint;
  return result;
}

}  // namespace lmstack::train
