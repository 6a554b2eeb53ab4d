// MoE MLP forward/backward for training (contracts in moe_train.h). Forward per row t:
//   s = softmax(z_t) or sigmoid(z_t), z_t = W_r·h_t; chosen c_1..c_k (model::moe_route);
//   w_j = rs · s_{c_j} / D, D = Σ_j s_{c_j} with norm_topk_prob (else D = 1);
//   out_t = Σ_j w_j · E_{c_j}(h_t) [+ σ(w_sg·h_t)] · S(h_t)   (E, S: SwiGLU experts).
// Backward: dw_j = <dy_t, E_{c_j}(h_t)>; through the normalization
//   ∂L/∂s_{c_i} = rs/D · (dw_i − Σ_j dw_j · s_{c_j} / D)   (rs · dw_i without it);
// then the softmax Jacobian dz = s ⊙ (ds − <s, ds>) or the sigmoid's dz = ds ⊙ s(1 − s). The
// top-k selection is piecewise constant (no gradient); V3's bias only moves the selection.
#include "lmstack/train/moe_train.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {
namespace {

HostBuffer floats(int64_t count) {
  return HostBuffer(static_cast<size_t>(count) * sizeof(float), MemoryCategory::kActivations);
}
float* fp(HostBuffer& b) { return static_cast<float*>(b.data()); }
const float* fp(const HostBuffer& b) { return static_cast<const float*>(b.data()); }
template <class T>
int64_t vec_bytes(const std::vector<T>& v) {
  return static_cast<int64_t>(v.capacity() * sizeof(T));
}
float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }
size_t at(int64_t i) { return static_cast<size_t>(i); }

// y = down(silu(gate·x) ⊙ up·x) over n rows, saving gate, up and act.
void swiglu_forward(ThreadPool& pool, float* y, float* gate, float* up, float* act, const float* x,
                    int64_t n, const Tensor& wg, const Tensor& wu, const Tensor& wd) {
  const int64_t f = wg.dim(0);
  linear_forward(pool, gate, x, wg, n);
  linear_forward(pool, up, x, wu, n);
  kernels::silu_mul(act, gate, up, n * f);
  linear_forward(pool, y, act, wd, n);
}

// dx (written) and the three weight gradients (accumulated) of swiglu_forward; dact, dgate and
// dup are scratch of n·F floats.
void swiglu_train_backward(ThreadPool& pool, float* dx, Tensor& gg, Tensor& gu, Tensor& gd,
                           const float* dy, const float* x, const float* gate, const float* up,
                           const float* act, int64_t n, const Tensor& wg, const Tensor& wu,
                           const Tensor& wd, float* dact, float* dgate, float* dup) {
  const int64_t f = wg.dim(0), c = wg.dim(1);
  std::memset(dact, 0, at(n * f) * sizeof(float));
  linear_backward(pool, dact, gd.data<float>(), nullptr, dy, act, wd, n);
  swiglu_backward(dgate, dup, dact, gate, up, n * f);
  std::memset(dx, 0, at(n * c) * sizeof(float));
  linear_backward(pool, dx, gg.data<float>(), nullptr, dgate, x, wg, n);
  linear_backward(pool, dx, gu.data<float>(), nullptr, dup, x, wu, n);
}

void shared_forward(ThreadPool& pool, float* out, const float* h, int64_t rows, int64_t C,
                    const model::MoeConfig& cfg, const model::MoeLayerWeights& w, MoeActs& a) {
  swiglu_forward(pool, fp(a.s_y), fp(a.s_gate), fp(a.s_up), fp(a.s_act), h, rows, w.shared_gate,
                 w.shared_up, w.shared_down);
  if (!cfg.shared_gate) {
    kernels::add_inplace(out, fp(a.s_y), rows * C);
    return;
  }
  // Qwen2-MoE: out += sigmoid(w_sg · h) · S(h), per row.
  linear_forward(pool, a.s_logit.data(), h, w.shared_expert_gate, rows);
  for (int64_t t = 0; t < rows; ++t) {
    const float g = sigmoid(a.s_logit[at(t)]);
    for (int64_t c = 0; c < C; ++c) out[t * C + c] += g * fp(a.s_y)[t * C + c];
  }
}

void shared_backward(ThreadPool& pool, float* dh, model::MoeLayerWeights& g, const float* dy,
                     const float* h, int64_t rows, int64_t C, const model::MoeConfig& cfg,
                     const model::MoeLayerWeights& w, const MoeActs& a, MoeGradScratch& s) {
  const float* sy = fp(a.s_y);
  float* dsy = fp(s.ds_y);
  std::copy_n(dy, rows * C, dsy);
  if (cfg.shared_gate) {
    // d(gate logit)_t = <dy_t, S(h)_t> · σ(1 − σ); dy into S is scaled by σ.
    std::vector<float> dlogit(at(rows));
    for (int64_t t = 0; t < rows; ++t) {
      const float sg = sigmoid(a.s_logit[at(t)]);
      double dot = 0;
      for (int64_t c = 0; c < C; ++c) {
        dot += static_cast<double>(dy[t * C + c]) * sy[t * C + c];
        dsy[t * C + c] *= sg;
      }
      dlogit[at(t)] = static_cast<float>(dot) * sg * (1.0f - sg);
    }
    linear_backward(pool, dh, g.shared_expert_gate.data<float>(), nullptr, dlogit.data(), h,
                    w.shared_expert_gate, rows);
  }
  std::vector<float> dx(at(rows * C));
  swiglu_train_backward(pool, dx.data(), g.shared_gate, g.shared_up, g.shared_down, dsy, h,
                        fp(a.s_gate), fp(a.s_up), fp(a.s_act), rows, w.shared_gate, w.shared_up,
                        w.shared_down, fp(s.ds_act), fp(s.ds_gate), fp(s.ds_up));
  kernels::add_inplace(dh, dx.data(), rows * C);
}

}  // namespace

void MoeActs::allocate(const model::ModelConfig& c, int64_t rows) {
  const model::MoeConfig& m = c.moe;
  const int64_t pairs = rows * m.top_k, C = c.hidden_size, fe = m.expert_intermediate,
                fs = m.shared_intermediate;
  logits.assign(at(rows * m.num_experts), 0.0f);
  routing.chosen.assign(at(pairs), 0);
  routing.weight.assign(at(pairs), 0.0f);
  offsets.assign(at(m.num_experts) + 1, 0);
  order.assign(at(pairs), 0);
  xe = floats(pairs * C), ye = floats(pairs * C);
  gate = floats(pairs * fe), up = floats(pairs * fe), act = floats(pairs * fe);
  if (fs > 0) {
    s_gate = floats(rows * fs), s_up = floats(rows * fs), s_act = floats(rows * fs);
    s_y = floats(rows * C);
  }
  if (m.shared_gate) s_logit.assign(at(rows), 0.0f);
}

int64_t MoeActs::bytes() const {
  int64_t b = vec_bytes(logits) + vec_bytes(routing.chosen) + vec_bytes(routing.weight) +
              vec_bytes(offsets) + vec_bytes(order) + vec_bytes(s_logit);
  for (const HostBuffer* h : {&xe, &gate, &up, &act, &ye, &s_gate, &s_up, &s_act, &s_y})
    b += static_cast<int64_t>(h->size());
  return b;
}

void MoeGradScratch::allocate(const model::ModelConfig& c, int64_t rows) {
  const model::MoeConfig& m = c.moe;
  const int64_t pairs = rows * m.top_k, C = c.hidden_size, fe = m.expert_intermediate,
                fs = m.shared_intermediate;
  dxe = floats(pairs * C), dye = floats(pairs * C);
  dgate = floats(pairs * fe), dup = floats(pairs * fe), dact = floats(pairs * fe);
  if (fs > 0) {
    ds_gate = floats(rows * fs), ds_up = floats(rows * fs), ds_act = floats(rows * fs);
    ds_y = floats(rows * C);
  }
  dweight.assign(at(pairs), 0.0f);
  dlogits.assign(at(rows * m.num_experts), 0.0f);
}

int64_t MoeGradScratch::bytes() const {
  int64_t b = vec_bytes(dweight) + vec_bytes(dlogits);
  for (const HostBuffer* h : {&dxe, &dye, &dgate, &dup, &dact, &ds_gate, &ds_up, &ds_act, &ds_y})
    b += static_cast<int64_t>(h->size());
  return b;
}

void moe_dispatch(float* xe, const float* h, const std::vector<int32_t>& order, int k, int64_t C) {
  for (size_t i = 0; i < order.size(); ++i)
    std::copy_n(h + (order[i] / k) * C, C, xe + static_cast<int64_t>(i) * C);
}

void moe_dispatch_backward(float* dh, const float* dxe, const std::vector<int32_t>& order, int k,
                           int64_t C) {
  for (size_t i = 0; i < order.size(); ++i)
    kernels::add_inplace(dh + (order[i] / k) * C, dxe + static_cast<int64_t>(i) * C, C);
}

void moe_experts_forward(ThreadPool& pool, MoeActs& a, const std::vector<int32_t>& offsets,
                         const model::MoeLayerWeights& w, int64_t C) {
  const int64_t fe = w.w_gate.empty() ? 0 : w.w_gate[0].dim(0);
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    const int64_t b = offsets[e], n = offsets[e + 1] - b;
    if (n == 0) continue;  // dropless: an expert no row chose does no work
    swiglu_forward(pool, fp(a.ye) + b * C, fp(a.gate) + b * fe, fp(a.up) + b * fe,
                   fp(a.act) + b * fe, fp(a.xe) + b * C, n, w.w_gate[e], w.w_up[e], w.w_down[e]);
  }
}

void moe_experts_backward(ThreadPool& pool, MoeGradScratch& s, model::MoeLayerWeights& g,
                          const MoeActs& a, const std::vector<int32_t>& offsets,
                          const model::MoeLayerWeights& w, int64_t C) {
  const int64_t fe = w.w_gate.empty() ? 0 : w.w_gate[0].dim(0);
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    const int64_t b = offsets[e], n = offsets[e + 1] - b;
    if (n == 0) continue;
    swiglu_train_backward(pool, fp(s.dxe) + b * C, g.w_gate[e], g.w_up[e], g.w_down[e],
                          fp(s.dye) + b * C, fp(a.xe) + b * C, fp(a.gate) + b * fe,
                          fp(a.up) + b * fe, fp(a.act) + b * fe, n, w.w_gate[e], w.w_up[e],
                          w.w_down[e], fp(s.dact) + b * fe, fp(s.dgate) + b * fe,
                          fp(s.dup) + b * fe);
  }
}

void moe_combine(float* out, const float* ye, const std::vector<float>& weight,
                 const std::vector<int32_t>& order, int k, int64_t C) {
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t p = order[i];
    const float wt = weight[static_cast<size_t>(p)];
    float* dst = out + (p / k) * C;
    const float* src = ye + static_cast<int64_t>(i) * C;
    for (int64_t c = 0; c < C; ++c) dst[c] += wt * src[c];
  }
}

void moe_combine_backward(float* dye, float* dweight, const float* dy, const float* ye,
                          const std::vector<float>& weight, const std::vector<int32_t>& order,
                          int k, int64_t C) {
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t p = order[i];
    const float wt = weight[static_cast<size_t>(p)];
    const float* g = dy + (p / k) * C;
    const float* y = ye + static_cast<int64_t>(i) * C;
    float* d = dye + static_cast<int64_t>(i) * C;
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) {
      d[c] = wt * g[c];
      dot += static_cast<double>(g[c]) * y[c];
    }
    dweight[static_cast<size_t>(p)] = static_cast<float>(dot);
  }
}

void moe_router_backward(float* dlogits, const float* dweight, const float* logits,
                         const model::MoeRouting& routing, int64_t rows,
                         const model::MoeConfig& cfg, const float* aux_dprob) {
  const int E = cfg.num_experts, k = cfg.top_k;
  std::vector<float> s(at(E)), p(at(E));
  std::vector<double> ds(at(E));
  for (int64_t t = 0; t < rows; ++t) {
    const float* z = logits + t * E;
    const int32_t* chosen = routing.chosen.data() + t * k;
    const float* dw = dweight + t * k;
    model::moe_scores(cfg.score, z, E, s.data());
    std::fill(ds.begin(), ds.end(), 0.0);
    double sum = 0, dot = 0;
    for (int j = 0; j < k; ++j) {
      sum += s[at(chosen[j])];
      dot += static_cast<double>(dw[j]) * s[at(chosen[j])];
    }
    // The renormalization's quotient rule (V3 adds 1e-20 to D, as moe_route does).
    const double D = cfg.norm_topk_prob ? sum + (cfg.score_bias ? 1e-20 : 0.0) : 1.0;
    for (int j = 0; j < k; ++j)
      ds[at(chosen[j])] +=
          cfg.routed_scale * (cfg.norm_topk_prob ? dw[j] / D - dot / (D * D) : double{dw[j]});
    float* dz = dlogits + t * E;
    if (cfg.score == model::RouterScore::kSigmoid) {
      for (int e = 0; e < E; ++e) dz[e] = static_cast<float>(ds[at(e)] * s[at(e)] * (1 - s[at(e)]));
    } else {
      double sds = 0;
      for (int e = 0; e < E; ++e) sds += s[at(e)] * ds[at(e)];
      for (int e = 0; e < E; ++e) dz[e] = static_cast<float>(s[at(e)] * (ds[at(e)] - sds));
    }
    if (aux_dprob == nullptr) continue;
    // The aux loss reads softmax(z) whatever the routing's score function.
    model::moe_scores(model::RouterScore::kSoftmax, z, E, p.data());
    double pa = 0;
    for (int e = 0; e < E; ++e) pa += static_cast<double>(p[at(e)]) * aux_dprob[e];
    for (int e = 0; e < E; ++e) dz[e] += static_cast<float>(p[at(e)] * (aux_dprob[e] - pa));
  }
}

void moe_mlp_forward(ThreadPool& pool, float* out, const float* h, int64_t rows,
                     const model::ModelConfig& c, const model::MoeLayerWeights& w, MoeActs& a,
                     int64_t* tokens_per_expert, double* prob_sum, MoeExpertRunner* runner,
                     int layer) {
  const model::MoeConfig& cfg = c.moe;
  const int64_t C = c.hidden_size;
  const int E = cfg.num_experts;
  linear_forward(pool, a.logits.data(), h, w.router, rows);
  model::moe_route(cfg, a.logits.data(), rows,
                   w.score_bias.defined() ? w.score_bias.data<float>() : nullptr, a.routing);
  model::moe_group_by_expert(a.routing, E, a.offsets, a.order);
  for (int e = 0; e < E; ++e) tokens_per_expert[e] = a.offsets[at(e) + 1] - a.offsets[at(e)];
  std::vector<float> p(at(E));
  for (int64_t t = 0; t < rows; ++t) {
    model::moe_scores(model::RouterScore::kSoftmax, a.logits.data() + t * E, E, p.data());
    for (int e = 0; e < E; ++e) prob_sum[e] += p[at(e)];
  }
  moe_dispatch(fp(a.xe), h, a.order, cfg.top_k, C);
  if (runner)
    runner->forward(pool, layer, a, w, C);
  else
    moe_experts_forward(pool, a, a.offsets, w, C);
  moe_combine(out, fp(a.ye), a.routing.weight, a.order, cfg.top_k, C);
  if (cfg.shared_intermediate > 0) shared_forward(pool, out, h, rows, C, cfg, w, a);
}

void moe_mlp_backward(ThreadPool& pool, float* dh, model::MoeLayerWeights& g, const float* dy,
                      const float* h, int64_t rows, const model::ModelConfig& c,
                      const model::MoeLayerWeights& w, const MoeActs& a, const float* aux_dprob,
                      MoeGradScratch& s, MoeExpertRunner* runner, int layer) {
  const model::MoeConfig& cfg = c.moe;
  const int64_t C = c.hidden_size;
  if (cfg.shared_intermediate > 0) shared_backward(pool, dh, g, dy, h, rows, C, cfg, w, a, s);
  moe_combine_backward(fp(s.dye), s.dweight.data(), dy, fp(a.ye), a.routing.weight, a.order,
                       cfg.top_k, C);
  if (runner)
    runner->backward(pool, layer, s, g, a, w, C);
  else
    moe_experts_backward(pool, s, g, a, a.offsets, w, C);
  moe_dispatch_backward(dh, fp(s.dxe), a.order, cfg.top_k, C);
  moe_router_backward(s.dlogits.data(), s.dweight.data(), a.logits.data(), a.routing, rows, cfg,
                      aux_dprob);
  linear_backward(pool, dh, g.router.data<float>(), nullptr, s.dlogits.data(), h, w.router, rows);
}

model::MoeLayerWeights moe_compute_weights(const model::MoeLayerWeights& compute,
                                           const model::MoeLayerWeights& master) {
  model::MoeLayerWeights w = compute;
  w.router = master.router;
  w.score_bias = master.score_bias;
  w.shared_expert_gate = master.shared_expert_gate;
  return w;
}

double moe_aux_loss(const int64_t* tokens, const double* prob_sum, int num_experts,
                    int64_t num_rows, double coef_scale, std::vector<float>& dprob) {
  dprob.assign(at(num_experts), 0.0f);
  if (num_rows == 0) return 0;
  const double r = static_cast<double>(num_rows);
  double aux = 0;
  for (int e = 0; e < num_experts; ++e) {
    const double f = static_cast<double>(tokens[e]) / r;
    aux += f * prob_sum[e] / r;
    dprob[at(e)] = static_cast<float>(coef_scale * num_experts * f / r);
  }
  return num_experts * aux;
}

void moe_update_score_bias(float* bias, const int64_t* load, int num_experts, float rate) {
  double mean = 0;
  for (int e = 0; e < num_experts; ++e) mean += static_cast<double>(load[e]);
  mean /= num_experts;
  for (int e = 0; e < num_experts; ++e) {
    const double d = mean - static_cast<double>(load[e]);
    bias[e] += rate * static_cast<float>((d > 0) - (d < 0));
  }
}

}  // namespace lmstack::train
