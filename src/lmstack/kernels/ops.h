// The compute ops of lmstack, one declaration and contract each. Model, train and serve code
// call only these; each op dispatches at run time (cpu_features()) to the best CPU variant,
// and each has a scalar reference in ops_ref.h that tests compare every variant against.
//
// Conventions. Activations are f32, row-major, contiguous. Weight matrices are Tensors of
// shape [N, K] (out_features x in_features, the layout of a Hugging Face nn.Linear weight) in
// f32, bf16 or f16; a linear layer computes y = x · Wᵀ. Dimension letters: M rows of
// activations (tokens), N output features, K input features; T tokens, H query heads,
// Hkv key/value heads, D head dim. Every op that takes a ThreadPool parallelizes over it;
// the others are cheap enough to run on the calling thread (callers may split rows).
// Thread safety: ops keep no state between calls.
#pragma once

#include <cstdint>
#include <span>

#include "lmstack/core/tensor.h"
#include "lmstack/core/thread_pool.h"

namespace lmstack::kernels {

// ---- matrix products -----------------------------------------------------------------

// y[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N] if not null) (+ y if accumulate).
// w: 2-D Tensor, f32 | bf16 | f16 | a block-quantized type of quant.h (q8_0, q4_0, q4_K,
// q6_K, int4_g*; K a multiple of its block). For M == 1 this is a GEMV and is bandwidth-bound;
// for large M it is compute-bound. Quantized weights with M <= 16 quantize x to int8 per 32
// elements on the fly, so y then differs from the f32 product by at most
// sum over x blocks of (amax_block / 254) * sum |w| over the block.
void linear(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
            const float* bias = nullptr, bool accumulate = false);

// One product of linear_many(): y[M, N] (+)= x · wᵀ (+ bias), as linear()'s arguments.
struct LinearOut {
  float* y;
  const Tensor* w;
  const float* bias = nullptr;
  bool accumulate = false;
};

// linear() of one x against several weights of the same K (Q, K, V; gate and up): the same
// results as one linear() per output, but for decode-sized M one parallel region over all
// their rows instead of one per weight, so a layer pays fewer thread hand-offs.
void linear_many(ThreadPool& pool, const float* x, int64_t m, std::span<const LinearOut> outs);

// General f32 GEMM, BLAS semantics with row-major storage:
// C[M, N] = alpha · op(A) · op(B) + beta · C, op(A) is [M, K] (A stored [K, M] if trans_a),
// op(B) is [K, N] (B stored [N, K] if trans_b); lda/ldb/ldc are row strides in elements.
// Training uses it for the backward products dX = dY · W and dW = dYᵀ · X.
void gemm_f32(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc);

// The products of training in bf16 mixed precision (train/backward/linear.cc): gemm_f32's
// contract, but alpha · op(A) and op(B) are rounded to bf16 (nearest even) and the products
// summed in f32: PyTorch autocast's bf16 matmul, with C kept in f32. B is f32 or bf16
// (b_dtype; ldb in its elements). With AVX512_BF16 this runs vdpbf16ps, about twice the f32
// FMA rate; elsewhere rounded f32 copies go through gemm_f32 (same products; the summation
// order differs). For bf16 training only: inference keeps f32 activations (linear()).
void gemm_bf16(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const void* b, DType b_dtype, int64_t ldb,
               float beta, float* c, int64_t ldc);

// linear() for bf16 training: y[M, N] = bf16(x) · bf16(w)ᵀ (+ bias) (+ y if accumulate), on
// gemm_bf16; w is f32 or bf16 [N, K], bias f32, added in f32.
void linear_bf16(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                 const float* bias = nullptr, bool accumulate = false);

// ---- normalization -------------------------------------------------------------------

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * weight   (Zhang & Sennrich 2019).
// y may alias x.
void rmsnorm(float* y, const float* x, const float* weight, int64_t rows, int64_t dim, float eps);

// y[r, :] = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance (Ba et al. 2016).
// beta may be null. y may alias x.
void layernorm(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
               int64_t dim, float eps);

// ---- position encoding ---------------------------------------------------------------

enum class RopeStyle : uint8_t {
  kRotateHalf,   // pairs (i, i + rotary_dim/2): Llama/Qwen/Mistral as in Hugging Face
  kInterleaved,  // pairs (2i, 2i + 1): GPT-J / original RoFormer
};

// Rotates, in place, the first rotary_dim dims of each head of x[T, heads, head_dim] by
// angle positions[t] * inv_freq[i], i < rotary_dim/2 (Su et al. 2021, RoFormer eq. 34).
void rope(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
          int rotary_dim, const float* inv_freq, RopeStyle style);

// inv_freq[i] = theta^(-2i / rotary_dim) for i < rotary_dim/2, then the scaling of
// `scaling_type`: "default" (none), "linear" (divide by factor), or "llama3" (Llama 3.1:
// wavelengths above original_max_position / low_freq_factor divided by factor, below
// original_max_position / high_freq_factor kept, smooth interpolation between).
void rope_inv_freq(float* inv_freq, int rotary_dim, float theta, const char* scaling_type,
                   float factor, float low_freq_factor, float high_freq_factor,
                   int original_max_position);
// YaRN (Peng et al. 2023, §3.2 "NTK-by-parts"), as transformers computes it: with
// f_i = theta^(-2i/rotary_dim), inv_freq[i] = f_i/factor · r_i + f_i · (1 - r_i), where the
// ramp r_i rises from 0 to 1 between the dims that make beta_fast and beta_slow rotations over
// original_max_position (dims floored/ceiled when truncate), clamped to [0, rotary_dim - 1].
void rope_inv_freq_yarn(float* inv_freq, int rotary_dim, float theta, float factor,
                        int original_max_position, float beta_fast, float beta_slow, bool truncate);

// ---- activations and elementwise ------------------------------------------------------

// out[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + e^-z) (SwiGLU, Shazeer 2020).
// out may alias gate or up.
void silu_mul(float* out, const float* gate, const float* up, int64_t n);
// y[i] = 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³))) (GPT-2's "gelu_new"). y may alias x.
void gelu_tanh(float* y, const float* x, int64_t n);
// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);
// Row-wise numerically stable softmax, in place.
void softmax_rows(float* x, int64_t rows, int64_t dim);

// out[t, :] = table[ids[t], :] as f32; table is [V, C] in f32 | bf16 | f16 | block-quantized.
// Throws RequestError naming the id if any ids[t] is outside [0, V).
void embedding_lookup(float* out, const Tensor& table, const int32_t* ids, int64_t tokens);

// ---- attention over a paged KV cache --------------------------------------------------

// One layer's KV pool: k and v each [num_blocks, block_size, Hkv, D] of `dtype` (the
// KV-cache dtype, --kv-dtype). A token stored at slot s lives in block s / block_size, row
// s % block_size.
//  - kF32: the values as computed.
//  - kBF16: each value rounded to nearest even bf16 (relative error <= 2^-9).
//  - kI8: symmetric int8 with one f32 scale per token per kv head, k_scale / v_scale
//    [num_blocks, block_size, Hkv]: scale = absmax(row of D) / 127, q = round(x / scale) in
//    [-127, 127], x ~= q · scale (absolute error <= scale / 2 = absmax / 254); an all-zero row
//    has scale 0.
// Attention reads the dtype directly (dequantizing each chunk of keys as it goes); nothing
// converts the whole pool.
struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
  int64_t num_blocks = 0;
  int block_size = 0;
  int kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::kF32;  // kF32 | kBF16 | kI8
  float* k_scale = nullptr;   // kI8 only
  float* v_scale = nullptr;   // kI8 only
};

// True for the dtypes a PagedKv may hold (f32, bf16, int8).
bool is_kv_dtype(DType t);
// Bytes one token's K (or V) row of one kv head takes: D · element size, plus the f32 scale
// for int8.
int64_t kv_row_bytes(DType t, int head_dim);

// Writes k[T, Hkv, D] and v[T, Hkv, D] to the pool at slots[t], converting to kv.dtype
// (bf16 round-to-nearest-even; int8 as described at PagedKv).
void kv_write(const PagedKv& kv, const float* k, const float* v, const int32_t* slots,
              int64_t tokens);
// Reads back the row of kv head `kvh` at `slot` as f32 (dst[D]), from K or from V.
void kv_read_row(float* dst, const PagedKv& kv, bool value, int64_t slot, int kvh);

// A flattened batch of sequences for attention. Sequence s owns query rows
// [query_start[s], query_start[s+1]) and, after this step's kv_write, context_len[s] tokens
// of KV whose blocks are block_table[s * max_blocks_per_seq + j]. Its queries are the last
// q_len = query_start[s+1] - query_start[s] tokens of its context, so query i (0-based)
// sits at position context_len[s] - q_len + i and attends causally to positions <= that.
// This one description covers prefill, decode, chunked prefill and mixes of them.
// With window W > 0 (sliding-window attention, Mistral / Qwen2 / per-layer "sliding_attention")
// the query at position p sees only keys j with p - W < j <= p: W keys including its own, as
// transformers' sliding_window_overlay (kv_idx > q_idx - W) and llama.cpp's SWA mask define it.
struct AttentionBatch {
  int num_seqs = 0;
  const int32_t* query_start = nullptr;  // [num_seqs + 1]
  const int32_t* context_len = nullptr;  // [num_seqs]
  const int32_t* block_table = nullptr;  // [num_seqs, max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  int window = 0;  // 0: full causal attention
};

// The first key position the query at position `pos` attends to under `window` (0 = none).
inline int64_t attention_window_start(int64_t pos, int window) {
  return window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// out[T, H, D] = softmax(q · Kᵀ · scale + causal mask) · V per head, with query head h
// reading kv head h / (H / Hkv) (GQA; MQA when Hkv = 1). Uses a tiled online-softmax
// (FlashAttention, Dao et al. 2022) for long query runs and splits long contexts across
// threads for decode (flash-decoding).
void paged_attention(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                     const AttentionBatch& batch, int heads, float scale);

// ---- backward (training) ---------------------------------------------------------------
// Gradients of the ops above, each next to its forward's arguments in the same order:
// outputs (gradients), then inputs (the upstream gradient first, then the forward's inputs),
// then dims. Unless an op says otherwise, gradients ACCUMULATE (+=) into their outputs, so
// residual branches and micro-batches sum without copies (callers zero them per step).
// Nothing is saved from the forward: the per-row statistics are recomputed, which costs one
// pass over the row. Derivations are in the header comment of each .cc file; each op has a
// finite-difference check in f64 in tests/kernels/*_backward_test.cc.

// d/dx and d/dweight of rmsnorm (norm_backward.cc). dweight sums over rows.
void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x,
                      const float* weight, int64_t rows, int64_t dim, float eps);
// d/dx, d/dgamma and d/dbeta (dbeta may be null) of layernorm (norm_backward.cc).
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, int64_t rows, int64_t dim, float eps);
// In place: dx[T, heads, head_dim] holds dL/d(rope output) and becomes dL/d(rope input), the
// inverse rotation (RoPE is orthogonal). Does not accumulate.
void rope_backward(float* dx, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                   int rotary_dim, const float* inv_freq, RopeStyle style);
// dgate += dout·up·silu'(gate), dup += dout·silu(gate) (activation_backward.cc).
void silu_mul_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, int64_t n);
// dx += dy·gelu_tanh'(x) (activation_backward.cc).
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n);
// dx += y ⊙ (dy - Σ dy·y) per row, y being softmax_rows' output (softmax.cc).
void softmax_rows_backward(float* dx, const float* dy, const float* y, int64_t rows, int64_t dim);
// dtable[ids[t], :] += dout[t, :]; dtable is f32 [V, C] (embedding.cc). ids were checked by
// the forward; an id outside [0, vocab) is a programmer error here (aborts).
void embedding_backward(float* dtable, const float* dout, const int32_t* ids, int64_t tokens,
                        int64_t vocab, int64_t width);

// Causal self-attention over dense, unpaged tensors, for training: q, out [B, T, H, D],
// k, v [B, T, Hkv, D], query t attending to keys <= t of its own sequence (and > t - window
// when window > 0, as AttentionBatch::window). The forward is paged_attention with one block
// of T tokens per sequence (attention_backward.cc).
void causal_attention(ThreadPool& pool, float* out, const float* q, const float* k, const float* v,
                      int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                      float scale, int window = 0);
// dq, dk, dv += the gradients of causal_attention given dout and the forward's out
// (FlashAttention-2 backward, Dao 2023 Alg. 2, with the softmax statistics recomputed).
void causal_attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                               float scale, int window = 0);

}  // namespace lmstack::kernels
