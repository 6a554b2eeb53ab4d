// Training forward and backward of the mixture-of-experts MLP (model/moe.h's block: router,
// top-k, dropless grouped SwiGLU experts, weighted combine, shared experts), with the
// Switch/Mixtral load-balancing loss and DeepSeek-V3's aux-loss-free bias update. Routing is
// model/moe.cc's own code (moe_route, moe_scores, moe_group_by_expert), so training and
// inference choose the same experts. Derivations: moe_train.cc's header; tests:
// tests/train/moe_train_test.cc (finite differences) and moe_parity_test.cc (PyTorch).
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/moe.h"

namespace lmstack::train {

// Legend: N token rows, C hidden, E routed experts, k chosen per row, P = N·k (row, slot)
// pairs in expert order (expert e's are order[offsets[e] .. offsets[e+1])), Fe one expert's
// width, Fs the shared expert's width.
//
// What one sparse layer's backward reads, written by moe_mlp_forward. Sizes are fixed by
// (N, config), so allocate() runs once per batch shape.
struct MoeActs {
  std::vector<float> logits;            // [N, E] router logits
  model::MoeRouting routing;            // chosen, weight [N, k] (routed_scale included)
  std::vector<int32_t> offsets, order;  // [E + 1], [P]
  HostBuffer xe, gate, up, act, ye;     // [P, C], [P, Fe] x3, [P, C]: per pair, expert order
  HostBuffer s_gate, s_up, s_act, s_y;  // [N, Fs] x3, [N, C]: shared expert, before its gate
  std::vector<float> s_logit;           // [N] Qwen2-MoE shared_expert_gate · h

  void allocate(const model::ModelConfig& c, int64_t rows);
  int64_t bytes() const;
};

// Backward scratch shared by every sparse layer (same shapes as MoeActs' pair buffers).
struct MoeGradScratch {
  HostBuffer dxe, dye, dgate, dup, dact;    // [P, C], [P, C], [P, Fe] x3
  HostBuffer ds_gate, ds_up, ds_act, ds_y;  // [N, Fs] x3, [N, C]
  std::vector<float> dweight, dlogits;      // [N, k], [N, E]

  void allocate(const model::ModelConfig& c, int64_t rows);
  int64_t bytes() const;
};

// The weights a sparse layer computes with: the experts' (and shared expert's) compute copies,
// bf16 under mixed precision, with the router, its score bias and the shared-expert gate from
// the f32 master (inference keeps routers f32 too: the top-k is sensitive to rounding).
model::MoeLayerWeights moe_compute_weights(const model::MoeLayerWeights& compute,
                                           const model::MoeLayerWeights& master);

// Who computes the routed experts of a sparse layer: by default (runner == nullptr) every
// expert runs here (moe_experts_forward/backward); expert parallelism
// (train/expert_parallel.h) sends each pair's row to the rank owning its expert and back.
// Implementations see the pairs in expert order, as moe_dispatch left them, and must fill
// every pair's row. Calls come in the same order on every rank of an expert-parallel group
// (layer by layer, forward then backward), which is what lets them be collectives.
class MoeExpertRunner {
 public:
  virtual ~MoeExpertRunner() = default;
  // a.ye[P, C] = expert(pair)(a.xe[P, C]) for every pair, grouped by a.offsets; may save what
  // backward(layer) needs.
  virtual void forward(ThreadPool& pool, int layer, MoeActs& a, const model::MoeLayerWeights& w,
                       int64_t C) = 0;
  // s.dxe[P, C] (written) from s.dye[P, C], and the gradients of the experts this rank holds
  // (accumulated into g) from the last forward(layer).
  virtual void backward(ThreadPool& pool, int layer, MoeGradScratch& s, model::MoeLayerWeights& g,
                        const MoeActs& a, const model::MoeLayerWeights& w, int64_t C) = 0;
  // Bytes of the buffers it holds (counted with the activations).
  virtual int64_t bytes() const = 0;
};

// out[N, C] += MoE(h[N, C]) with weights `w` (moe_compute_weights), saving into `a`.
// tokens_per_expert[E] gets each expert's rows, prob_sum[E] the sum over rows of softmax(logits)
// (the aux loss's P_e). `runner` (may be null: all experts here) computes the routed experts of
// layer `layer`.
void moe_mlp_forward(ThreadPool& pool, float* out, const float* h, int64_t rows,
                     const model::ModelConfig& c, const model::MoeLayerWeights& w, MoeActs& a,
                     int64_t* tokens_per_expert, double* prob_sum,
                     MoeExpertRunner* runner = nullptr, int layer = 0);

// dh[N, C] += ∂L/∂h and g's tensors += ∂L/∂w (router, experts, shared) from dy = ∂L/∂out.
// aux_dprob[E] (may be null) adds Σ_rows Σ_e aux_dprob[e] · softmax(logits)_e to the loss
// (the load-balancing term, moe_aux_loss). The selection itself has no gradient, nor does
// V3's score bias (selection only).
void moe_mlp_backward(ThreadPool& pool, float* dh, model::MoeLayerWeights& g, const float* dy,
                      const float* h, int64_t rows, const model::ModelConfig& c,
                      const model::MoeLayerWeights& w, const MoeActs& a, const float* aux_dprob,
                      MoeGradScratch& s, MoeExpertRunner* runner = nullptr, int layer = 0);

// ---- the expert-parallel seam: dispatch -> experts -> combine, and their backwards ----------
// Expert parallelism replaces moe_dispatch / moe_combine (and their backwards) by all-to-alls
// that send each pair's row to the rank owning its expert; moe_experts_* run unchanged on the
// rows a rank received, grouped by `offsets`.
// xe[i, :] = h[order[i] / k, :] for every pair i.
void moe_dispatch(float* xe, const float* h, const std::vector<int32_t>& order, int k, int64_t C);
// dh[order[i] / k, :] += dxe[i, :].
void moe_dispatch_backward(float* dh, const float* dxe, const std::vector<int32_t>& order, int k,
                           int64_t C);
// For each expert e with rows: gate, up = xe·W_gateᵀ, xe·W_upᵀ; act = silu(gate) ⊙ up;
// ye = act·W_downᵀ over its rows [offsets[e], offsets[e+1]).
void moe_experts_forward(ThreadPool& pool, MoeActs& a, const std::vector<int32_t>& offsets,
                         const model::MoeLayerWeights& w, int64_t C);
// dxe (written) and the experts' weight gradients (accumulated) from dye.
void moe_experts_backward(ThreadPool& pool, MoeGradScratch& s, model::MoeLayerWeights& g,
                          const MoeActs& a, const std::vector<int32_t>& offsets,
                          const model::MoeLayerWeights& w, int64_t C);
// out[order[i] / k, :] += weight[order[i]] · ye[i, :].
void moe_combine(float* out, const float* ye, const std::vector<float>& weight,
                 const std::vector<int32_t>& order, int k, int64_t C);
// dye[i, :] = weight[p] · dy[t, :] and dweight[p] = dy[t, :] · ye[i, :] (p = order[i], t = p/k).
void moe_combine_backward(float* dye, float* dweight, const float* dy, const float* ye,
                          const std::vector<float>& weight, const std::vector<int32_t>& order,
                          int k, int64_t C);

// ∂L/∂logits[N, E] (written) from ∂L/∂weight[N, k] through the chosen scores (softmax or
// sigmoid; renormalization; routed_scale), plus the aux term aux_dprob (may be null).
void moe_router_backward(float* dlogits, const float* dweight, const float* logits,
                         const model::MoeRouting& routing, int64_t rows,
                         const model::MoeConfig& cfg, const float* aux_dprob);

// The load-balancing loss of one forward as transformers' load_balancing_loss_func computes it
// for Mixtral / Qwen-MoE (Fedus et al. 2021 eq. 4, with top-k): the router rows of every
// sparse layer are concatenated, R = num_sparse_layers · rows of them, f_e = (assignments of
// e over all k slots) / R, P_e = Σ softmax(logits)_e / R, aux = E · Σ_e f_e · P_e (k for a
// perfect balance). tokens and prob_sum are [E], summed over the sparse layers. Returns aux and
// writes dprob[e] = coef_scale · E · f_e / R, the gradient of coef_scale · aux per row and
// softmax entry (f is a count: no gradient).
double moe_aux_loss(const int64_t* tokens, const double* prob_sum, int num_experts,
                    int64_t num_rows, double coef_scale, std::vector<float>& dprob);

// DeepSeek-V3's auxiliary-loss-free balancing (Wang et al. 2024; DeepSeek-V3 §2.1.2): after a
// step, bias[e] += rate · sign(mean_e' load − load[e]) for one layer's [E] loads.
void moe_update_score_bias(float* bias, const int64_t* load, int num_experts, float rate);

}  // namespace lmstack::train
