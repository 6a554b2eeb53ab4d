// One decoder layer of TrainModel, forward (saving what the backward reads) and backward,
// plus the activation buffers. Forward, as model/decoder.cc (pre-norm residual blocks):
//   x_mid = x + Wo·Attn(RoPE(qk_norm(Wq·n1(x))), RoPE(qk_norm(Wk·n1(x))), Wv·n1(x))
//   x_out = x_mid + Wdown·(silu(Wgate·n2) ⊙ Wup·n2)   or   Wproj·gelu(Wfc·n2 + b)
// Backward: the residual carries dx through unchanged; each branch adds its input gradient.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/train/backward/backward.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/model_train_buffers.h"

namespace lmstack::train {
namespace {

const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
float* mut_or_null(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// Elements per task of the elementwise ops split over the pool.
constexpr int64_t kElementGrain = 1 << 14;

HostBuffer floats(int64_t count) {
  return HostBuffer(static_cast<size_t>(count) * sizeof(float), MemoryCategory::kActivations);
}

// Layer l's attention shape: softmax scale 1/sqrt(d) and the layer's sliding window (0: none).
AttentionDims attention_dims(const model::ModelConfig& c, int l, int batch, int seq) {
  return AttentionDims{batch,
                       seq,
                       c.num_heads,
                       c.num_kv_heads,
                       c.head_dim,
                       model::attention_scale(c),
                       c.attention_window(l)};
}

}  // namespace

int64_t TrainModel::Buffers::bytes() const {
  int64_t total = 0;
  auto add = [&](const HostBuffer& h) { total += static_cast<int64_t>(h.size()); };
  for (const HostBuffer& h : inputs) add(h);
  for (const LayerActs& a : layers)
    for (const HostBuffer* h :
         {&a.n1, &a.n1_mean, &a.n1_rstd, &a.q_pre, &a.k_pre, &a.q_rstd, &a.k_rstd, &a.q, &a.k, &a.v,
          &a.att, &a.x_mid, &a.n2, &a.n2_mean, &a.n2_rstd, &a.gate, &a.up, &a.act})
      add(*h);
  for (const LayerActs& a : layers) total += a.mla.bytes();
  total += mla.bytes();
  for (const LayerActs& a : layers) total += a.moe.bytes();
  total += moe_grad.bytes() + static_cast<int64_t>(expert_tokens.capacity() * sizeof(int64_t) +
                                                   expert_prob_sum.capacity() * sizeof(double));
  for (const HostBuffer* h : {&nf, &nf_mean, &nf_rstd, &logits, &logits_chunk, &losses, &dx, &dn,
                              &norm_partial, &dq, &dk, &dv, &dq2, &dk2, &datt, &dgate, &dup, &dact})
    add(*h);
  return total;
}

void TrainModel::ensure_buffers(int batch, int seq) {
  if (buf_ && buf_->batch == batch && buf_->seq == seq) return;
  buf_.reset();  // free the old shape first
  auto b = std::make_unique<Buffers>();
  const model::ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch) * seq, hid = c.hidden_size, f = c.intermediate_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  b->batch = batch;
  b->seq = seq;
  b->positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    b->positions[static_cast<size_t>(i)] = static_cast<int32_t>(i % seq);
  for (int l = 0; l <= c.num_layers; ++l) b->inputs.push_back(floats(n * hid));
  const int num_acts = options_.recompute ? 1 : c.num_layers;
  b->layers.resize(static_cast<size_t>(num_acts));
  const bool ln = c.norm == model::NormKind::kLayerNorm;
  for (size_t i = 0; i < b->layers.size(); ++i) {
    LayerActs& a = b->layers[i];
    // A sparse layer keeps its MoE activations instead of the dense MLP's (the one entry of
    // --recompute serves every layer, so it holds both when the model has both).
    const bool sparse = options_.recompute ? c.moe.enabled() : c.moe.is_sparse(static_cast<int>(i));
    const bool dense = options_.recompute ? c.moe.num_sparse_layers() < c.num_layers
                                          : !c.moe.is_sparse(static_cast<int>(i));
    if (sparse) a.moe.allocate(c, n);
    a.n1 = floats(n * hid);
    a.n1_rstd = floats(n);
    a.n2 = floats(n * hid);
    a.n2_rstd = floats(n);
    if (ln) a.n1_mean = floats(n), a.n2_mean = floats(n);
    if (c.qk_norm) {
      a.q_pre = floats(n * qd), a.k_pre = floats(n * kvd);
      a.q_rstd = floats(n * c.num_heads), a.k_rstd = floats(n * c.num_kv_heads);
    }
    if (c.mla.enabled()) {
      a.mla.allocate(c, batch, seq);
    } else {
      a.q = floats(n * qd), a.k = floats(n * kvd), a.v = floats(n * kvd);
      a.att = floats(n * qd);
    }
    a.x_mid = floats(n * hid);
    if (!dense) continue;
    if (c.mlp == model::MlpKind::kSwiGlu) a.gate = floats(n * f);
    a.up = floats(n * f), a.act = floats(n * f);
  }
  if (c.moe.enabled()) {
    b->moe_grad.allocate(c, n);
    b->expert_tokens.assign(static_cast<size_t>(c.num_layers) * c.moe.num_experts, 0);
    b->expert_prob_sum.assign(b->expert_tokens.size(), 0.0);
  }
  b->nf = floats(n * hid), b->nf_rstd = floats(n), b->losses = floats(n);
  if (ln) b->nf_mean = floats(n);
  // The fused classifier's chunk: up to 512 rows, fewer for large vocabularies (~16 MiB).
  const int64_t chunk = std::clamp<int64_t>((int64_t{1} << 22) / c.vocab_size, 32, 512);
  b->logits_chunk = floats(std::min(n, chunk) * c.vocab_size);
  b->dx = floats(n * hid), b->dn = floats(n * hid);
  b->norm_partial = floats(static_cast<int64_t>(pool_.num_threads()) * 2 * hid);
  if (c.mla.enabled())
    b->mla.allocate(c, batch, seq);
  else
    b->dq = floats(n * qd), b->dk = floats(n * kvd), b->dv = floats(n * kvd),
    b->datt = floats(n * qd);
  if (c.qk_norm) b->dq2 = floats(n * qd), b->dk2 = floats(n * kvd);
  b->dgate = floats(n * f), b->dup = floats(n * f), b->dact = floats(n * f);
  buf_ = std::move(b);
}

// The norms split their rows over the pool (one row's work is a few hundred floats, so only
// whole-row ranges are worth a hand-off); the backward's weight gradients are summed per
// thread into norm_partial, then added in thread order, so a run is deterministic.
void TrainModel::norm_forward(float* y, float* mean, float* rstd, const float* x, const Tensor& w,
                              const Tensor& b, int64_t rows) {
  const int64_t dim = config_.hidden_size;
  const bool ln = config_.norm == model::NormKind::kLayerNorm;
  pool_.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        if (ln)
          layernorm_forward(y + r0 * dim, mean + r0, rstd + r0, x + r0 * dim, w.data<float>(),
                            ptr_or_null(b), r1 - r0, dim, config_.norm_eps);
        else
          rmsnorm_forward(y + r0 * dim, rstd + r0, x + r0 * dim, w.data<float>(), r1 - r0, dim,
                          config_.norm_eps);
      },
      64);
}

void TrainModel::norm_backward(float* dx, const float* dy, const float* x, const Tensor& w,
                               const float* mean, const float* rstd, Tensor& dw, Tensor& db,
                               int64_t rows) {
  const int64_t dim = config_.hidden_size, threads = pool_.num_threads();
  const bool ln = config_.norm == model::NormKind::kLayerNorm;
  float* partial = fptr(buf_->norm_partial);  // [threads][2][dim]: dw, db
  std::fill_n(partial, threads * 2 * dim, 0.0f);
  pool_.run_on_all([&](int t) {
    const int64_t r0 = rows * t / threads, r1 = rows * (t + 1) / threads;
    float* pw = partial + t * 2 * dim;
    if (r0 == r1) return;
    if (ln)
      layernorm_backward(dx + r0 * dim, pw, db.defined() ? pw + dim : nullptr, dy + r0 * dim,
                         x + r0 * dim, w.data<float>(), mean + r0, rstd + r0, r1 - r0, dim);
    else
      rmsnorm_backward(dx + r0 * dim, pw, dy + r0 * dim, x + r0 * dim, w.data<float>(), rstd + r0,
                       r1 - r0, dim);
  });
  float* gw = dw.data<float>();
  float* gb = mut_or_null(db);
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = 0; i < dim; ++i) {
      gw[i] += partial[t * 2 * dim + i];
      if (gb) gb[i] += partial[t * 2 * dim + dim + i];
    }
}

void TrainModel::linear_forward(float* y, const float* x, const Tensor& w, const Tensor& b,
                                int64_t rows, bool accumulate) {
  train::linear_forward(pool_, y, x, w, rows, ptr_or_null(b), accumulate);
}

void TrainModel::linear_backward(float* dx, Tensor& dw, Tensor& db, const float* dy, const float* x,
                                 const Tensor& w, int64_t rows) {
  train::linear_backward(pool_, dx, dw.data<float>(), mut_or_null(db), dy, x, w, rows);
}

// RoPE on x [rows, heads, D] in place (backward: its transpose), rows split over the pool.
void TrainModel::rope_rows(float* x, int64_t rows, int heads, bool backward) {
  const int d = config_.head_dim;
  const int32_t* pos = buf_->positions.data();
  pool_.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        float* xr = x + r0 * heads * d;
        if (backward)
          rope_backward(xr, pos + r0, r1 - r0, heads, d, inv_freq_.data());
        else
          kernels::rope(xr, pos + r0, r1 - r0, heads, d, d, inv_freq_.data(),
                        kernels::RopeStyle::kRotateHalf);
      },
      64);
}

// The llama / GPT-2 attention of layer l from a.n1: writes a.att (o_proj's input).
const float* TrainModel::dense_attention_forward(int l, int batch, int seq) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = compute_.layers[static_cast<size_t>(l)];
  const model::LayerWeights& m = master_.layers[static_cast<size_t>(l)];
  Buffers& b = *buf_;
  LayerActs& a = b.layers[options_.recompute ? 0 : static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch) * seq;
  float* q_lin = c.qk_norm ? fptr(a.q_pre) : fptr(a.q);
  float* k_lin = c.qk_norm ? fptr(a.k_pre) : fptr(a.k);
  linear_forward(q_lin, fptr(a.n1), w.wq, m.bq, n, false);
  linear_forward(k_lin, fptr(a.n1), w.wk, m.bk, n, false);
  linear_forward(fptr(a.v), fptr(a.n1), w.wv, m.bv, n, false);
  if (c.qk_norm) {  // Qwen3: RMSNorm over each head's D dims, before RoPE
    rmsnorm_forward(fptr(a.q), fptr(a.q_rstd), q_lin, m.q_norm.data<float>(), n * c.num_heads,
                    c.head_dim, c.norm_eps);
    rmsnorm_forward(fptr(a.k), fptr(a.k_rstd), k_lin, m.k_norm.data<float>(), n * c.num_kv_heads,
                    c.head_dim, c.norm_eps);
  }
  if (!c.learned_positions) {
    rope_rows(fptr(a.q), n, c.num_heads, false);
    rope_rows(fptr(a.k), n, c.num_kv_heads, false);
  }
  const AttentionDims dims = attention_dims(c, l, batch, seq);
  attention_forward(pool_, fptr(a.att), fptr(a.q), fptr(a.k), fptr(a.v), dims);
  return fptr(a.att);
}

void TrainModel::layer_forward(int l, int batch, int seq) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = compute_.layers[static_cast<size_t>(l)];
  const model::LayerWeights& m = master_.layers[static_cast<size_t>(l)];
  Buffers& b = *buf_;
  LayerActs& a = b.layers[options_.recompute ? 0 : static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch) * seq;
  const float* x = fptr(b.inputs[static_cast<size_t>(l)]);
  norm_forward(fptr(a.n1), fptr(a.n1_mean), fptr(a.n1_rstd), x, m.attn_norm, m.attn_norm_bias, n);
  const float* att = fptr(a.mla.att);
  if (c.mla.enabled())
    mla_train_forward(pool_, a.mla, b.mla, fptr(a.n1), mla_layer(l, batch, seq));
  else
    att = dense_attention_forward(l, batch, seq);
  const size_t row_bytes = static_cast<size_t>(n * c.hidden_size) * sizeof(float);
  std::memcpy(a.x_mid.data(), x, row_bytes);
  linear_forward(fptr(a.x_mid), att, w.wo, m.bo, n, true);
  norm_forward(fptr(a.n2), fptr(a.n2_mean), fptr(a.n2_rstd), fptr(a.x_mid), m.mlp_norm,
               m.mlp_norm_bias, n);
  float* out = fptr(b.inputs[static_cast<size_t>(l) + 1]);
  std::memcpy(out, a.x_mid.data(), row_bytes);
  if (c.moe.is_sparse(l)) {
    const size_t at = static_cast<size_t>(l) * static_cast<size_t>(c.moe.num_experts);
    std::fill_n(b.expert_prob_sum.begin() + static_cast<ptrdiff_t>(at), c.moe.num_experts, 0.0);
    moe_mlp_forward(pool_, out, fptr(a.n2), n, c, moe_compute_weights(*w.moe, *m.moe), a.moe,
                    &b.expert_tokens[at], &b.expert_prob_sum[at], moe_runner_, l);
    return;
  }
  const int64_t nf = n * c.intermediate_size;
  linear_forward(fptr(a.up), fptr(a.n2), w.w_up, m.b_up, n, false);
  if (c.mlp == model::MlpKind::kSwiGlu) {
    linear_forward(fptr(a.gate), fptr(a.n2), w.w_gate, Tensor(), n, false);
    pool_.parallel_for(
        nf,
        [&](int64_t i0, int64_t i1) {
          kernels::silu_mul(fptr(a.act) + i0, fptr(a.gate) + i0, fptr(a.up) + i0, i1 - i0);
        },
        kElementGrain);
  } else {
    kernels::gelu_tanh(fptr(a.act), fptr(a.up), nf);
  }
  linear_forward(out, fptr(a.act), w.w_down, m.b_down, n, true);
}

// dx holds dL/d(layer output) on entry and dL/d(layer input) on return.
void TrainModel::layer_backward(int l, int batch, int seq, float* dx) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = compute_.layers[static_cast<size_t>(l)];
  const model::LayerWeights& m = master_.layers[static_cast<size_t>(l)];
  model::LayerWeights& g = grads_.layers[static_cast<size_t>(l)];
  Buffers& b = *buf_;
  LayerActs& a = b.layers[options_.recompute ? 0 : static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch) * seq, nf = n * c.intermediate_size;
  Tensor none;
  std::memset(b.dn.data(), 0, static_cast<size_t>(n * c.hidden_size) * sizeof(float));
  if (c.moe.is_sparse(l)) {
    moe_mlp_backward(
        pool_, fptr(b.dn), *g.moe, dx, fptr(a.n2), n, c, moe_compute_weights(*w.moe, *m.moe), a.moe,
        b.moe_aux_dprob.empty() ? nullptr : b.moe_aux_dprob.data(), b.moe_grad, moe_runner_, l);
  } else {  // MLP block: x_out = x_mid + Wdown · act
    std::memset(b.dact.data(), 0, static_cast<size_t>(nf) * sizeof(float));
    linear_backward(fptr(b.dact), g.w_down, g.b_down, dx, fptr(a.act), w.w_down, n);
    if (c.mlp == model::MlpKind::kSwiGlu)
      pool_.parallel_for(
          nf,
          [&](int64_t i0, int64_t i1) {  // the kernel accumulates: zero this chunk first
            std::fill(fptr(b.dgate) + i0, fptr(b.dgate) + i1, 0.0f);
            std::fill(fptr(b.dup) + i0, fptr(b.dup) + i1, 0.0f);
            kernels::silu_mul_backward(fptr(b.dgate) + i0, fptr(b.dup) + i0, fptr(b.dact) + i0,
                                       fptr(a.gate) + i0, fptr(a.up) + i0, i1 - i0);
          },
          kElementGrain);
    else
      gelu_tanh_backward(fptr(b.dup), fptr(b.dact), fptr(a.up), nf);
    linear_backward(fptr(b.dn), g.w_up, g.b_up, fptr(b.dup), fptr(a.n2), w.w_up, n);
    if (c.mlp == model::MlpKind::kSwiGlu)
      linear_backward(fptr(b.dn), g.w_gate, none, fptr(b.dgate), fptr(a.n2), w.w_gate, n);
  }
  norm_backward(dx, fptr(b.dn), fptr(a.x_mid), m.mlp_norm, fptr(a.n2_mean), fptr(a.n2_rstd),
                g.mlp_norm, g.mlp_norm_bias, n);
  attention_backward_block(l, batch, seq, dx);
}

const std::vector<int64_t>& TrainModel::expert_tokens() const {
  static const std::vector<int64_t> kNone;
  return buf_ ? buf_->expert_tokens : kNone;
}

void TrainModel::prepare_moe_aux(double coef_scale) {
  const model::ModelConfig& c = config_;
  Buffers& b = *buf_;
  b.moe_aux_dprob.clear();
  moe_aux_loss_ = 0;
  if (!c.moe.enabled()) return;
  // transformers concatenates every sparse layer's router rows before averaging.
  const int E = c.moe.num_experts;
  std::vector<int64_t> tokens(static_cast<size_t>(E), 0);
  std::vector<double> probs(static_cast<size_t>(E), 0.0);
  for (int l = 0; l < c.num_layers; ++l)
    for (int e = 0; e < E && c.moe.is_sparse(l); ++e) {
      tokens[static_cast<size_t>(e)] += b.expert_tokens[static_cast<size_t>(l * E + e)];
      probs[static_cast<size_t>(e)] += b.expert_prob_sum[static_cast<size_t>(l * E + e)];
    }
  const int64_t rows = static_cast<int64_t>(c.moe.num_sparse_layers()) * b.batch * b.seq;
  moe_aux_loss_ =
      train::moe_aux_loss(tokens.data(), probs.data(), E, rows, coef_scale, b.moe_aux_dprob);
  if (coef_scale == 0) b.moe_aux_dprob.clear();
}

void TrainModel::attention_backward_block(int l, int batch, int seq, float* dx) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = compute_.layers[static_cast<size_t>(l)];
  const model::LayerWeights& m = master_.layers[static_cast<size_t>(l)];
  model::LayerWeights& g = grads_.layers[static_cast<size_t>(l)];
  Buffers& b = *buf_;
  LayerActs& a = b.layers[options_.recompute ? 0 : static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch) * seq;
  if (c.mla.enabled()) {
    mla_attention_backward(l, batch, seq, dx);
    return;
  }
  std::memset(b.datt.data(), 0, static_cast<size_t>(n * c.q_dim()) * sizeof(float));
  linear_backward(fptr(b.datt), g.wo, g.bo, dx, fptr(a.att), w.wo, n);
  const AttentionDims dims = attention_dims(c, l, batch, seq);
  for (HostBuffer* h : {&b.dq, &b.dk, &b.dv}) std::memset(h->data(), 0, h->size());
  attention_backward(pool_, fptr(b.dq), fptr(b.dk), fptr(b.dv), fptr(b.datt), fptr(a.q), fptr(a.k),
                     fptr(a.v), fptr(a.att), dims);
  if (!c.learned_positions) {
    rope_rows(fptr(b.dq), n, c.num_heads, true);
    rope_rows(fptr(b.dk), n, c.num_kv_heads, true);
  }
  float* dq = fptr(b.dq);
  float* dk = fptr(b.dk);
  if (c.qk_norm) {
    std::memset(b.dq2.data(), 0, b.dq2.size());
    std::memset(b.dk2.data(), 0, b.dk2.size());
    rmsnorm_backward(fptr(b.dq2), g.q_norm.data<float>(), dq, fptr(a.q_pre), m.q_norm.data<float>(),
                     fptr(a.q_rstd), n * c.num_heads, c.head_dim);
    rmsnorm_backward(fptr(b.dk2), g.k_norm.data<float>(), dk, fptr(a.k_pre), m.k_norm.data<float>(),
                     fptr(a.k_rstd), n * c.num_kv_heads, c.head_dim);
    dq = fptr(b.dq2), dk = fptr(b.dk2);
  }
  std::memset(b.dn.data(), 0, static_cast<size_t>(n * c.hidden_size) * sizeof(float));
  linear_backward(fptr(b.dn), g.wq, g.bq, dq, fptr(a.n1), w.wq, n);
  linear_backward(fptr(b.dn), g.wk, g.bk, dk, fptr(a.n1), w.wk, n);
  linear_backward(fptr(b.dn), g.wv, g.bv, fptr(b.dv), fptr(a.n1), w.wv, n);
  norm_backward(dx, fptr(b.dn), fptr(b.inputs[static_cast<size_t>(l)]), m.attn_norm,
                fptr(a.n1_mean), fptr(a.n1_rstd), g.attn_norm, g.attn_norm_bias, n);
}

MlaTrainLayer TrainModel::mla_layer(int l, int batch, int seq) {
  const auto i = static_cast<size_t>(l);
  return MlaTrainLayer{
      config_, compute_.layers[i],     master_.layers[i], grads_.layers[i], l, batch,
      seq,     buf_->positions.data(), inv_freq_.data()};
}

// The MLA twin of the dense path above: o_proj, MLA (train/mla_train.cc), attention norm.
void TrainModel::mla_attention_backward(int l, int batch, int seq, float* dx) {
  const model::ModelConfig& c = config_;
  const model::LayerWeights& w = compute_.layers[static_cast<size_t>(l)];
  const model::LayerWeights& m = master_.layers[static_cast<size_t>(l)];
  model::LayerWeights& g = grads_.layers[static_cast<size_t>(l)];
  Buffers& b = *buf_;
  LayerActs& a = b.layers[options_.recompute ? 0 : static_cast<size_t>(l)];
  const int64_t n = static_cast<int64_t>(batch) * seq;
  std::memset(b.mla.datt.data(), 0, b.mla.datt.size());
  linear_backward(fptr(b.mla.datt), g.wo, g.bo, dx, fptr(a.mla.att), w.wo, n);
  std::memset(b.dn.data(), 0, static_cast<size_t>(n * c.hidden_size) * sizeof(float));
  mla_train_backward(pool_, fptr(b.dn), fptr(a.n1), a.mla, b.mla, mla_layer(l, batch, seq));
  norm_backward(dx, fptr(b.dn), fptr(b.inputs[static_cast<size_t>(l)]), m.attn_norm,
                fptr(a.n1_mean), fptr(a.n1_rstd), g.attn_norm, g.attn_norm_bias, n);
}

}  // namespace lmstack::train
