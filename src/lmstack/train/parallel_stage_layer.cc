// One decoder layer of a StageModel on this TP rank's heads and MLP columns (Shoeybi et al.
// 2019, §3, Fig. 3): the attention and MLP outputs are partial sums over ranks until the
// reduction (g) that precedes the residual add; in the backward the residual gradient is
// whole on every rank, and the gradient of the norm output, a partial sum over the
// column-parallel projections, is reduced (f) before the norm's backward. Without sequence
// parallelism g and f are all-reduces and gather_rows is the identity; with it (Korthikanti et
// al. 2022, Fig. 5) the norm and residual run on this rank's N/T token rows, g is a
// reduce-scatter and ḡ (before the column-parallel input) an all-gather, and in the backward
// the roles swap (the all-gather's backward is a reduce-scatter and the reverse). The norm
// outputs are saved as this rank's rows and gathered again in the backward, as Megatron does.
// Math otherwise as TrainModel's layer (model_train_layer.cc), llama family only.
#include <cmath>
#include <cstring>

#include "lmstack/kernels/ops.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/train/backward/backward.h"
#include "lmstack/train/parallel_stage.h"
#include "lmstack/train/parallel_stage_acts.h"

namespace lmstack::train {
namespace {

const float* bias_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* grad_or_null(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

void resize(std::vector<float>& v, int64_t n) { v.resize(static_cast<size_t>(n)); }

void zero(float* p, int64_t n) { std::memset(p, 0, static_cast<size_t>(n) * sizeof(float)); }

AttentionDims attention_dims(const model::ModelConfig& local, int window, int batch, int seq) {
  return AttentionDims{batch,           seq,
                       local.num_heads, local.num_kv_heads,
                       local.head_dim,  model::attention_scale(local),
                       window};
}

}  // namespace

void StageModel::layer_forward(int l, Acts& a) {
  const model::ModelConfig& c = local_;
  const model::LayerWeights& w = master_.layers[static_cast<size_t>(l)];
  LayerSaved& s = a.layers[static_cast<size_t>(l)];
  const int64_t n = a.n, rows = local_rows(n), hid = c.hidden_size, qd = c.q_dim();
  const int64_t kvd = c.kv_dim(), nf = n * c.intermediate_size;
  const float* x = a.x[static_cast<size_t>(l)].data();
  resize(s.n1, rows * hid), resize(s.n1_rstd, rows);
  rmsnorm_forward(s.n1.data(), s.n1_rstd.data(), x, w.attn_norm.data<float>(), rows, hid,
                  c.norm_eps);
  const float* n1 = gather_rows(s.n1.data(), n, kScratchGather);
  resize(s.q, n * qd), resize(s.k, n * kvd), resize(s.v, n * kvd);
  kernels::linear(pool_, s.q.data(), n1, w.wq, n, bias_or_null(w.bq));
  kernels::linear(pool_, s.k.data(), n1, w.wk, n, bias_or_null(w.bk));
  kernels::linear(pool_, s.v.data(), n1, w.wv, n, bias_or_null(w.bv));
  kernels::rope(s.q.data(), a.positions.data(), n, c.num_heads, c.head_dim, c.head_dim,
                inv_freq_.data(), kernels::RopeStyle::kRotateHalf);
  kernels::rope(s.k.data(), a.positions.data(), n, c.num_kv_heads, c.head_dim, c.head_dim,
                inv_freq_.data(), kernels::RopeStyle::kRotateHalf);
  const AttentionDims d =
      attention_dims(c, full_.attention_window(plan_.first_layer + l), a.batch, a.seq);
  resize(s.att, n * qd);
  attention_forward(pool_, s.att.data(), s.q.data(), s.k.data(), s.v.data(), d);
  float* part = scratch(kScratchPartial, n * hid);
  kernels::linear(pool_, part, s.att.data(), w.wo, n);
  const float* attn_out = reduce_rows(part, n);  // g: Σ over the heads of every rank
  resize(s.x_mid, rows * hid);
  for (int64_t i = 0; i < rows * hid; ++i) s.x_mid[static_cast<size_t>(i)] = x[i] + attn_out[i];
  resize(s.n2, rows * hid), resize(s.n2_rstd, rows);
  rmsnorm_forward(s.n2.data(), s.n2_rstd.data(), s.x_mid.data(), w.mlp_norm.data<float>(), rows,
                  hid, c.norm_eps);
  const float* n2 = gather_rows(s.n2.data(), n, kScratchGather);
  resize(s.gate, nf), resize(s.up, nf), resize(s.act, nf);
  kernels::linear(pool_, s.gate.data(), n2, w.w_gate, n);
  kernels::linear(pool_, s.up.data(), n2, w.w_up, n);
  kernels::silu_mul(s.act.data(), s.gate.data(), s.up.data(), nf);
  kernels::linear(pool_, part, s.act.data(), w.w_down, n);
  const float* mlp_out = reduce_rows(part, n);  // g of the MLP
  std::vector<float>& out = a.x[static_cast<size_t>(l) + 1];
  resize(out, rows * hid);
  for (int64_t i = 0; i < rows * hid; ++i)
    out[static_cast<size_t>(i)] = s.x_mid[static_cast<size_t>(i)] + mlp_out[i];
}

// dx holds dL/d(layer output) on entry and dL/d(layer input) on return (this rank's rows).
void StageModel::layer_backward(int l, Acts& a, float* dx) {
  const model::ModelConfig& c = local_;
  const model::LayerWeights& w = master_.layers[static_cast<size_t>(l)];
  model::LayerWeights& g = grads_.layers[static_cast<size_t>(l)];
  LayerSaved& s = a.layers[static_cast<size_t>(l)];
  const int64_t n = a.n, hid = c.hidden_size, nf = n * c.intermediate_size;
  float* dact = scratch(kScratchDact, nf);
  float* dgate = scratch(kScratchDgate, nf);
  float* dup = scratch(kScratchDup, nf);
  float* dn = scratch(kScratchDn, n * hid);
  const float* dy = gather_rows(dx, n, kScratchGatherDy);  // backward of g
  zero(dact, nf);
  linear_backward(pool_, dact, g.w_down.data<float>(), nullptr, dy, s.act.data(), w.w_down, n);
  swiglu_backward(dgate, dup, dact, s.gate.data(), s.up.data(), nf);
  const float* n2 = gather_rows(s.n2.data(), n, kScratchGather);
  zero(dn, n * hid);
  linear_backward(pool_, dn, g.w_up.data<float>(), nullptr, dup, n2, w.w_up, n);
  linear_backward(pool_, dn, g.w_gate.data<float>(), nullptr, dgate, n2, w.w_gate, n);
  const float* dn_mine = reduce_rows(dn, n);  // f: summed over the column slices
  rmsnorm_backward(dx, g.mlp_norm.data<float>(), dn_mine, s.x_mid.data(), w.mlp_norm.data<float>(),
                   s.n2_rstd.data(), local_rows(n), hid);
  attention_backward(l, a, dx);
}

void StageModel::attention_backward(int l, Acts& a, float* dx) {
  const model::ModelConfig& c = local_;
  const model::LayerWeights& w = master_.layers[static_cast<size_t>(l)];
  model::LayerWeights& g = grads_.layers[static_cast<size_t>(l)];
  LayerSaved& s = a.layers[static_cast<size_t>(l)];
  const int64_t n = a.n, hid = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim();
  float* datt = scratch(kScratchDatt, n * qd);
  float* dq = scratch(kScratchDq, n * qd);
  float* dk = scratch(kScratchDk, n * kvd);
  float* dv = scratch(kScratchDv, n * kvd);
  float* dn = scratch(kScratchDn, n * hid);
  const float* dy = gather_rows(dx, n, kScratchGatherDy);
  zero(datt, n * qd);
  linear_backward(pool_, datt, g.wo.data<float>(), nullptr, dy, s.att.data(), w.wo, n);
  const AttentionDims d =
      attention_dims(c, full_.attention_window(plan_.first_layer + l), a.batch, a.seq);
  zero(dq, n * qd), zero(dk, n * kvd), zero(dv, n * kvd);
  train::attention_backward(pool_, dq, dk, dv, datt, s.q.data(), s.k.data(), s.v.data(),
                            s.att.data(), d);
  rope_backward(dq, a.positions.data(), n, c.num_heads, c.head_dim, inv_freq_.data());
  rope_backward(dk, a.positions.data(), n, c.num_kv_heads, c.head_dim, inv_freq_.data());
  const float* n1 = gather_rows(s.n1.data(), n, kScratchGather);
  zero(dn, n * hid);
  linear_backward(pool_, dn, g.wq.data<float>(), grad_or_null(g.bq), dq, n1, w.wq, n);
  // A KV head replicated on several ranks (T > Hkv) gets the part of its input gradient from
  // this rank's query heads only; f sums the replicas' parts with the rest, and the weight
  // gradients are summed over the replicas after the backward (model_parallel.cc).
  linear_backward(pool_, dn, g.wk.data<float>(), grad_or_null(g.bk), dk, n1, w.wk, n);
  linear_backward(pool_, dn, g.wv.data<float>(), grad_or_null(g.bv), dv, n1, w.wv, n);
  const float* dn_mine = reduce_rows(dn, n);  // f of the attention block
  rmsnorm_backward(dx, g.attn_norm.data<float>(), dn_mine, a.x[static_cast<size_t>(l)].data(),
                   w.attn_norm.data<float>(), s.n1_rstd.data(), local_rows(n), hid);
}

}  // namespace lmstack::train
