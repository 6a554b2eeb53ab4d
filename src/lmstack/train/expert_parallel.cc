// Expert parallelism's exchange and MoE runner (contracts in expert_parallel.h). The pairs
// leave moe_dispatch sorted by expert, and rank q owns the consecutive experts
// [q·El, (q+1)·El), so the rows for rank q are one contiguous block of the send buffer: the
// dispatch needs no packing, only the counts. On the receiving side the rows arrive grouped by
// source rank (then by expert); they are regrouped expert-major so that each local expert runs
// one matmul over all its rows (moe_experts_forward), and ungrouped again before the return.
#include "lmstack/train/expert_parallel.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "lmstack/core/error.h"

namespace lmstack::train {
namespace {

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Makes b hold at least `n` floats (grows only: the received row count changes every step).
float* grow(HostBuffer& b, int64_t n) {
  const size_t bytes = at(std::max<int64_t>(n, 1)) * sizeof(float);
  if (b.size() < bytes) b = HostBuffer(bytes, MemoryCategory::kActivations);
  return static_cast<float*>(b.data());
}
float* fp(HostBuffer& b) { return static_cast<float*>(b.data()); }

}  // namespace

int64_t EpExchange::rows_to_others(int rank) const {
  int64_t rows = 0;
  for (int q = 0; q < ep; ++q)
    for (int j = 0; j < num_local && q != rank; ++j) rows += send_rows[at(q * num_local + j)];
  return rows;
}

EpExchange ep_plan(dist::Comm& ep, const std::vector<int32_t>& offsets, int64_t C) {
  EpExchange x;
  x.ep = ep.size();
  const int E = static_cast<int>(offsets.size()) - 1, n = x.ep;
  LMSTACK_CHECK(E % n == 0, "{} experts over {} ranks", E, n);
  const int El = x.num_local = E / n;
  x.send_rows.resize(at(E)), x.recv_rows.resize(at(E));
  for (int e = 0; e < E; ++e) x.send_rows[at(e)] = offsets[at(e) + 1] - offsets[at(e)];
  ep.all_to_all(x.send_rows.data(), x.recv_rows.data(), El, DType::kI32);
  x.send_counts.assign(at(n), 0), x.recv_counts.assign(at(n), 0);
  for (int q = 0; q < n; ++q)
    for (int j = 0; j < El; ++j) {
      x.send_counts[at(q)] += x.send_rows[at(q * El + j)] * C;
      x.recv_counts[at(q)] += x.recv_rows[at(q * El + j)] * C;
    }
  // Source-major start of (q, j)'s rows, then the expert-major order over them.
  std::vector<int64_t> start(at(E));
  int64_t row = 0;
  for (int q = 0; q < n; ++q)
    for (int j = 0; j < El; ++j) start[at(q * El + j)] = row, row += x.recv_rows[at(q * El + j)];
  x.num_recv_rows = row;
  x.perm.clear();
  x.perm.reserve(at(row));
  x.local_offsets.assign(at(El) + 1, 0);
  for (int j = 0; j < El; ++j) {
    for (int q = 0; q < n; ++q)
      for (int32_t i = 0; i < x.recv_rows[at(q * El + j)]; ++i)
        x.perm.push_back(start[at(q * El + j)] + i);
    x.local_offsets[at(j) + 1] = static_cast<int32_t>(x.perm.size());
  }
  return x;
}

void ep_dispatch(dist::Comm& ep, const EpExchange& x, const float* rows, float* out, int64_t C,
                 std::vector<float>& scratch) {
  if (scratch.size() < at(x.num_recv_rows * C)) scratch.resize(at(x.num_recv_rows * C));
  ep.all_to_all_v(rows, x.send_counts.data(), scratch.data(), x.recv_counts.data(), DType::kF32);
  for (size_t i = 0; i < x.perm.size(); ++i)
    std::memcpy(out + static_cast<int64_t>(i) * C, scratch.data() + x.perm[i] * C,
                at(C) * sizeof(float));
}

void ep_return(dist::Comm& ep, const EpExchange& x, const float* in, float* rows, int64_t C,
               std::vector<float>& scratch) {
  if (scratch.size() < at(x.num_recv_rows * C)) scratch.resize(at(x.num_recv_rows * C));
  for (size_t i = 0; i < x.perm.size(); ++i)
    std::memcpy(scratch.data() + x.perm[i] * C, in + static_cast<int64_t>(i) * C,
                at(C) * sizeof(float));
  ep.all_to_all_v(scratch.data(), x.recv_counts.data(), rows, x.send_counts.data(), DType::kF32);
}

ExpertParallelMoe::ExpertParallelMoe(dist::Comm& ep_comm, const model::ModelConfig& config)
    : comm_(ep_comm), config_(config) {
  const int E = config.moe.num_experts, n = ep_comm.size();
  if (E <= 0) throw_error<ConfigError>("expert parallelism needs a mixture-of-experts model");
  if (E % n != 0)
    throw_error<ConfigError>("--ep {} does not divide the model's {} routed experts", n, E);
  num_local_ = E / n;
  first_ = ep_comm.rank() * num_local_;
  layers_.resize(at(config.num_layers));
}

model::MoeLayerWeights ExpertParallelMoe::local_view(const model::MoeLayerWeights& w) const {
  model::MoeLayerWeights v;
  const auto b = w.w_gate.begin() + first_;
  v.w_gate.assign(b, b + num_local_);
  v.w_up.assign(w.w_up.begin() + first_, w.w_up.begin() + first_ + num_local_);
  v.w_down.assign(w.w_down.begin() + first_, w.w_down.begin() + first_ + num_local_);
  return v;
}

void ExpertParallelMoe::forward(ThreadPool& pool, int layer, MoeActs& a,
                                const model::MoeLayerWeights& w, int64_t C) {
  Layer& l = layers_.at(at(layer));
  l.x = ep_plan(comm_, a.offsets, C);
  const int64_t R = l.x.num_recv_rows, fe = config_.moe.expert_intermediate;
  grow(l.acts.xe, R * C), grow(l.acts.ye, R * C);
  grow(l.acts.gate, R * fe), grow(l.acts.up, R * fe), grow(l.acts.act, R * fe);
  ep_dispatch(comm_, l.x, fp(a.xe), fp(l.acts.xe), C, scratch_);
  moe_experts_forward(pool, l.acts, l.x.local_offsets, local_view(w), C);
  ep_return(comm_, l.x, fp(l.acts.ye), fp(a.ye), C, scratch_);
}

void ExpertParallelMoe::backward(ThreadPool& pool, int layer, MoeGradScratch& s,
                                 model::MoeLayerWeights& g, const MoeActs& /*a*/,
                                 const model::MoeLayerWeights& w, int64_t C) {
  Layer& l = layers_.at(at(layer));
  const int64_t R = l.x.num_recv_rows, fe = config_.moe.expert_intermediate;
  grow(l.grad.dye, R * C), grow(l.grad.dxe, R * C);
  grow(l.grad.dgate, R * fe), grow(l.grad.dup, R * fe), grow(l.grad.dact, R * fe);
  ep_dispatch(comm_, l.x, fp(s.dye), fp(l.grad.dye), C, scratch_);
  model::MoeLayerWeights lg = local_view(g);
  moe_experts_backward(pool, l.grad, lg, l.acts, l.x.local_offsets, local_view(w), C);
  ep_return(comm_, l.x, fp(l.grad.dxe), fp(s.dxe), C, scratch_);
}

int64_t ExpertParallelMoe::bytes() const {
  int64_t b = static_cast<int64_t>(scratch_.capacity() * sizeof(float));
  for (const Layer& l : layers_) b += l.acts.bytes() + l.grad.bytes();
  return b;
}

int expert_of(const std::string& name) {
  const std::string key = ".moe.experts.";
  const size_t p = name.find(key);
  if (p == std::string::npos) return -1;
  return std::stoi(name.substr(p + key.size()));
}

model::ModelWeights keep_experts(const model::ModelWeights& w, int first, int count) {
  model::ModelWeights out = w;
  for (model::LayerWeights& l : out.layers) {
    if (!l.moe) continue;
    auto m = std::make_shared<model::MoeLayerWeights>(*l.moe);
    for (size_t e = 0; e < m->w_gate.size(); ++e) {
      if (static_cast<int>(e) >= first && static_cast<int>(e) < first + count) continue;
      m->w_gate[e] = Tensor(), m->w_up[e] = Tensor(), m->w_down[e] = Tensor();
    }
    l.moe = std::move(m);
  }
  return out;
}

}  // namespace lmstack::train
