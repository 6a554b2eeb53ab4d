// The schedule executor and the gradient reductions of ModelParallel (see model_parallel.h).
// Virtual stage vs = chunk·P + stage holds layer block vs of P·v; its forward input comes
// from virtual stage vs - 1 (rank stage - 1 mod P) and its output gradient from vs + 1. Every
// transfer has its own tag (micro-batch, destination virtual stage, direction), so messages
// match whatever the order in which they arrive.
#include "lmstack/train/model_parallel.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include "lmstack/core/error.h"
#include "lmstack/core/timer.h"

namespace lmstack::train {
namespace {

using Clock = TraceRecorder::Clock;

int transfer_tag(int mb, int dest_vs, int virtual_stages, bool gradient) {
  return (mb * virtual_stages + dest_vs) * 2 + (gradient ? 1 : 0);
}

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Drives the sends of a step to completion while the stage computes. MPI moves a message
// larger than its eager limit (a rendezvous) only while the sender is inside an MPI call, so
// a stage computing its next micro-batches would otherwise hold back the activation its
// neighbour waits for until its own next wait (measured: a GPipe stage 1 idle through all of
// stage 0's forwards). A thread testing the pending sends every 100 µs keeps the progress
// engine running (MPI_THREAD_MULTIPLE, comm.h); the receives posted ahead progress with it.
// In-process sends complete at once and the thread has nothing to do.
class SendProgress {
 public:
  SendProgress() : thread_([this] { loop(); }) {}
  ~SendProgress() { finish(); }
  void add(dist::RequestPtr r) {
    std::lock_guard lock(mu_);
    pending_.push_back(std::move(r));
  }
  // Stops the thread and waits for every send still pending.
  void finish() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    for (auto& r : pending_) r->wait();
    pending_.clear();
  }

 private:
  void loop() {
    while (!stop_) {
      {
        std::lock_guard lock(mu_);
        std::erase_if(pending_, [](const dist::RequestPtr& r) { return r->test(); });
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  std::mutex mu_;
  std::vector<dist::RequestPtr> pending_;  // GUARDED_BY(mu_) while the thread runs
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

std::vector<int> pipeline_layer_split(int num_layers, int vstages, const std::vector<int>& o) {
  if (!o.empty()) {
    if (static_cast<int>(o.size()) != vstages)
      throw_error<ConfigError>("--pp-layers has {} entries; the pipeline has {} (virtual) stages",
                               o.size(), vstages);
    if (std::accumulate(o.begin(), o.end(), 0) != num_layers)
      throw_error<ConfigError>("--pp-layers sums to {}; the model has {} layers",
                               std::accumulate(o.begin(), o.end(), 0), num_layers);
    for (int n : o)
      if (n < 1) throw_error<ConfigError>("--pp-layers: every stage needs at least one layer");
    return o;
  }
  if (num_layers < vstages)
    throw_error<ConfigError>("{} layers cannot fill {} (virtual) pipeline stages", num_layers,
                             vstages);
  std::vector<int> out(static_cast<size_t>(vstages), num_layers / vstages);
  for (int i = 0; i < num_layers % vstages; ++i) ++out[static_cast<size_t>(i)];
  return out;
}

std::vector<StagePlan> stage_plans(const model::ModelConfig& config, const dist::MeshShape& shape,
                                   int pp_rank, const ModelParallelOptions& o) {
  const int v = o.schedule == PipelineSchedule::kInterleaved ? o.chunks : 1;
  const int vstages = shape.pp * v;
  const std::vector<int> counts = pipeline_layer_split(config.num_layers, vstages, o.pp_layers);
  std::vector<StagePlan> plans;
  for (int c = 0; c < v; ++c) {
    const int vs = c * shape.pp + pp_rank;
    StagePlan plan;
    plan.first_layer = std::accumulate(counts.begin(), counts.begin() + vs, 0);
    plan.num_layers = counts[static_cast<size_t>(vs)];
    plan.embed = vs == 0;
    plan.head = vs == vstages - 1;
    plan.sliced_weights = o.sliced_weights;
    plans.push_back(plan);
  }
  return plans;
}

ModelParallel::ModelParallel(const model::ModelConfig& config, const model::ModelWeights& w,
                             dist::Mesh& mesh, ThreadPool& pool, const ModelParallelOptions& o,
                             const AdamWConfig& adam, TraceRecorder* trace)
    : config_(config), mesh_(mesh), pool_(pool), options_(o), trace_(trace) {
  const dist::MeshShape& s = mesh.shape();
  if (options_.schedule != PipelineSchedule::kInterleaved) options_.chunks = 1;
  if (config.tie_word_embeddings && s.pp > 1)
    throw_error<ConfigError>(
        "{} ties its embeddings; pipeline parallelism (--pp {}) needs them "
        "untied (the embedding and lm_head live on different stages)",
        config.architecture, s.pp);
  tp_ = tp_layout(config, s.tp, mesh.coord().tp);
  tp_.sequence_parallel = o.sequence_parallel && s.tp > 1;
  if (tp_.kv_replicas > 1) kv_comm_ = mesh.tp().split(tp_.kv_head_begin, mesh.coord().tp);
  layer_counts_ = pipeline_layer_split(config.num_layers, s.pp * options_.chunks, o.pp_layers);
  for (const StagePlan& plan : stage_plans(config, s, mesh.coord().pp, options_)) {
    chunks_.push_back(std::make_unique<StageModel>(config, w, plan, tp_, mesh.tp(), pool));
    for (ParamRef& ref : chunks_.back()->params()) params_.push_back(ref);
  }
  opt_ = std::make_unique<AdamW>(params_, adam);
}

ModelParallel::~ModelParallel() = default;

void ModelParallel::zero_grads() {
  for (auto& c : chunks_) c->zero_grads();
}

bool ModelParallel::owns(const ParamRef& p) const {
  if (mesh_.coord().dp != 0) return false;
  if (tp_split_of(p.name) == TpSplit::kReplicated) return mesh_.coord().tp == 0;
  const bool kv = p.name.ends_with(".wk") || p.name.ends_with(".wv") || p.name.ends_with(".bk") ||
                  p.name.ends_with(".bv");
  return !kv || mesh_.coord().tp % tp_.kv_replicas == 0;
}

int64_t ModelParallel::weight_bytes() const {
  int64_t n = 0;
  for (const ParamRef& p : params_) n += p.value->nbytes();
  return n;
}

double ModelParallel::forward_backward(const std::vector<const int32_t*>& inputs,
                                       const std::vector<const int32_t*>& targets, int batch,
                                       int seq, float grad_scale) {
  const double local = run_schedule(inputs, targets, batch, seq, grad_scale, true);
  reduce_gradients();
  return local;
}

double ModelParallel::evaluate(const std::vector<const int32_t*>& inputs,
                               const std::vector<const int32_t*>& targets, int batch, int seq) {
  return run_schedule(inputs, targets, batch, seq, 0.0f, false);
}

// Runs this rank's actions; returns the Σ token losses over the world's last stages (every
// rank gets it: TP rank 0 of each last-stage DP replica contributes, summed in rank order).
double ModelParallel::run_schedule(const std::vector<const int32_t*>& inputs,
                                   const std::vector<const int32_t*>& targets, int batch, int seq,
                                   float grad_scale, bool train) {
  const int p = mesh_.shape().pp, v = options_.chunks, stage = mesh_.coord().pp;
  const int m = static_cast<int>(inputs.size()), vstages = p * v;
  const int64_t rows = chunks_.front()->boundary_floats(batch, seq);
  std::vector<PipelineAction> actions;
  if (train) {
    actions = pipeline_actions(options_.schedule, p, m, v, stage);
  } else {  // forwards only, in micro-batch then chunk order
    for (int i = 0; i < m; ++i)
      for (int c = 0; c < v; ++c) actions.push_back({false, i, c});
  }
  dist::Comm& pp = mesh_.pp();
  const int prev = (stage - 1 + p) % p, next = (stage + 1) % p;
  // Receives posted ahead: action index -> (request, buffer).
  std::vector<dist::RequestPtr> recv_req(actions.size());
  std::vector<std::vector<float>> recv_buf(actions.size());
  auto post_recv = [&](size_t i) {
    if (i >= actions.size() || recv_req[i]) return;
    const PipelineAction& a = actions[i];
    const int vs = a.chunk * p + stage;
    const bool needs = a.backward ? vs < vstages - 1 : vs > 0;
    if (!needs) return;
    recv_buf[i].resize(static_cast<size_t>(rows));
    recv_req[i] = pp.irecv(recv_buf[i].data(), rows, DType::kF32, a.backward ? next : prev,
                           transfer_tag(a.micro_batch, vs, vstages, a.backward));
  };
  std::vector<std::vector<float>> send_bufs;  // alive until every send has completed
  SendProgress sends;
  auto send = [&](const float* data, int dest_rank, int tag) {
    send_bufs.emplace_back(data, data + rows);
    sends.add(pp.isend(send_bufs.back().data(), rows, DType::kF32, dest_rank, tag));
  };
  stats_ = {};
  for (auto& c : chunks_) c->reset_peak();
  double loss = 0, busy = 0;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    StageModel& chunk = *chunks_[static_cast<size_t>(a.chunk)];
    const int vs = a.chunk * p + stage;
    post_recv(i);
    if (recv_req[i]) {
      const Clock::time_point w0 = Clock::now();
      recv_req[i]->wait();
      if (trace_) trace_->span("recv", "p2p", TraceRecorder::kCommTrack, w0, Clock::now());
    }
    post_recv(i + 1);
    const Clock::time_point t0 = Clock::now();
    if (!a.backward) {
      const int64_t chunk_before = chunk.activation_bytes();
      loss += chunk.forward(a.micro_batch, inputs[static_cast<size_t>(a.micro_batch)],
                            recv_buf[i].data(), targets[static_cast<size_t>(a.micro_batch)], batch,
                            seq, grad_scale);
      if (!train) {
        if (vs < vstages - 1)
          send(chunk.output(a.micro_batch), next,
               transfer_tag(a.micro_batch, vs + 1, vstages, false));
        chunk.discard(a.micro_batch);
      } else if (vs < vstages - 1) {
        send(chunk.output(a.micro_batch), next,
             transfer_tag(a.micro_batch, vs + 1, vstages, false));
      }
      int64_t held = 0;
      int held_mb = 0;
      for (auto& c : chunks_) held += c->activation_bytes(), held_mb += c->micro_batches_held();
      stats_.peak_activation_bytes = std::max(stats_.peak_activation_bytes, held);
      stats_.max_micro_batches_held = std::max(stats_.max_micro_batches_held, held_mb);
      // One micro-batch's bytes over all chunks: micro-batch 0's forward on each.
      if (train && a.micro_batch == 0)
        stats_.micro_batch_activation_bytes += chunk.activation_bytes() - chunk_before;
    } else {
      const float* dx =
          chunk.backward(a.micro_batch, recv_buf[i].empty() ? nullptr : recv_buf[i].data());
      if (vs > 0) send(dx, prev, transfer_tag(a.micro_batch, vs - 1, vstages, true));
    }
    const Clock::time_point t1 = Clock::now();
    busy += seconds(t0, t1);
    if (trace_)
      trace_->span(fmt::format("{} mb{} c{}", a.backward ? "B" : "F", a.micro_batch, a.chunk),
                   a.backward ? "backward" : "forward", TraceRecorder::kComputeTrack, t0, t1);
    recv_buf[i].clear();
    recv_buf[i].shrink_to_fit();
  }
  sends.finish();
  stats_.step_s = seconds(start, Clock::now());
  stats_.busy_s = busy;
  stats_.bubble = busy > 0 ? (stats_.step_s - busy) / busy : 0;
  const bool counts = mesh_.is_last_stage() && mesh_.coord().tp == 0;
  return dist::sum_in_rank_order(mesh_.world(), counts ? loss : 0.0);
}

void ModelParallel::reduce_gradients() {
  std::vector<dist::RequestPtr> pending;
  if (tp_.sequence_parallel) {  // norm weights saw only this rank's token rows
    for (ParamRef& p : params_)
      if (tp_split_of(p.name) == TpSplit::kReplicated)
        pending.push_back(mesh_.tp().iall_reduce(p.grad->raw_data(), p.grad->numel(), DType::kF32));
    for (auto& r : pending) r->wait();
    pending.clear();
  }
  if (kv_comm_) {
    for (ParamRef& p : params_) {
      const bool kv = p.name.ends_with(".wk") || p.name.ends_with(".wv") ||
                      p.name.ends_with(".bk") || p.name.ends_with(".bv");
      if (kv)
        pending.push_back(kv_comm_->iall_reduce(p.grad->raw_data(), p.grad->numel(), DType::kF32));
    }
    for (auto& r : pending) r->wait();
    pending.clear();
  }
  if (mesh_.dp().size() > 1) {
    for (ParamRef& p : params_)
      pending.push_back(mesh_.dp().iall_reduce(p.grad->raw_data(), p.grad->numel(), DType::kF32));
    for (auto& r : pending) r->wait();
  }
}

double ModelParallel::clip_grad_norm(double max_norm) {
  double local = 0;
  for (const ParamRef& p : params_)
    if (owns(p)) local += sum_squares(pool_, p.grad->data<float>(), p.grad->numel());
  const double norm = std::sqrt(dist::sum_in_rank_order(mesh_.world(), local));
  const double coef = max_norm / (norm + 1e-6);  // torch.nn.utils.clip_grad_norm_'s
  if (max_norm > 0 && coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (ParamRef& p : params_) {
      float* g = p.grad->data<float>();
      for (int64_t i = 0; i < p.grad->numel(); ++i) g[i] *= c;
    }
  }
  return norm;
}

void ModelParallel::optimizer_step(float lr) { opt_->step(pool_, lr); }

}  // namespace lmstack::train
