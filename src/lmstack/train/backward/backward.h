// The backward kernels of training, one file per layer kind in train/backward/, each with the
// derivation of its gradient in its header comment; tests/train/backward_test.cc checks every
// one against central finite differences of an independent float64 forward. Forward helpers
// that save what the backward needs (norm statistics) live here too.
// Conventions as kernels/ops.h: f32 row-major activations, weights [N, K] (y = x·Wᵀ). Unless
// a contract says "written", input gradients (dx) and parameter gradients (dw, db) ACCUMULATE
// (+=), so residual branches and tied weights need no extra adds. Not thread-safe per output.
#pragma once

#include <cstdint>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::train {

// ---- linear: y[M, N] = x[M, K] · w[N, K]ᵀ + b[N] --------------------------------------
// In training a bf16 weight is a compute copy (TrainModelOptions::compute_dtype kBF16), and
// it selects bf16 mixed precision for the layer's three products: forward and backward run
// kernels::gemm_bf16, whose operands (activations and gradients too) are rounded to bf16 and
// summed in f32, as PyTorch autocast's bf16 matmuls. An f32 weight keeps every product f32.
//
// y[M, N] = x · wᵀ (+ b) (+ y if accumulate): kernels::linear_bf16 for a bf16 w, else
// kernels::linear.
void linear_forward(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                    const float* bias = nullptr, bool accumulate = false);
// dx[M, K] += dy · w (skipped when dx is null); dw[N, K] += dyᵀ · x; db[N] += Σ_rows dy
// (skipped when db is null). w may be f32 or bf16 (see above).
void linear_backward(ThreadPool& pool, float* dx, float* dw, float* db, const float* dy,
                     const float* x, const Tensor& w, int64_t m);

// ---- embedding: out[t, :] = table[ids[t], :] ------------------------------------------
// dtable[ids[t], :] += dout[t, :] (rows repeat: a scatter-add, run serially per row).
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t dim);

// ---- RMSNorm: y = x · rstd · w, rstd = 1/sqrt(mean(x²) + eps) --------------------------
// Forward that also writes rstd[rows]. y may alias x.
void rmsnorm_forward(float* y, float* rstd, const float* x, const float* weight, int64_t rows,
                     int64_t dim, float eps);
// dx += ∂L/∂x, dweight += ∂L/∂w from dy, the forward input x and its saved rstd.
void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x,
                      const float* weight, const float* rstd, int64_t rows, int64_t dim);

// ---- LayerNorm: y = (x - mean) · rstd · g + b ------------------------------------------
void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int64_t rows, int64_t dim, float eps);
// dx += ; dgamma += ; dbeta += (skipped when null).
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int64_t rows,
                        int64_t dim);

// ---- RoPE (rotate-half pairs, kernels::rope's angles) -----------------------------------
// In place: dx[T, heads, head_dim] becomes the gradient before the rotation (written).
void rope_backward(float* dx, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                   const float* inv_freq);

// ---- causal self-attention over a dense batch -------------------------------------------
// Legend: B sequences of T tokens, H query heads, Hkv kv heads (H % Hkv == 0), D head dim.
// q [B·T, H·D], k and v [B·T, Hkv·D], out [B·T, H·D]. scale is usually 1/sqrt(D). Training
// runs the one attention of kernels/ (ops.h causal_attention, the flash prefill forward, and
// its backward, which recomputes the softmax instead of saving [B, H, T, T] probabilities).
struct AttentionDims {
  int64_t batch = 0, seq = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int window = 0;  // > 0: sliding window, query t sees keys t - window < j <= t (ops.h)
};
inline void attention_forward(ThreadPool& pool, float* out, const float* q, const float* k,
                              const float* v, const AttentionDims& d) {
  kernels::causal_attention(pool, out, q, k, v, d.batch, d.seq, d.heads, d.kv_heads, d.head_dim,
                            d.scale, d.window);
}
// dq, dk, dv += the gradients (same shapes as q, k, v), given the forward's out.
inline void attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               const AttentionDims& d) {
  kernels::causal_attention_backward(pool, dq, dk, dv, dout, q, k, v, out, d.batch, d.seq, d.heads,
                                     d.kv_heads, d.head_dim, d.scale, d.window);
}

// ---- MLP activations ---------------------------------------------------------------------
// SwiGLU: out = silu(gate) ⊙ up. dgate and dup are written.
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n);
// GELU (tanh form): dx written; x is the pre-activation. dx may alias dy.
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n);

// ---- cross-entropy fused with softmax ----------------------------------------------------
// For each row r of logits[rows, V]: losses[r] = logsumexp(logits[r]) - logits[r, targets[r]]
// (natural log), then logits[r] is overwritten by its gradient scaled by `grad_scale`:
// (softmax(logits[r]) - onehot(targets[r])) · grad_scale. Returns Σ losses (double).
// Targets outside [0, V) are a RequestError.
double cross_entropy_forward_backward(float* logits, float* losses, const int32_t* targets,
                                      int64_t rows, int64_t vocab, float grad_scale);
// The vectorized form of the above (kernels::softmax_rows in float, rows in parallel over the
// pool), same contract. (classifier.cc)
double cross_entropy_softmax_rows(ThreadPool& pool, float* logits, float* losses,
                                  const int32_t* targets, int64_t rows, int64_t vocab,
                                  float grad_scale);

// ---- fused classifier: lm_head, cross-entropy and their backward, by row chunks ---------
struct ClassifierArgs {
  const float* x = nullptr;          // [rows, C]: the final norm's output
  Tensor w;                          // [V, C] lm_head as the forward reads it (f32 or bf16)
  const float* w_f32 = nullptr;      // [V, C]: w in f32 (dx of an f32 w; unread for bf16)
  const int32_t* targets = nullptr;  // [rows]
  int64_t rows = 0;
  float grad_scale = 1.0f;
  float* chunk = nullptr;  // [chunk_rows, V] scratch
  int64_t chunk_rows = 0;
};
// dx[rows, C] += ∂(grad_scale·Σ losses)/∂x, dw[V, C] += the same for w, losses[rows] written;
// returns Σ losses. Equal to linear() + cross_entropy_forward_backward + linear_backward.
double classifier_forward_backward(ThreadPool& pool, float* dx, float* dw, float* losses,
                                   const ClassifierArgs& args);

// Loss only (logits untouched): Σ_r losses[r].
double cross_entropy_loss(const float* logits, float* losses, const int32_t* targets, int64_t rows,
                          int64_t vocab);

}  // namespace lmstack::train
