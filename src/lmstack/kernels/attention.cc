// Paged attention: kv_write, the variant table and the dispatching paged_attention of ops.h.
// The reference is attention_ref.cc; the flash variants are attention_flash.cc (driver) with
// the inner loops of attention_avx512.cc or attention_avx2.cc.
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/kernels/attention_flash.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

namespace {

constexpr AttentionLeaf kLeafAvx512{attention_scores_avx512, attention_softmax_row_avx512,
                                    attention_accumulate_avx512};
constexpr AttentionLeaf kLeafAvx2{attention_scores_avx2, attention_softmax_row_avx2,
                                  attention_accumulate_avx2};

void flash_avx512(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                  const AttentionBatch& batch, int heads, float scale) {
  flash_paged_attention(kLeafAvx512, pool, out, q, kv, batch, heads, scale);
}

void flash_avx2(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                const AttentionBatch& batch, int heads, float scale) {
  flash_paged_attention(kLeafAvx2, pool, out, q, kv, batch, heads, scale);
}

constexpr KernelVariant<PagedAttentionFn> kPagedAttentionVariants[] = {
    {"flash_avx512", flash_avx512, avx512_supported},
    {"flash_avx2", flash_avx2, avx2_supported},
    {"ref", ref::paged_attention, always_supported},
};

}  // namespace

void kv_write(const PagedKv& kv, const float* k, const float* v, const int32_t* slots,
              int64_t tokens) {
  const int64_t row = static_cast<int64_t>(kv.kv_heads) * kv.head_dim;
  const int64_t num_slots = kv.num_blocks * kv.block_size;
  for (int64_t t = 0; t < tokens; ++t) {
    LMSTACK_CHECK(slots[t] >= 0 && slots[t] < num_slots,
                  "kv_write: slot {} of token {} is "
                  "outside the pool of {} slots",
                  slots[t], t, num_slots);
    // Slot s is block s / bs, row s % bs: with [blocks, bs, Hkv, D] that is simply row s.
    std::memcpy(kv.k + slots[t] * row, k + t * row, static_cast<size_t>(row) * sizeof(float));
    std::memcpy(kv.v + slots[t] * row, v + t * row, static_cast<size_t>(row) * sizeof(float));
  }
}

std::span<const KernelVariant<PagedAttentionFn>> paged_attention_variants() {
  return kPagedAttentionVariants;
}

void paged_attention(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                     const AttentionBatch& batch, int heads, float scale) {
  static PagedAttentionFn* const fn = pick_variant(paged_attention_variants());
  fn(pool, out, q, kv, batch, heads, scale);
}

}  // namespace lmstack::kernels
