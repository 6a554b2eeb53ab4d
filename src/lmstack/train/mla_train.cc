// MLA training forward and backward (mla_train.h), transformers' DeepseekV2/V3Attention math.
// Legend: N rows (B·T), H heads, r = kv_lora_rank, qr = q_lora_rank, dn / dr / dv per-head
// nope, RoPE and value dims, qk = dn + dr, cw = r + dr; m = rope_magnitude (YaRN), R_t the
// rotation at position t. Forward, per row t and head h:
//   q_t = W_q h_t  or  W_qb RMSNorm_qa(W_qa h_t);  q_t,h = [qN_t,h, m R_t qR_t,h]
//   [c'_t, k'_t] = W_kva h_t,  c_t = RMSNorm_kv(c'_t),  kR_t = m R_t k'_t  (one for all heads)
//   [kN_t,h, v_t,h] = W_kvb,h c_t,  k_t,h = [kN_t,h, kR_t],  o = softmax(s q kᵀ) v  (causal)
// Backward:
//   term 1  dq, dk, dv of the attention (kernels/attention_backward.cc); V is zero-padded from dv
//           to qk so one kernel serves both widths: dO's padded columns are 0, and dv's padded
//           columns are dropped (their forward values are the constant 0)
//   term 2  RoPE: R_t is orthogonal, so the rotated parts get m R_tᵀ of their gradients; kR is
//           shared, so dk'_t = m R_tᵀ Σ_h dk_t,h[dn:]
//   term 3  kv_b: dc_t = Σ_h W_kvb,hᵀ [dkN_t,h, dv_t,h],  dW_kvb += [dkN, dv]ᵀ c
//   term 4  the latent RMSNorms (train/backward/rmsnorm.cc), then the down projections:
//           dh += W_kvaᵀ [dc', dk'] + W_qᵀ dq  (or through q_b, q_a_layernorm and q_a)
#include "lmstack/train/mla_train.h"

#include <cstring>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/rope_scaling.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {
namespace {

struct Dims {
  int64_t N, H, r, qr, dn, dr, dv, qk, cw;
};

Dims dims_of(const model::ModelConfig& c, int batch, int seq) {
  const model::MlaConfig& m = c.mla;
  return {static_cast<int64_t>(batch) * seq,
          c.num_heads,
          m.kv_lora_rank,
          m.q_lora_rank,
          m.qk_nope_head_dim,
          m.qk_rope_head_dim,
          m.v_head_dim,
          m.qk_head_dim(),
          m.cache_width()};
}

HostBuffer floats(int64_t count) {
  return HostBuffer(static_cast<size_t>(count) * sizeof(float), MemoryCategory::kActivations);
}
float* fp(HostBuffer& b) { return static_cast<float*>(b.data()); }
const float* fp(const HostBuffer& b) { return static_cast<const float*>(b.data()); }
void zero(HostBuffer& b) { std::memset(b.data(), 0, b.size()); }

int64_t total_bytes(std::initializer_list<const HostBuffer*> list) {
  int64_t n = 0;
  for (const HostBuffer* h : list) n += static_cast<int64_t>(h->size());
  return n;
}

AttentionDims attention_dims(const MlaTrainLayer& l, const Dims& d) {
  return AttentionDims{l.batch,
                       l.seq,
                       static_cast<int>(d.H),
                       static_cast<int>(d.H),
                       static_cast<int>(d.qk),
                       model::attention_scale(l.config),
                       0};
}

// RoPE (or its transpose) on the dr tail of `heads` heads of stride `stride` at `offset`.
void rope(float* x, const MlaTrainLayer& l, const Dims& d, int64_t heads, int64_t stride,
          int64_t offset, bool inverse) {
  std::vector<float> tmp;
  model::mla_rope_tail(x, l.positions, d.N, heads, stride, offset, d.dr, l.inv_freq,
                       l.config.mla.rope_interleave, model::rope_magnitude(l.config), tmp, inverse);
}

// q [N, H, qk] with RoPE on each head's dr tail.
void queries_forward(ThreadPool& pool, MlaActs& a, const float* n1, const MlaTrainLayer& l,
                     const Dims& d) {
  if (d.qr > 0) {
    linear_forward(pool, fp(a.qa), n1, l.compute.mla->q_a, d.N);
    rmsnorm_forward(fp(a.qan), fp(a.qa_rstd), fp(a.qa), l.master.mla->q_a_norm.data<float>(), d.N,
                    d.qr, model::kMlaLatentNormEps);
    linear_forward(pool, fp(a.q), fp(a.qan), l.compute.wq, d.N);
  } else {
    linear_forward(pool, fp(a.q), n1, l.compute.wq, d.N);
  }
  rope(fp(a.q), l, d, d.H, d.qk, d.dn, false);
}

// k and v [N, H, qk] from the normed latent and the shared RoPE key (s.kv's tail).
void keys_values_forward(ThreadPool& pool, MlaActs& a, MlaScratch& s, const float* n1,
                         const MlaTrainLayer& l, const Dims& d) {
  float* kv = fp(s.kv);
  linear_forward(pool, kv, n1, l.compute.mla->kv_a, d.N);
  for (int64_t t = 0; t < d.N; ++t)
    std::memcpy(fp(a.c) + t * d.r, kv + t * d.cw, static_cast<size_t>(d.r) * sizeof(float));
  rmsnorm_forward(fp(a.cn), fp(a.c_rstd), fp(a.c), l.master.mla->kv_a_norm.data<float>(), d.N, d.r,
                  model::kMlaLatentNormEps);
  rope(kv, l, d, 1, d.cw, d.r, false);
  linear_forward(pool, fp(s.kvb), fp(a.cn), l.compute.mla->kv_b, d.N);
  zero(a.v);
  for (int64_t t = 0; t < d.N; ++t)
    for (int64_t h = 0; h < d.H; ++h) {
      const float* src = fp(s.kvb) + (t * d.H + h) * (d.dn + d.dv);
      float* k = fp(a.k) + (t * d.H + h) * d.qk;
      std::memcpy(k, src, static_cast<size_t>(d.dn) * sizeof(float));
      std::memcpy(k + d.dn, kv + t * d.cw + d.r, static_cast<size_t>(d.dr) * sizeof(float));
      std::memcpy(fp(a.v) + (t * d.H + h) * d.qk, src + d.dn,
                  static_cast<size_t>(d.dv) * sizeof(float));
    }
}

// dk'_t = Σ_h dk_t,h[dn:] into s.kv's tail, and dc_t from kv_b (terms 2, 3), into s.kv.
void latent_backward(ThreadPool& pool, const MlaActs& a, MlaScratch& s, const MlaTrainLayer& l,
                     const Dims& d) {
  float* dkvb = fp(s.kvb);
  float* dkv = fp(s.kv);
  zero(s.kv);
  for (int64_t t = 0; t < d.N; ++t)
    for (int64_t h = 0; h < d.H; ++h) {
      const float* dk = fp(s.dk) + (t * d.H + h) * d.qk;
      float* dst = dkvb + (t * d.H + h) * (d.dn + d.dv);
      std::memcpy(dst, dk, static_cast<size_t>(d.dn) * sizeof(float));
      std::memcpy(dst + d.dn, fp(s.dv) + (t * d.H + h) * d.qk,
                  static_cast<size_t>(d.dv) * sizeof(float));
      for (int64_t j = 0; j < d.dr; ++j) dkv[t * d.cw + d.r + j] += dk[d.dn + j];
    }
  rope(dkv, l, d, 1, d.cw, d.r, true);
  zero(s.dc);
  linear_backward(pool, fp(s.dc), l.grads.mla->kv_b.data<float>(), nullptr, dkvb, fp(a.cn),
                  l.compute.mla->kv_b, d.N);
  // kv_a_layernorm's backward accumulates into a zeroed dc', then copied into s.kv's head
  std::vector<float> dc_raw(static_cast<size_t>(d.N * d.r), 0.0f);
  rmsnorm_backward(dc_raw.data(), l.grads.mla->kv_a_norm.data<float>(), fp(s.dc), fp(a.c),
                   l.master.mla->kv_a_norm.data<float>(), fp(a.c_rstd), d.N, d.r);
  for (int64_t t = 0; t < d.N; ++t)
    std::memcpy(dkv + t * d.cw, &dc_raw[static_cast<size_t>(t * d.r)],
                static_cast<size_t>(d.r) * sizeof(float));
}

// dn1 += the query path's gradient (term 4 for q).
void queries_backward(ThreadPool& pool, float* dn1, const float* n1, const MlaActs& a,
                      MlaScratch& s, const MlaTrainLayer& l, const Dims& d) {
  rope(fp(s.dq), l, d, d.H, d.qk, d.dn, true);
  if (d.qr == 0) {
    linear_backward(pool, dn1, l.grads.wq.data<float>(), nullptr, fp(s.dq), n1, l.compute.wq, d.N);
    return;
  }
  zero(s.dqan);
  linear_backward(pool, fp(s.dqan), l.grads.wq.data<float>(), nullptr, fp(s.dq), fp(a.qan),
                  l.compute.wq, d.N);
  zero(s.dqa);
  rmsnorm_backward(fp(s.dqa), l.grads.mla->q_a_norm.data<float>(), fp(s.dqan), fp(a.qa),
                   l.master.mla->q_a_norm.data<float>(), fp(a.qa_rstd), d.N, d.qr);
  linear_backward(pool, dn1, l.grads.mla->q_a.data<float>(), nullptr, fp(s.dqa), n1,
                  l.compute.mla->q_a, d.N);
}

}  // namespace

void check_mla_trainable(const model::ModelConfig& c) {
  const model::MlaConfig& m = c.mla;
  if (m.v_head_dim > m.qk_head_dim())
    throw_error<ConfigError>(
        "training MLA with v_head_dim {} > qk_nope_head_dim + qk_rope_head_dim {} is not "
        "implemented (V is zero-padded to the key width)",
        m.v_head_dim, m.qk_head_dim());
  for (int l = 0; l < c.num_layers; ++l)
    if (c.attention_window(l) > 0)
      throw_error<ConfigError>("training MLA with a sliding window (layer {}) is not implemented",
                               l);
}

void MlaActs::allocate(const model::ModelConfig& config, int batch, int seq) {
  const Dims d = dims_of(config, batch, seq);
  if (d.qr > 0) qa = floats(d.N * d.qr), qa_rstd = floats(d.N), qan = floats(d.N * d.qr);
  c = floats(d.N * d.r), c_rstd = floats(d.N), cn = floats(d.N * d.r);
  q = floats(d.N * d.H * d.qk), k = floats(d.N * d.H * d.qk), v = floats(d.N * d.H * d.qk);
  out = floats(d.N * d.H * d.qk);
  att = floats(d.N * d.H * d.dv);
}

int64_t MlaActs::bytes() const {
  return total_bytes({&qa, &qa_rstd, &qan, &c, &c_rstd, &cn, &q, &k, &v, &out, &att});
}

void MlaScratch::allocate(const model::ModelConfig& c, int batch, int seq) {
  const Dims d = dims_of(c, batch, seq);
  kv = floats(d.N * d.cw), kvb = floats(d.N * d.H * (d.dn + d.dv)), pad = floats(d.N * d.H * d.qk);
  datt = floats(d.N * d.H * d.dv);
  dq = floats(d.N * d.H * d.qk), dk = floats(d.N * d.H * d.qk), dv = floats(d.N * d.H * d.qk);
  dc = floats(d.N * d.r);
  if (d.qr > 0) dqan = floats(d.N * d.qr), dqa = floats(d.N * d.qr);
}

int64_t MlaScratch::bytes() const {
  return total_bytes({&kv, &kvb, &pad, &datt, &dq, &dk, &dv, &dc, &dqan, &dqa});
}

void mla_train_forward(ThreadPool& pool, MlaActs& a, MlaScratch& s, const float* n1,
                       const MlaTrainLayer& l) {
  const Dims d = dims_of(l.config, l.batch, l.seq);
  queries_forward(pool, a, n1, l, d);
  keys_values_forward(pool, a, s, n1, l, d);
  attention_forward(pool, fp(a.out), fp(a.q), fp(a.k), fp(a.v), attention_dims(l, d));
  for (int64_t i = 0; i < d.N * d.H; ++i)  // drop V's zero padding
    std::memcpy(fp(a.att) + i * d.dv, fp(a.out) + i * d.qk,
                static_cast<size_t>(d.dv) * sizeof(float));
}

void mla_train_backward(ThreadPool& pool, float* dn1, const float* n1, const MlaActs& a,
                        MlaScratch& s, const MlaTrainLayer& l) {
  const Dims d = dims_of(l.config, l.batch, l.seq);
  zero(s.pad);
  for (int64_t i = 0; i < d.N * d.H; ++i)
    std::memcpy(fp(s.pad) + i * d.qk, fp(s.datt) + i * d.dv,
                static_cast<size_t>(d.dv) * sizeof(float));
  zero(s.dq), zero(s.dk), zero(s.dv);
  attention_backward(pool, fp(s.dq), fp(s.dk), fp(s.dv), fp(s.pad), fp(a.q), fp(a.k), fp(a.v),
                     fp(a.out), attention_dims(l, d));
  latent_backward(pool, a, s, l, d);
  linear_backward(pool, dn1, l.grads.mla->kv_a.data<float>(), nullptr, fp(s.kv), n1,
                  l.compute.mla->kv_a, d.N);
  queries_backward(pool, dn1, n1, a, s, l, d);
}

}  // namespace lmstack::train
