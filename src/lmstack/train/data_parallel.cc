// Data parallelism and ZeRO 1-3 over flat units (contracts in data_parallel.h). A unit's
// buffers, by stage (P = padded unit size, c = P / N; "send" is where stage 1 receives its
// reduce-scattered gradient chunk; stages 1-2 all-gather the updated weights in place, each
// rank's chunk already at its place in values):
//               values [P]      grads [P]             shard_values [c]  shard_grads [c]  m, v
//   stage 0     always          always                -                 -                [P]
//   stage 1     always          always                -                 (in send)        [c]
//   stage 2     always          backward .. reduced   -                 always           [c]
//   stage 3     gathered spans  backward .. reduced   always            always           [c]
// Stages 1-3 reduce-scatter the gradients and all-gather the weights: 2(N-1)/N x the unit's
// bytes, the volume of stage 0's all-reduce (ZeRO paper, section 7.2.1).
#include "lmstack/train/data_parallel.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "lmstack/core/error.h"

namespace lmstack::train {
namespace {

// A non-blocking collective in flight, traced from its start to the first time it was seen
// complete (test() in a hook, or wait()).
struct Pending {
  dist::RequestPtr request;
  TraceRecorder::Clock::time_point begin;
  std::string name;
  bool traced = false;
};

// Records p's span (once) now that it has been seen complete.
void trace_done(Pending& p, TraceRecorder* trace) {
  if (trace && !p.traced)
    trace->span(p.name, "comm", TraceRecorder::kCommTrack, p.begin, TraceRecorder::now());
  p.traced = true;
}

Tensor floats(int64_t n, MemoryCategory category) {
  return Tensor::zeros(Shape{n}, DType::kF32, category);
}

}  // namespace

struct DataParallel::Unit {
  Tensor values, grads, shard_values, shard_grads, m, v, send;
  Pending reduce, gather;
};

DataParallel::DataParallel(TrainModel& model, dist::Comm& comm, ThreadPool& pool,
                           const DataParallelOptions& options, const AdamWConfig& adam,
                           TraceRecorder* trace)
    : model_(model), comm_(comm), pool_(pool), options_(options), adam_(adam), trace_(trace) {
  if (options.zero < 0 || options.zero > 3)
    throw_error<ConfigError>("--zero {}: ZeRO stages are 0, 1, 2 and 3", options.zero);
  if (options.zero == 3 && model.options().compute_dtype != DType::kF32)
    throw_error<ConfigError>(
        "--zero 3 trains in f32 only (the bf16 matmul copies are not sharded)");
  const int r = comm.rank();
  layout_ = FlatLayout::build(model.params(), model.config().num_layers, comm.size(),
                              options.bucket_bytes, options.zero == 3, options.exclude);
  for (const FlatUnit& fu : layout_.units) {
    auto u = std::make_unique<Unit>();
    u->values = floats(fu.padded, MemoryCategory::kWeights);
    for (const FlatParam& p : fu.params)
      std::memcpy(u->values.data<float>() + p.offset, model.params()[p.index].value->raw_data(),
                  static_cast<size_t>(p.numel) * sizeof(float));
    if (options.zero == 3) {
      u->shard_values = floats(fu.chunk, MemoryCategory::kWeights);
      std::memcpy(u->shard_values.raw_data(), u->values.data<float>() + r * fu.chunk,
                  static_cast<size_t>(fu.chunk) * sizeof(float));
      u->values = Tensor();
    }
    if (options.zero <= 1) u->grads = floats(fu.padded, MemoryCategory::kGradients);
    if (options.zero >= 2) u->shard_grads = floats(fu.chunk, MemoryCategory::kGradients);
    const int64_t owned = options.zero == 0 ? fu.padded : fu.chunk;
    u->m = floats(owned, MemoryCategory::kOptimizer);
    u->v = floats(owned, MemoryCategory::kOptimizer);
    if (options.zero == 1) u->send = floats(fu.chunk, MemoryCategory::kBuffers);
    units_.push_back(std::move(u));
  }
  for (size_t i = 0; i < units_.size(); ++i) bind_unit(static_cast<int>(i));
  model_.set_hooks(this);
  account();
  reset_peaks();
}

DataParallel::~DataParallel() {
  model_.set_hooks(nullptr);
  for (auto& u : units_) {  // never free a buffer under a transfer in flight
    if (u->reduce.request) u->reduce.request->wait();
    if (u->gather.request) u->gather.request->wait();
  }
}

void DataParallel::bind_unit(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  for (const FlatParam& p : layout_.units[static_cast<size_t>(index)].params) {
    auto view = [&](const Tensor& flat) {
      return flat.defined() ? flat.slice(p.offset, p.offset + p.numel).reshape(p.shape) : Tensor();
    };
    model_.bind_param(p.index, view(u.values), view(u.grads));
  }
}

void DataParallel::account() {
  held_.weights = held_.gradients = held_.optimizer = 0;
  for (const auto& u : units_) {
    for (const Tensor* t : {&u->values, &u->shard_values})
      if (t->defined()) held_.weights += t->nbytes();
    for (const Tensor* t : {&u->grads, &u->shard_grads})
      if (t->defined()) held_.gradients += t->nbytes();
    held_.optimizer += u->m.nbytes() + u->v.nbytes();
  }
  held_.peak_weights = std::max(held_.peak_weights, held_.weights);
  held_.peak_gradients = std::max(held_.peak_gradients, held_.gradients);
}

void DataParallel::reset_peaks() {
  held_.peak_weights = held_.weights;
  held_.peak_gradients = held_.gradients;
}

std::pair<int64_t, int64_t> DataParallel::owned_range(size_t u) const {
  const FlatUnit& fu = layout_.units[u];
  if (options_.zero == 0) return {0, fu.padded};
  const int64_t lo = comm_.rank() * fu.chunk;
  return {lo, lo + fu.chunk};
}

float* DataParallel::owned_values(size_t u) {
  Unit& unit = *units_[u];
  if (options_.zero == 3) return unit.shard_values.data<float>();
  return unit.values.data<float>() + owned_range(u).first;
}
float* DataParallel::reduced_grads(size_t u) {
  Unit& unit = *units_[u];
  if (options_.zero == 0) return unit.grads.data<float>();
  return options_.zero == 1 ? unit.send.data<float>() : unit.shard_grads.data<float>();
}

float* DataParallel::owned_exp_avg(size_t u) { return units_[u]->m.data<float>(); }
float* DataParallel::owned_exp_avg_sq(size_t u) { return units_[u]->v.data<float>(); }

// ---- hooks ----------------------------------------------------------------------------------

// The span of `group`'s forward or backward (`phase`), from its before_* hook to now.
void DataParallel::trace_compute(const char* phase, int group) {
  if (!trace_) return;
  const int head = layout_.num_groups - 1;
  const std::string what = group == 0      ? "embed"
                           : group == head ? "head"
                                           : fmt::format("layer {}", group - 1);
  trace_->span(fmt::format("{} {}", phase, what), phase, TraceRecorder::kComputeTrack, span_begin_,
               TraceRecorder::now());
}

std::vector<int> DataParallel::units_read(int group, bool backward) const {
  if (options_.zero != 3 || group < 0 || group >= layout_.num_groups) return {};
  if (backward && group == 0) return {};  // the embedding backward reads no weight
  std::vector<int> out = {layout_.unit_of_group[static_cast<size_t>(group)]};
  const bool tied = model_.config().tie_word_embeddings;
  if (group == layout_.num_groups - 1 && tied) out.push_back(layout_.unit_of_group[0]);
  return out;
}

void DataParallel::begin_micro_batch(bool last) { last_micro_batch_ = last; }

void DataParallel::before_forward(int group) {
  span_begin_ = TraceRecorder::now();
  for (int u : units_read(group, false)) ensure_gathered(u);
  for (int u : units_read(group + 1, false)) start_gather(u);  // prefetch the next layer
  progress();
}

void DataParallel::after_forward(int group) {
  trace_compute("forward", group);
  if (group != layout_.num_groups - 1)  // the head's backward follows at once: keep it
    for (int u : units_read(group, false)) release(u);
  progress();
}

void DataParallel::before_backward(int group) {
  span_begin_ = TraceRecorder::now();
  for (int u : units_read(group, true)) ensure_gathered(u);
  for (int u : units_read(group - 1, true)) start_gather(u);
  if (options_.zero >= 2) {
    ensure_grads(layout_.unit_of_group[static_cast<size_t>(group)]);
    if (group == layout_.num_groups - 1 && model_.config().tie_word_embeddings)
      ensure_grads(layout_.unit_of_group[0]);  // lm_head's gradient lands in embed's
  }
  progress();
}

void DataParallel::after_backward(int group) {
  trace_compute("backward", group);
  for (int u : units_read(group, true)) release(u);
  const int unit = layout_.unit_of_group[static_cast<size_t>(group)];
  if (last_micro_batch_ && layout_.units[static_cast<size_t>(unit)].groups.back() == group)
    start_reduction(unit);
  progress();
}

// ---- communication --------------------------------------------------------------------------

void DataParallel::progress() {
  for (auto& u : units_)
    for (Pending* p : {&u->reduce, &u->gather})
      if (p->request && !p->traced && p->request->test()) trace_done(*p, trace_);
}

namespace {
void finish(Pending& p, TraceRecorder* trace) {
  if (!p.request) return;
  p.request->wait();
  trace_done(p, trace);
  p = Pending();
}
}  // namespace

void DataParallel::start_reduction(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  const FlatUnit& fu = layout_.units[static_cast<size_t>(index)];
  const double mb = static_cast<double>(fu.padded) * 4 / 1e6;
  u.reduce.begin = TraceRecorder::now();
  if (options_.zero == 0) {
    u.reduce.name = fmt::format("all-reduce bucket {} ({:.2f} MB)", index, mb);
    u.reduce.request = comm_.iall_reduce(u.grads.raw_data(), fu.padded, DType::kF32);
  } else {
    u.reduce.name = fmt::format("reduce-scatter unit {} ({:.2f} MB)", index, mb);
    u.reduce.request =
        comm_.ireduce_scatter(u.grads.raw_data(), reduced_grads(index), fu.chunk, DType::kF32);
  }
}

void DataParallel::start_gather(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  if (u.values.defined() || u.gather.request) return;
  const FlatUnit& fu = layout_.units[static_cast<size_t>(index)];
  u.values = floats(fu.padded, MemoryCategory::kWeights);
  u.gather.begin = TraceRecorder::now();
  u.gather.name = fmt::format("all-gather unit {}", index);
  u.gather.request =
      comm_.iall_gather(u.shard_values.raw_data(), u.values.raw_data(), fu.chunk, DType::kF32);
  account();
}

void DataParallel::ensure_gathered(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  if (u.values.defined() && !u.gather.request) return;
  start_gather(index);
  finish(u.gather, trace_);
  bind_unit(index);
}

void DataParallel::release(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  finish(u.gather, trace_);
  u.values = Tensor();
  bind_unit(index);
  account();
}

void DataParallel::release_gathered() {
  if (options_.zero != 3) return;
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i]->values.defined()) release(static_cast<int>(i));
}

void DataParallel::ensure_grads(int index) {
  Unit& u = *units_[static_cast<size_t>(index)];
  if (u.grads.defined()) return;
  u.grads = floats(layout_.units[static_cast<size_t>(index)].padded, MemoryCategory::kGradients);
  bind_unit(index);
  account();
}

void DataParallel::zero_grads() {
  for (auto& u : units_)
    if (u->grads.defined())
      std::memset(u->grads.raw_data(), 0, static_cast<size_t>(u->grads.nbytes()));
}

void DataParallel::finish_gradients() {
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    finish(u.reduce, trace_);
    if (options_.zero >= 2 && u.grads.defined()) {  // only the reduced chunk is kept
      u.grads = Tensor();
      bind_unit(static_cast<int>(i));
    }
  }
  account();
}

// ---- optimizer ------------------------------------------------------------------------------

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0 || max_norm / (norm + 1e-6) >= 1.0) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

double DataParallel::clip_grad_norm(double max_norm, double extra_sum_squares) {
  // Σ g² over this rank's chunk of every unit (stages 0 and 1 hold identical full gradients,
  // so each rank counts only its chunk), then summed over ranks in rank order.
  double local = extra_sum_squares;
  for (size_t i = 0; i < units_.size(); ++i) {
    const int64_t chunk = layout_.units[i].chunk;
    local += sum_squares(pool_, reduced_grads(i) + (options_.zero == 0 ? comm_.rank() * chunk : 0),
                         chunk);
  }
  const double norm = std::sqrt(dist::sum_in_rank_order(comm_, local));
  const float coef = clip_coefficient(norm, max_norm);
  if (coef == 1.0f) return norm;
  for (size_t i = 0; i < units_.size(); ++i) {
    const auto [lo, hi] = owned_range(i);
    float* g = reduced_grads(i);
    for (int64_t j = 0; j < hi - lo; ++j) g[j] *= coef;
  }
  return norm;
}

void DataParallel::optimizer_step(float lr) {
  ++steps_;
  const AdamWStep s = AdamWStep::at(adam_, steps_, lr);
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    const auto [lo, hi] = owned_range(i);
    float* p = owned_values(i);
    const float* g = reduced_grads(i);
    for (const ParamSlice& sl : params_in_range(layout_.units[i], lo, hi)) {
      const int64_t off = sl.unit_offset - lo;
      adamw_update(pool_, s, sl.param->decay, p + off, g + off, u.m.data<float>() + off,
                   u.v.data<float>() + off, sl.end - sl.begin);
    }
  }
  gather_weights();
}

void DataParallel::gather_weights() {
  if (options_.zero != 1 && options_.zero != 2) return;
  const auto begin = TraceRecorder::now();
  std::vector<dist::RequestPtr> requests;
  for (size_t i = 0; i < units_.size(); ++i) {
    Unit& u = *units_[i];
    const FlatUnit& fu = layout_.units[i];
    requests.push_back(comm_.iall_gather(owned_values(i), u.values.raw_data(), fu.chunk,
                                         DType::kF32));  // in place
  }
  for (auto& r : requests) r->wait();
  if (trace_)
    trace_->span("all-gather weights", "comm", TraceRecorder::kCommTrack, begin,
                 TraceRecorder::now());
}

}  // namespace lmstack::train
