// Causal self-attention over dense [B, T, H, D] tensors for training: the forward through
// paged_attention (one block of T tokens per sequence), and the backward with the softmax
// statistics recomputed per query (FlashAttention-2 backward, Dao 2023, Alg. 2):
//   P_ij = e^(s_ij - lse_i),  Δ_i = dO_i·O_i,  dV_j += Σ_i P_ij·dO_i,
//   dS_ij = P_ij·(dO_i·V_j - Δ_i),  dQ_i += scale·Σ_j dS_ij·K_j,  dK_j += scale·Σ_i dS_ij·Q_i.
// j runs over the keys query i sees (j <= i, and j > i - window under a sliding window): a
// masked key has P_ij = 0 and so no gradient.
// Work is split over (sequence, kv head), so the G query heads sharing a kv head (GQA)
// accumulate into its dK/dV on one thread without atomics.
// Legend: B sequences, T tokens, H query heads, Hkv kv heads, G = H / Hkv, D head dim.
#include <cstdint>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/attention_backward_impl.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {
namespace {

using ItemFn = void(const AttentionBackwardItem&);

// Splits the work over (sequence, kv head) items, each with its own 64-byte aligned scratch
// kept by the thread across calls (allocating it per call would page-fault every step).
void backward_with(ItemFn* item_fn, ThreadPool& pool, float* dq, float* dk, float* dv,
                   const float* dout, const float* q, const float* k, const float* v,
                   const float* out, int64_t batch, int64_t tokens, int heads, int kv_heads,
                   int head_dim, float scale, int window) {
  LMSTACK_CHECK(kv_heads > 0 && heads % kv_heads == 0, "heads {} kv_heads {}", heads, kv_heads);
  const int g = heads / kv_heads, d = head_dim;
  const int64_t q_row = static_cast<int64_t>(heads) * d,
                kv_row = static_cast<int64_t>(kv_heads) * d;
  const int64_t floats = attention_backward_scratch_floats(tokens, d, 16);
  pool.parallel_for(batch * kv_heads, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> buf;
    if (static_cast<int64_t>(buf.size()) < floats + 16)
      buf.resize(static_cast<size_t>(floats + 16));
    const auto addr = reinterpret_cast<uintptr_t>(buf.data());
    float* scratch = buf.data() + ((64 - addr % 64) % 64) / sizeof(float);
    for (int64_t it = begin; it < end; ++it) {
      const int64_t b = it / kv_heads, kvh = it % kv_heads;
      const int64_t qo = b * tokens * q_row + kvh * g * d, kvo = b * tokens * kv_row + kvh * d;
      item_fn({q + qo, k + kvo, v + kvo, out + qo, dout + qo, dq + qo, dk + kvo, dv + kvo, q_row,
               kv_row, static_cast<int>(tokens), g, d, scale, window, scratch});
    }
  });
}

void backward_avx512(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                     const float* q, const float* k, const float* v, const float* out,
                     int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                     float scale, int window) {
  backward_with(attention_backward_item_avx512, pool, dq, dk, dv, dout, q, k, v, out, batch, tokens,
                heads, kv_heads, head_dim, scale, window);
}

void backward_avx2(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                   const float* q, const float* k, const float* v, const float* out, int64_t batch,
                   int64_t tokens, int heads, int kv_heads, int head_dim, float scale, int window) {
  backward_with(attention_backward_item_avx2, pool, dq, dk, dv, dout, q, k, v, out, batch, tokens,
                heads, kv_heads, head_dim, scale, window);
}

constexpr KernelVariant<CausalAttentionBackwardFn> kBackwardVariants[] = {
    {"avx512", backward_avx512, avx512_supported},
    {"avx2", backward_avx2, avx2_supported},
    {"ref", ref::causal_attention_backward, always_supported},
};

}  // namespace

void attention_backward_item_avx2(const AttentionBackwardItem& item) {
  backward_item<VecAvx2>(item);
}

std::span<const KernelVariant<CausalAttentionBackwardFn>> causal_attention_backward_variants() {
  return kBackwardVariants;
}

void causal_attention(ThreadPool& pool, float* out, const float* q, const float* k, const float* v,
                      int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                      float scale, int window) {
  std::vector<int32_t> query_start(static_cast<size_t>(batch + 1)),
      context(static_cast<size_t>(batch), static_cast<int32_t>(tokens)),
      table(static_cast<size_t>(batch));
  for (int64_t b = 0; b <= batch; ++b)
    query_start[static_cast<size_t>(b)] = static_cast<int32_t>(b * tokens);
  for (int64_t b = 0; b < batch; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  // [B, T, Hkv, D] is a pool of B blocks of T tokens; paged_attention only reads k and v.
  const PagedKv kv{const_cast<float*>(k),
                   const_cast<float*>(v),
                   batch,
                   static_cast<int>(tokens),
                   kv_heads,
                   head_dim};
  const AttentionBatch ab{
      static_cast<int>(batch), query_start.data(), context.data(), table.data(), 1, window};
  paged_attention(pool, out, q, kv, ab, heads, scale);
}

void causal_attention_backward(ThreadPool& pool, float* dq, float* dk, float* dv, const float* dout,
                               const float* q, const float* k, const float* v, const float* out,
                               int64_t batch, int64_t tokens, int heads, int kv_heads, int head_dim,
                               float scale, int window) {
  static CausalAttentionBackwardFn* const fn = pick_variant(causal_attention_backward_variants());
  fn(pool, dq, dk, dv, dout, q, k, v, out, batch, tokens, heads, kv_heads, head_dim, scale, window);
}

}  // namespace lmstack::kernels
