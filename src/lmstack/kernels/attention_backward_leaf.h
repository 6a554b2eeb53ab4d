// The per-ISA body of causal_attention_backward (attention_backward.cc drives it): the
// gradients of one (sequence, kv head) pair, all its G query heads and all T queries, with the
// softmax recomputed row by row (FlashAttention-2 backward, Dao 2023, Alg. 2). Raw pointers
// only, so the AVX-512 instance can live in attention_backward_avx512.cc and the AVX2 one in
// attention_backward.cc; both come from the template in attention_backward_impl.h.
// Legend: T tokens, G = H / Hkv query heads per kv head, D head dim, Tp = T rounded up to the
// vector width, Dp = D rounded up to it.
#pragma once

#include <cstdint>

namespace lmstack::kernels {

struct AttentionBackwardItem {
  // Rows of this (sequence, kv head): q/dout/out row i of head g at q + i·q_row + g·D (the
  // pointers already point at the first query head of the group), k/v/dk/dv row j at
  // k + j·kv_row.
  const float *q, *k, *v, *out, *dout;
  float *dq, *dk, *dv;
  int64_t q_row, kv_row;
  int tokens, group, d;
  float scale;
  int window;  // 0: full causal; else query i sees keys i - window < j <= i
  // Caller-provided scratch of at least attention_backward_scratch_floats(T, D, 16) floats,
  // 64-byte aligned; contents on entry do not matter.
  float* scratch;
};

// Floats of scratch one item needs for vector width w (16 covers AVX2's 8 as well).
inline int64_t attention_backward_scratch_floats(int64_t tokens, int64_t d, int64_t w) {
  const int64_t tp = (tokens + w - 1) / w * w, dp = (d + w - 1) / w * w;
  return 4 * d * tp + tokens * dp + 12 * tp + 4 * dp + 256;  // attention_backward_impl.h
}

// dq, dk, dv += the gradients of this item's rows (every row of it is written by no other
// item, so items run in parallel without atomics).
void attention_backward_item_avx512(const AttentionBackwardItem& item);
void attention_backward_item_avx2(const AttentionBackwardItem& item);

}  // namespace lmstack::kernels
