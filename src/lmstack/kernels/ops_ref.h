// Scalar reference implementations of the ops in ops.h: plain loops written for clarity,
// the truth every optimized variant is tested against (tests/kernels/). Each op's helper
// appends its own block below; the contracts are those of the same-named op in ops.h.
#pragma once

#include <cstdint>

#include "lmstack/core/tensor.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels::ref {

// ---- matrix products (linear_ref.cc, gemm_ref.cc) ----------------------------------------
// Single-threaded triple loops accumulating in double, so the reference is at least as
// accurate as any f32 variant whatever its summation order.
void linear(float* y, const float* x, const Tensor& w, int64_t m, const float* bias = nullptr,
            bool accumulate = false);
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc);
// gemm_bf16: each of alpha · op(A) and op(B) rounded to bf16 (nearest even), then as gemm_f32.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const void* b, DType b_dtype, int64_t ldb, float beta,
               float* c, int64_t ldc);

// ---- norms, rope, activations, softmax, embedding, attention ------------------------------
// (norm.cc, rope.cc, activation.cc, softmax.cc, embedding.cc, attention_ref.cc.) Hugging Face
// semantics, reductions accumulated in double; transcendental functions evaluated in double
// and rounded once. paged_attention here is the plain per-query softmax over gathered keys.
void rmsnorm(float* y, const float* x, const float* weight, int64_t rows, int64_t dim, float eps);
void layernorm(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
               int64_t dim, float eps);
void rope(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
          int rotary_dim, const float* inv_freq, RopeStyle style);
void silu_mul(float* out, const float* gate, const float* up, int64_t n);
void gelu_tanh(float* y, const float* x, int64_t n);
void add_inplace(float* y, const float* x, int64_t n);
void softmax_rows(float* x, int64_t rows, int64_t dim);
void paged_attention(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                     const AttentionBatch& batch, int heads, float scale);
// ops.h's causal_attention_backward one key at a time: the softmax row recomputed in double,
// then dV, dS, dQ and dK per (query, key) pair. Runs on one thread (pool unused).
void causal_attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                               float scale, int window);

}  // namespace lmstack::kernels::ref
