// The flash-attention driver shared by the AVX-512 and AVX2 paged_attention variants: same
// contract as paged_attention in ops.h, with the inner loops given by `leaf`.
#pragma once

#include "lmstack/kernels/attention_leaf.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {

void flash_paged_attention(const AttentionLeaf& leaf, ThreadPool& pool, float* out, const float* q,
                           const PagedKv& kv, const AttentionBatch& batch, int heads, float scale);

}  // namespace lmstack::kernels
