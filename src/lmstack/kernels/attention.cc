// Paged attention: the variant table and the dispatching paged_attention of ops.h.
// The reference is attention_ref.cc; the flash variants are attention_flash.cc (driver) with
// the inner loops of attention_avx512.cc or attention_avx2.cc.
#include "lmstack/core/error.h"
#include "lmstack/kernels/attention_flash.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

namespace {

constexpr AttentionLeaf kLeafAvx512{attention_scores_avx512,
                                    attention_softmax_row_avx512,
                                    attention_accumulate_avx512,
                                    attention_scores_bf16_avx512,
                                    attention_accumulate_bf16_avx512,
                                    kv_load_bf16_avx512,
                                    kv_load_i8_avx512};
constexpr AttentionLeaf kLeafAvx2{attention_scores_avx2,
                                  attention_softmax_row_avx2,
                                  attention_accumulate_avx2,
                                  attention_scores_bf16_avx2,
                                  attention_accumulate_bf16_avx2,
                                  kv_load_bf16_avx2,
                                  kv_load_i8_avx2};

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

std::span<const KernelVariant<PagedAttentionFn>> paged_attention_variants() {
  return kPagedAttentionVariants;
}

void paged_attention(ThreadPool& pool, float* out, const float* q, const PagedKv& kv,
                     const AttentionBatch& batch, int heads, float scale) {
  static PagedAttentionFn* const fn = pick_variant(paged_attention_variants());
  fn(pool, out, q, kv, batch, heads, scale);
}

}  // namespace lmstack::kernels
