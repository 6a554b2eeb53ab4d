// Storing K/V rows in the paged pool's dtype (PagedKv in ops.h) and reading one back: the
// scalar truth of the KV-cache dtypes. The write path stays scalar (it stores T rows per
// step against attention's T x context reads); attention dequantizes in its own inner loops
// (attention_flash.cc) with the same arithmetic as kv_read_row, so both give equal floats.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {

namespace {

// One row of D values of one kv head, stored at element offset `row` (slot · Hkv + kvh).
void store_row(void* pool, float* scales, DType t, int64_t row, const float* x, int d) {
  switch (t) {
    case DType::kF32:
      std::memcpy(static_cast<float*>(pool) + row * d, x, static_cast<size_t>(d) * sizeof(float));
      return;
    case DType::kBF16: {
      uint16_t* dst = static_cast<uint16_t*>(pool) + row * d;
      for (int e = 0; e < d; ++e) dst[e] = f32_to_bf16(x[e]);
      return;
    }
    case DType::kI8: {
      float absmax = 0;
      for (int e = 0; e < d; ++e) absmax = std::max(absmax, std::fabs(x[e]));
      const float scale = absmax / 127.0f;
      const float inv = scale > 0 ? 1.0f / scale : 0.0f;
      int8_t* dst = static_cast<int8_t*>(pool) + row * d;
      for (int e = 0; e < d; ++e)  // |x·inv| <= 127 up to rounding: clamp keeps it a symmetric int8
        dst[e] = static_cast<int8_t>(std::clamp(std::nearbyint(x[e] * inv), -127.0f, 127.0f));
      scales[row] = scale;
      return;
    }
    default:
      LMSTACK_CHECK(false, "KV cache dtype {}", dtype_name(t));
  }
}

}  // namespace

bool is_kv_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kI8; }

int64_t kv_row_bytes(DType t, int head_dim) {
  LMSTACK_CHECK(is_kv_dtype(t), "KV cache dtype {}", dtype_name(t));
  if (t == DType::kF32) return int64_t{head_dim} * 4;
  if (t == DType::kBF16) return int64_t{head_dim} * 2;
  return int64_t{head_dim} + 4;  // int8 values + the f32 scale
}

void kv_write(const PagedKv& kv, const float* k, const float* v, const int32_t* slots,
              int64_t tokens) {
  const int64_t row = static_cast<int64_t>(kv.kv_heads) * kv.head_dim;
  const int64_t num_slots = kv.num_blocks * kv.block_size;
  for (int64_t t = 0; t < tokens; ++t) {
    LMSTACK_CHECK(slots[t] >= 0 && slots[t] < num_slots,
                  "kv_write: slot {} of token {} is outside the pool of {} slots", slots[t], t,
                  num_slots);
    // Slot s is block s / bs, row s % bs: with [blocks, bs, Hkv, D] that is simply row s.
    for (int h = 0; h < kv.kv_heads; ++h) {
      const int64_t r = int64_t{slots[t]} * kv.kv_heads + h;
      store_row(kv.k, kv.k_scale, kv.dtype, r, k + t * row + int64_t{h} * kv.head_dim, kv.head_dim);
      // MLA passes one pool as both K and V: store it once.
      if (kv.v != kv.k)
        store_row(kv.v, kv.v_scale, kv.dtype, r, v + t * row + int64_t{h} * kv.head_dim,
                  kv.head_dim);
    }
  }
}

void kv_read_row(float* dst, const PagedKv& kv, bool value, int64_t slot, int kvh) {
  const int64_t row = slot * kv.kv_heads + kvh, d = kv.head_dim;
  const void* pool = value ? kv.v : kv.k;
  switch (kv.dtype) {
    case DType::kF32:
      std::memcpy(dst, static_cast<const float*>(pool) + row * d,
                  static_cast<size_t>(d) * sizeof(float));
      return;
    case DType::kBF16:
      for (int64_t e = 0; e < d; ++e)
        dst[e] = bf16_to_f32(static_cast<const uint16_t*>(pool)[row * d + e]);
      return;
    case DType::kI8: {
      const float scale = (value ? kv.v_scale : kv.k_scale)[row];
      for (int64_t e = 0; e < d; ++e)
        dst[e] = static_cast<float>(static_cast<const int8_t*>(pool)[row * d + e]) * scale;
      return;
    }
    default:
      LMSTACK_CHECK(false, "KV cache dtype {}", dtype_name(kv.dtype));
  }
}

}  // namespace lmstack::kernels
