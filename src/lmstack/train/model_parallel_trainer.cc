// The model-parallel step loop (see model_parallel_trainer.h).
#include "lmstack/train/model_parallel_trainer.h"

#include <array>
#include <cmath>
#include <optional>

#include "lmstack/core/error.h"
#include "lmstack/core/timer.h"
#include "lmstack/dist/mesh.h"
#include "lmstack/train/model_parallel.h"
#include "lmstack/train/model_parallel_checkpoint.h"
#include "lmstack/train/train_log.h"

namespace lmstack::train {
namespace {

struct MpRun {
  const TrainConfig& tc;
  const model::ModelDir& md;
  ThreadPool& pool;
  dist::Mesh& mesh;
  ModelParallel& mp;
  TokenLoader& train;
  TokenLoader* val;
  TrainLog& log;
  TrainerState state;
  model::ModelDirFiles files;
  int64_t step = 0;
  std::string last_checkpoint;
};

// Bytes this rank has sent in its TP (with the KV-replica sums), PP and DP groups so far
// (comm.h's cost model).
std::array<int64_t, 3> group_bytes(ModelParallel& mp) {
  dist::Mesh& mesh = mp.mesh();
  return {mesh.tp().stats().total() + mp.kv_comm_bytes(), mesh.pp().stats().total(),
          mesh.dp().stats().total()};
}

// This DP rank's sequences of `count` global micro-batches of `batch` sequences.
void read_batches(MpRun& r, TokenLoader& loader, int count, int batch,
                  std::vector<std::vector<int32_t>>& in, std::vector<std::vector<int32_t>>& tg,
                  std::vector<const int32_t*>& in_p, std::vector<const int32_t*>& tg_p) {
  const int dp = r.mesh.shape().dp, local = batch / dp;
  const size_t first = static_cast<size_t>(r.mesh.coord().dp) * static_cast<size_t>(local) *
                       static_cast<size_t>(r.tc.seq);
  in.resize(static_cast<size_t>(count)), tg.resize(static_cast<size_t>(count));
  in_p.clear(), tg_p.clear();
  for (int i = 0; i < count; ++i) {
    loader.next_batch(batch, in[static_cast<size_t>(i)], tg[static_cast<size_t>(i)]);
    in_p.push_back(in[static_cast<size_t>(i)].data() + first);
    tg_p.push_back(tg[static_cast<size_t>(i)].data() + first);
  }
}

double evaluate(MpRun& r) {
  TokenLoader& v = *r.val;
  v.set_position({0});
  const int b = static_cast<int>(std::min<int64_t>(r.tc.batch, v.num_windows()));
  const int batches = static_cast<int>(
      std::min<int64_t>(r.tc.eval_batches, std::max<int64_t>(1, v.num_windows() / r.tc.batch)));
  if (b % r.mesh.shape().dp != 0) return -1;  // no equal split of the validation batch
  std::vector<std::vector<int32_t>> in, tg;
  std::vector<const int32_t*> in_p, tg_p;
  read_batches(r, v, batches, b, in, tg, in_p, tg_p);
  const double sum = r.mp.evaluate(in_p, tg_p, b / r.mesh.shape().dp, r.tc.seq);
  return sum / (static_cast<double>(b) * r.tc.seq * batches);
}

// Pipeline statistics of this step over all ranks: the mean measured bubble, the formula,
// the schedule's simulated bubble and per-stage peak activation bytes (collective).
Json pipeline_json(MpRun& r, const std::array<int64_t, 3>& moved) {
  const PipelineStepStats& s = r.mp.last_stats();
  dist::Comm& w = r.mesh.world();
  const dist::MeshShape& shape = r.mesh.shape();
  const ModelParallelOptions& o = r.mp.options();
  const double bubble = dist::sum_in_rank_order(w, s.bubble) / w.size();
  const int m = r.tc.grad_accum;
  const PipelineSimulation sim = simulate_pipeline(o.schedule, shape.pp, m, o.chunks);
  std::vector<int64_t> mine = {s.peak_activation_bytes,
                               s.micro_batch_activation_bytes,
                               s.max_micro_batches_held,
                               moved[0],
                               moved[1],
                               moved[2],
                               r.mp.weight_bytes(),
                               r.mp.optimizer().state_bytes()};
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(w.size()));
  w.all_gather(mine.data(), all.data(), static_cast<int64_t>(mine.size() * sizeof(int64_t)),
               DType::kI8);
  Json stages = Json::array();
  for (int q = 0; q < w.size(); ++q) {
    const dist::MeshCoord c = dist::mesh_coord(shape, q);
    const int64_t* v = all.data() + static_cast<size_t>(q) * mine.size();
    stages.push_back({{"rank", q},
                      {"tp", c.tp},
                      {"dp", c.dp},
                      {"pp", c.pp},
                      {"peak_activation_bytes", v[0]},
                      {"micro_batch_activation_bytes", v[1]},
                      {"max_micro_batches_held", v[2]},
                      {"weights_bytes", v[6]},
                      {"gradients_bytes", v[6]},
                      {"optimizer_bytes", v[7]},
                      {"comm_bytes", {{"tp", v[3]}, {"pp", v[4]}, {"dp", v[5]}}}});
  }
  return {{"schedule", pipeline_schedule_name(o.schedule)},
          {"stages", shape.pp},
          {"chunks", o.chunks},
          {"micro_batches", m},
          {"sequence_parallel", r.tc.sequence_parallel && shape.tp > 1},
          {"layers_per_stage", r.mp.layers_per_stage()},
          {"bubble_measured", bubble},
          {"bubble_formula", pipeline_bubble_formula(o.schedule, shape.pp, m, o.chunks)},
          {"bubble_simulated", sim.bubble},
          {"ranks", stages}};
}

Json metrics_line(MpRun& r, Json measured) {
  const TrainConfig& tc = r.tc;
  const dist::MeshShape& s = r.mesh.shape();
  // Per-rank bytes are under measured.parallel.ranks: rank 0 alone is not what calc's even
  // split over tp x pp predicts (it holds the embedding).
  measured["flops_per_token"] = train_flops_per_token(r.md.config, tc.seq) / 3;
  Json setup = {{"dtype", "f32"},
                {"micro_batch", tc.batch / s.dp},
                {"batch", tc.batch},
                {"seq", tc.seq},
                {"grad_accum", tc.grad_accum},
                {"precision", "fp32"},
                {"recompute", "none"},
                {"threads", r.pool.num_threads()},
                {"tp", s.tp},
                {"pp", s.pp},
                {"dp", s.dp},
                {"zero", 0},
                {"sequence_parallel", tc.sequence_parallel && s.tp > 1},
                {"flops_convention", "palm"}};
  Json line = {{"schema", "lmstack.run.v1"},
               {"kind", "train"},
               {"model", r.md.config.to_json()},
               {"setup", setup},
               {"measured", measured}};
  if (!tc.machine.is_null()) line["machine"] = tc.machine;
  return line;
}

// The log before the checkpoint, for the reason trainer.cc's save() gives.
void save(MpRun& r) {
  r.log.flush();
  r.state.step = r.step;
  r.state.windows_served = r.train.position().windows_served;
  const std::string dir = save_model_parallel_checkpoint(r.tc.out_dir, r.mp, r.md.config, r.state,
                                                         r.files, r.tc.keep_checkpoints);
  r.last_checkpoint = dir;
}

// One optimizer step; returns (mean loss, grad norm before clipping).
std::pair<double, double> train_step(MpRun& r) {
  const TrainConfig& tc = r.tc;
  r.mp.zero_grads();
  std::vector<std::vector<int32_t>> in, tg;
  std::vector<const int32_t*> in_p, tg_p;
  read_batches(r, r.train, tc.grad_accum, tc.batch, in, tg, in_p, tg_p);
  const double tokens = static_cast<double>(tc.batch) * tc.seq * tc.grad_accum;
  const double loss = r.mp.forward_backward(in_p, tg_p, tc.batch / r.mesh.shape().dp, tc.seq,
                                            static_cast<float>(1.0 / tokens)) /
                      tokens;
  if (!std::isfinite(loss))
    throw_error<Error>("step {}: the loss is {}; stopping without saving this state", r.step + 1,
                       loss);
  const double norm = r.mp.clip_grad_norm(tc.grad_clip);
  r.mp.optimizer_step(static_cast<float>(learning_rate(tc.lr, r.step)));
  ++r.step;
  return {loss, norm};
}

void run_steps(MpRun& r, TrainResult& result) {
  const TrainConfig& tc = r.tc;
  const double tokens_per_step = static_cast<double>(tc.batch) * tc.seq * tc.grad_accum;
  const bool rank0 = r.mesh.world().rank() == 0;
  while (r.step < tc.steps) {
    Timer t;
    const double lr = learning_rate(tc.lr, r.step);
    const std::array<int64_t, 3> before = group_bytes(r.mp);
    const auto [loss, norm] = train_step(r);
    const double dt = t.seconds();
    Json m = {{"step", r.step},
              {"loss", loss},
              {"lr", lr},
              {"grad_norm", norm},
              {"tok_s", tokens_per_step / dt},
              {"train_tok_s", tokens_per_step / dt},
              {"step_s", dt}};
    std::array<int64_t, 3> moved = group_bytes(r.mp);
    for (size_t i = 0; i < moved.size(); ++i) moved[i] -= before[i];
    m["parallel"] = pipeline_json(r, moved);
    result.last_loss = loss, result.tok_s = tokens_per_step / dt;
    const bool last = r.step == tc.steps;
    if (r.val && ((tc.eval_every > 0 && r.step % tc.eval_every == 0) || last)) {
      result.last_eval_loss = evaluate(r);
      if (result.last_eval_loss >= 0) m["eval_loss"] = result.last_eval_loss;
    }
    r.log.append(metrics_line(r, m));
    if (tc.progress && rank0)
      fmt::print(stderr,
                 "step {}/{}  loss {:.4f}  lr {:.2e}  gnorm {:.3f}  {:.0f} tok/s  bubble "
                 "{:.3f} (formula {:.3f})\n",
                 r.step, tc.steps, loss, lr, norm, tokens_per_step / dt,
                 m["parallel"]["bubble_measured"].get<double>(),
                 m["parallel"]["bubble_formula"].get<double>());
    bool stop = tc.stop && tc.stop->load();
    stop = dist::sum_in_rank_order(r.mesh.world(), stop ? 1 : 0) > 0;
    if ((tc.save_every > 0 && r.step % tc.save_every == 0) || last || stop) save(r);
    if (stop) {
      result.interrupted = true;
      break;
    }
  }
  result.last_step = r.step;
}

ModelParallelOptions mp_options(const TrainConfig& tc) {
  ModelParallelOptions o;
  o.schedule = parse_pipeline_schedule(tc.pp_schedule);
  o.chunks = tc.pp_chunks;
  o.pp_layers = tc.pp_layers;
  o.sequence_parallel = tc.sequence_parallel;
  return o;
}

}  // namespace

TrainResult run_model_parallel_training(const TrainConfig& tc, const model::ModelDir& md,
                                        const DataManifest& data, const TrainerState& state,
                                        const std::optional<std::string>& ckpt, dist::Comm& world,
                                        ThreadPool& pool) {
  (void)data;
  if (md.config.mla.enabled())  // issue 16: slicing W_kvb / W_q per head is not written
    throw_error<ConfigError>(
        "--tp/--pp training of {} (multi-head latent attention) is not implemented; data "
        "parallelism (--zero 0-3) trains it",
        md.config.architecture);
  if (tc.dtype != DType::kF32 || tc.recompute || tc.zero != 0)
    throw_error<ConfigError>("--tp/--pp training runs in f32 without --recompute or --zero");
  const int tpp = tc.tp * tc.pp;
  if (world.size() % tpp != 0)
    throw_error<ConfigError>("--tp {} x --pp {} = {} does not divide the {} ranks started", tc.tp,
                             tc.pp, tpp, world.size());
  dist::MeshShape shape{tc.tp, tc.pp, tc.dp > 0 ? tc.dp : world.size() / tpp};
  dist::Mesh mesh(world, shape);
  if (tc.batch % shape.dp != 0)
    throw_error<ConfigError>("--batch {} (the global micro-batch) is not divisible by --dp {}",
                             tc.batch, shape.dp);
  const bool rank0 = world.rank() == 0;
  if (rank0 && tc.progress) fmt::print(stderr, "{}\n", dist::describe_mesh(shape));
  std::unique_ptr<TraceRecorder> trace;
  if (!tc.trace_path.empty()) trace = std::make_unique<TraceRecorder>(world.rank());
  // From a checkpoint each rank reads only its own slices (md holds no weights then).
  ModelParallelOptions options = mp_options(tc);
  std::optional<CheckpointReader> reader;
  model::ModelWeights sliced;
  if (ckpt) {
    reader.emplace(*ckpt);
    sliced = read_model_parallel_weights(*reader, shape, mesh.coord(), options);
    options.sliced_weights = true;
  }
  ModelParallel mp(md.config, ckpt ? sliced : md.weights, mesh, pool, options, tc.adam,
                   trace.get());
  if (ckpt) load_model_parallel_optimizer(*reader, *ckpt, mp);
  TokenLoader train(tc.data_dir, "train", tc.seq, tc.seed, true);
  train.set_position({state.windows_served});
  std::unique_ptr<TokenLoader> val;
  if (!read_data_manifest(tc.data_dir).val_shards.empty())
    val = std::make_unique<TokenLoader>(tc.data_dir, "val", tc.seq, 0, false);
  TrainLog log(rank0 ? tc.log_path : "", ckpt ? state.step : -1);
  MpRun r{tc,         md,
          pool,       mesh,
          mp,         train,
          val.get(),  log,
          state,      model_dir_files(md),
          state.step, ckpt.value_or("")};
  TrainResult result;
  result.first_step = r.step;
  for (const ParamRef& p : mp.params())
    if (mp.owns(p)) result.num_parameters += p.value->numel();
  result.num_parameters = static_cast<int64_t>(
      dist::sum_in_rank_order(world, static_cast<double>(result.num_parameters)));
  try {
    run_steps(r, result);
  } catch (const Error& e) {
    log.flush();
    fmt::print(stderr, "rank {}: training stopped at step {}: {}\nlast good checkpoint: {}\n",
               world.rank(), r.step, e.what(),
               r.last_checkpoint.empty() ? "none" : r.last_checkpoint);
    throw;
  }
  log.flush();
  if (trace) write_trace(tc.trace_path, *trace, world);
  result.checkpoint = r.last_checkpoint;
  return result;
}

}  // namespace lmstack::train
