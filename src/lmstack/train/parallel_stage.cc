// StageModel's set-up, micro-batch bookkeeping, the vocabulary-parallel embedding and the
// vocabulary-parallel cross-entropy (see parallel_stage.h); the decoder layers are in
// parallel_stage_layer.cc. Derivation of the parallel cross-entropy: for row r with logits
// l split over ranks, loss = log Σ_v exp(l_v - M) + M - l_target, M = max_v l_v; each rank
// holds its part of the sum and (if the target is its) the target logit, so the max and the
// two sums are all-reduced; the gradient softmax - onehot is local to each rank's columns.
#include "lmstack/train/parallel_stage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/train/backward/backward.h"
#include "lmstack/train/parallel_stage_acts.h"

namespace lmstack::train {
namespace {

// An owned f32 copy of a slice that is already this rank's (StagePlan::sliced_weights).
Tensor owned_copy(const std::string& name, const Tensor& src) {
  LMSTACK_CHECK(src.dtype() == DType::kF32, "{}: a slice read from a checkpoint is f32", name);
  Tensor out = Tensor::zeros(src.shape(), DType::kF32, MemoryCategory::kWeights);
  std::memcpy(out.raw_data(), src.raw_data(), static_cast<size_t>(src.nbytes()));
  return out;
}

}  // namespace

int64_t StageModel::Acts::bytes() const {
  int64_t floats = static_cast<int64_t>(nf.size() + nf_rstd.size() + dlogits.size());
  for (const std::vector<float>& v : x) floats += static_cast<int64_t>(v.size());
  for (const LayerSaved& s : layers)
    for (const std::vector<float>* v : {&s.n1, &s.n1_rstd, &s.q, &s.k, &s.v, &s.att, &s.x_mid,
                                        &s.n2, &s.n2_rstd, &s.gate, &s.up, &s.act})
      floats += static_cast<int64_t>(v->size());
  return floats * static_cast<int64_t>(sizeof(float)) +
         static_cast<int64_t>((ids.size() + positions.size()) * sizeof(int32_t));
}

StageModel::StageModel(const model::ModelConfig& full, const model::ModelWeights& w,
                       const StagePlan& plan, const TpLayout& tp, dist::Comm& tp_comm,
                       ThreadPool& pool)
    : full_(full),
      local_(tp_local_config(full, tp)),
      plan_(plan),
      tp_(tp),
      tp_comm_(tp_comm),
      pool_(pool) {
  check_model_parallel_config(full);
  LMSTACK_CHECK(tp_comm.size() == tp.tp, "TP comm of {} ranks for --tp {}", tp_comm.size(), tp.tp);
  local_.num_layers = plan.num_layers;
  const int hd = full.head_dim;
  auto add = [&](const std::string& name, const Tensor& src, Tensor& m, Tensor& g) {
    if (!src.defined()) return;
    m = plan.sliced_weights ? owned_copy(name, src) : tp_slice(name, src, tp_, hd);
    g = Tensor::zeros(m.shape(), DType::kF32, MemoryCategory::kGradients);
    params_.push_back({name, &m, &g, m.rank() == 2});
  };
  const bool tied = full.tie_word_embeddings;
  if (plan.embed) add("embed", w.embed, master_.embed, grads_.embed);
  master_.layers.resize(static_cast<size_t>(plan.num_layers));
  grads_.layers.resize(static_cast<size_t>(plan.num_layers));
  for (int i = 0; i < plan.num_layers; ++i) {
    const int l = plan.first_layer + i;
    const model::LayerWeights& s = w.layers.at(static_cast<size_t>(l));
    model::LayerWeights& m = master_.layers[static_cast<size_t>(i)];
    model::LayerWeights& g = grads_.layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(l) + ".";
    add(p + "attn_norm", s.attn_norm, m.attn_norm, g.attn_norm);
    add(p + "wq", s.wq, m.wq, g.wq);
    add(p + "wk", s.wk, m.wk, g.wk);
    add(p + "wv", s.wv, m.wv, g.wv);
    add(p + "wo", s.wo, m.wo, g.wo);
    add(p + "bq", s.bq, m.bq, g.bq);
    add(p + "bk", s.bk, m.bk, g.bk);
    add(p + "bv", s.bv, m.bv, g.bv);
    add(p + "mlp_norm", s.mlp_norm, m.mlp_norm, g.mlp_norm);
    add(p + "w_gate", s.w_gate, m.w_gate, g.w_gate);
    add(p + "w_up", s.w_up, m.w_up, g.w_up);
    add(p + "w_down", s.w_down, m.w_down, g.w_down);
  }
  if (plan.head) {
    add("final_norm", w.final_norm, master_.final_norm, grads_.final_norm);
    if (tied) {
      LMSTACK_CHECK(plan.embed, "tied embeddings need the embedding and the head in one chunk");
      master_.lm_head = master_.embed, grads_.lm_head = grads_.embed;
    } else {
      add("lm_head", w.lm_head, master_.lm_head, grads_.lm_head);
    }
  }
  inv_freq_ = model::rope_inv_freq(full);
}

StageModel::~StageModel() = default;

void StageModel::zero_grads() {
  for (ParamRef& p : params_)
    std::memset(p.grad->raw_data(), 0, static_cast<size_t>(p.grad->nbytes()));
}

void StageModel::all_reduce(float* buf, int64_t count) {
  if (tp_comm_.size() > 1) tp_comm_.all_reduce(buf, count, DType::kF32);
}

const float* StageModel::gather_rows(const float* local, int64_t n, int which) {
  if (!tp_.sequence_parallel || tp_.tp == 1) return local;
  const int64_t c = full_.hidden_size;
  float* full = scratch(which, n * c);
  tp_comm_.all_gather(local, full, local_rows(n) * c, DType::kF32);
  return full;
}

const float* StageModel::reduce_rows(float* partial, int64_t n) {
  const int64_t c = full_.hidden_size;
  if (!tp_.sequence_parallel || tp_.tp == 1) {
    all_reduce(partial, n * c);
    return partial;
  }
  float* mine = scratch(kScratchReduced, local_rows(n) * c);
  tp_comm_.reduce_scatter(partial, mine, local_rows(n) * c, DType::kF32);
  return mine;
}

int64_t StageModel::boundary_floats(int batch, int seq) const {
  return local_rows(static_cast<int64_t>(batch) * seq) * full_.hidden_size;
}

float* StageModel::scratch(int which, int64_t count) {
  if (scratch_.size() <= static_cast<size_t>(which))
    scratch_.resize(static_cast<size_t>(which) + 1);
  std::vector<float>& v = scratch_[static_cast<size_t>(which)];
  if (v.size() < static_cast<size_t>(count)) v.resize(static_cast<size_t>(count));
  return v.data();
}

double StageModel::forward(int mb, const int32_t* ids, const float* x, const int32_t* targets,
                           int batch, int seq, float grad_scale) {
  LMSTACK_CHECK(!acts_.count(mb), "micro-batch {} forwarded twice", mb);
  auto a = std::make_unique<Acts>();
  a->batch = batch, a->seq = seq, a->n = static_cast<int64_t>(batch) * seq;
  if (a->n % tp_.tp != 0 && tp_.sequence_parallel)
    throw_error<ConfigError>(
        "--sequence-parallel: {} tokens per micro-batch do not split over "
        "--tp {}",
        a->n, tp_.tp);
  const int64_t rows = boundary_floats(batch, seq);
  a->positions.resize(static_cast<size_t>(a->n));
  for (int64_t i = 0; i < a->n; ++i)
    a->positions[static_cast<size_t>(i)] = static_cast<int32_t>(i % seq);
  a->x.assign(static_cast<size_t>(plan_.num_layers) + 1, {});
  a->x[0].resize(static_cast<size_t>(rows));
  if (plan_.embed)
    embed_forward(*a, ids);
  else
    std::memcpy(a->x[0].data(), x, static_cast<size_t>(rows) * sizeof(float));
  a->layers.resize(static_cast<size_t>(plan_.num_layers));
  for (int l = 0; l < plan_.num_layers; ++l) layer_forward(l, *a);
  const double loss = plan_.head ? head_forward(*a, targets, grad_scale) : 0.0;
  held_bytes_ += a->bytes();
  peak_bytes_ = std::max(peak_bytes_, held_bytes_);
  acts_[mb] = std::move(a);
  return loss;
}

const float* StageModel::output(int mb) const {
  LMSTACK_CHECK(!plan_.head, "the last chunk has no output activations");
  return acts_.at(mb)->x.back().data();
}

const float* StageModel::backward(int mb, const float* dy) {
  auto it = acts_.find(mb);
  LMSTACK_CHECK(it != acts_.end(), "backward of micro-batch {} before its forward", mb);
  Acts& a = *it->second;
  const int64_t rows = boundary_floats(a.batch, a.seq);
  float* dx = scratch(kScratchDx, rows);
  if (plan_.head) {
    std::memset(dx, 0, static_cast<size_t>(rows) * sizeof(float));
    head_backward(a, dx);
  } else {
    std::memcpy(dx, dy, static_cast<size_t>(rows) * sizeof(float));
  }
  for (int l = plan_.num_layers - 1; l >= 0; --l) layer_backward(l, a, dx);
  if (plan_.embed) embed_backward(a, dx);
  held_bytes_ -= a.bytes();
  acts_.erase(it);
  return plan_.embed ? nullptr : dx;
}

void StageModel::discard(int mb) {
  auto it = acts_.find(mb);
  if (it == acts_.end()) return;
  held_bytes_ -= it->second->bytes();
  acts_.erase(it);
}

// Vocabulary-parallel lookup: rank t holds rows [v0, v0 + V/T); other ids give zeros, and the
// all-reduce sums the one rank's row into every rank's copy.
void StageModel::embed_forward(Acts& a, const int32_t* ids) {
  const int64_t c = full_.hidden_size;
  float* x0 = scratch(kScratchEmbed, a.n * c);
  std::memset(x0, 0, static_cast<size_t>(a.n * c) * sizeof(float));
  const float* table = master_.embed.data<float>();
  for (int64_t t = 0; t < a.n; ++t) {
    const int32_t id = ids[t];
    if (id < 0 || id >= full_.vocab_size)
      throw_error<RequestError>("token id {} at position {} is outside the vocabulary [0, {})", id,
                                t, full_.vocab_size);
    const int64_t local = id - tp_.vocab_begin;
    if (local >= 0 && local < tp_.vocab)
      std::memcpy(x0 + t * c, table + local * c, static_cast<size_t>(c) * sizeof(float));
  }
  const float* mine = reduce_rows(x0, a.n);  // SP: each rank keeps its token rows
  std::memcpy(a.x[0].data(), mine, a.x[0].size() * sizeof(float));
  a.ids.assign(ids, ids + a.n);
}

void StageModel::embed_backward(Acts& a, const float* dx_local) {
  const int64_t c = full_.hidden_size;
  const float* dx = gather_rows(dx_local, a.n, kScratchGatherDy);
  float* dtable = grads_.embed.data<float>();
  for (int64_t t = 0; t < a.n; ++t) {
    const int64_t local = a.ids[static_cast<size_t>(t)] - tp_.vocab_begin;
    if (local < 0 || local >= tp_.vocab) continue;
    for (int64_t i = 0; i < c; ++i) dtable[local * c + i] += dx[t * c + i];
  }
}

double StageModel::head_forward(Acts& a, const int32_t* targets, float grad_scale) {
  const int64_t n = a.n, c = full_.hidden_size, v = tp_.vocab, rows = local_rows(n);
  a.nf.resize(static_cast<size_t>(rows * c));
  a.nf_rstd.resize(static_cast<size_t>(rows));
  rmsnorm_forward(a.nf.data(), a.nf_rstd.data(), a.x.back().data(),
                  master_.final_norm.data<float>(), rows, c, full_.norm_eps);
  a.dlogits.resize(static_cast<size_t>(n * v));
  float* logits = a.dlogits.data();
  kernels::linear(pool_, logits, gather_rows(a.nf.data(), n, kScratchGather), master_.lm_head, n);
  std::vector<float> row_max(static_cast<size_t>(n)), sums(static_cast<size_t>(2 * n), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] < 0 || targets[r] >= full_.vocab_size)
      throw_error<RequestError>("target {} at position {} is outside the vocabulary [0, {})",
                                targets[r], r, full_.vocab_size);
    row_max[static_cast<size_t>(r)] = *std::max_element(logits + r * v, logits + (r + 1) * v);
  }
  if (tp_comm_.size() > 1)
    tp_comm_.all_reduce(row_max.data(), n, DType::kF32, dist::ReduceOp::kMax);
  for (int64_t r = 0; r < n; ++r) {
    float* l = logits + r * v;
    const float m = row_max[static_cast<size_t>(r)];
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<double>(l[j] - m));
    sums[static_cast<size_t>(r)] = static_cast<float>(s);
    const int64_t local = targets[r] - tp_.vocab_begin;
    if (local >= 0 && local < v) sums[static_cast<size_t>(n + r)] = l[local];
  }
  all_reduce(sums.data(), 2 * n);
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    float* l = logits + r * v;
    const float m = row_max[static_cast<size_t>(r)], s = sums[static_cast<size_t>(r)];
    total += std::log(static_cast<double>(s)) + m - sums[static_cast<size_t>(n + r)];
    for (int64_t j = 0; j < v; ++j) l[j] = std::exp(l[j] - m) / s * grad_scale;
    const int64_t local = targets[r] - tp_.vocab_begin;
    if (local >= 0 && local < v) l[local] -= grad_scale;
  }
  return total;
}

void StageModel::head_backward(Acts& a, float* dx) {
  const int64_t n = a.n, c = full_.hidden_size;
  float* dn = scratch(kScratchDn, n * c);
  std::memset(dn, 0, static_cast<size_t>(n * c) * sizeof(float));
  const float* nf = gather_rows(a.nf.data(), n, kScratchGather);  // SP: gathered again
  linear_backward(pool_, dn, grads_.lm_head.data<float>(), nullptr, a.dlogits.data(), nf,
                  master_.lm_head, n);
  const float* dn_mine = reduce_rows(dn, n);  // operator f of the column-parallel lm_head
  rmsnorm_backward(dx, grads_.final_norm.data<float>(), dn_mine, a.x.back().data(),
                   master_.final_norm.data<float>(), a.nf_rstd.data(), local_rows(n), c);
}

}  // namespace lmstack::train
