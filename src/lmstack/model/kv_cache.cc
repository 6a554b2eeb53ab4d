// Paged KV pools and a simple block free list (see kv_cache.h).
#include "lmstack/model/kv_cache.h"

#include <cstring>

#include "lmstack/core/error.h"

namespace lmstack::model {

int64_t KvCache::bytes_per_token(const ModelConfig& c) {
  // MLA caches one row of [c_KV, k_R] per token and layer (mla.h), not K and V per head.
  if (c.mla.enabled())
    return static_cast<int64_t>(c.num_layers) * c.mla.cache_width() *
           static_cast<int64_t>(sizeof(float));
  return 2ll * c.num_layers * c.num_kv_heads * c.head_dim * static_cast<int64_t>(sizeof(float));
}

int64_t KvCache::blocks_for_bytes(const ModelConfig& c, int block_size, int64_t bytes) {
  return bytes / (bytes_per_token(c) * block_size);
}

KvCache::KvCache(const ModelConfig& config, int64_t num_blocks, int block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      kv_heads_(config.mla.enabled() ? 1 : config.num_kv_heads),
      head_dim_(config.mla.enabled() ? config.mla.cache_width() : config.head_dim),
      shared_kv_(config.mla.enabled()) {
  LMSTACK_CHECK(num_blocks > 0 && block_size > 0, "KV cache of {} blocks x {} tokens", num_blocks,
                block_size);
  const size_t pool_bytes =
      static_cast<size_t>(num_blocks) * block_size * kv_heads_ * head_dim_ * sizeof(float);
  for (int l = 0; l < config.num_layers; ++l) {
    k_.emplace_back(pool_bytes, MemoryCategory::kKvCache);
    if (!shared_kv_) v_.emplace_back(pool_bytes, MemoryCategory::kKvCache);
  }
  bytes_ = static_cast<int64_t>(pool_bytes) * (shared_kv_ ? 1 : 2) * config.num_layers;
}

kernels::PagedKv KvCache::layer(int index) {
  kernels::PagedKv kv;
  kv.k = static_cast<float*>(k_[static_cast<size_t>(index)].data());
  kv.v = shared_kv_ ? kv.k : static_cast<float*>(v_[static_cast<size_t>(index)].data());
  kv.num_blocks = num_blocks_;
  kv.block_size = block_size_;
  kv.kv_heads = kv_heads_;
  kv.head_dim = head_dim_;
  return kv;
}

void KvCache::copy_block(int64_t src, int64_t dst) {
  LMSTACK_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_,
                "block copy {} -> {} outside the {} blocks", src, dst, num_blocks_);
  const size_t floats = static_cast<size_t>(block_size_) * kv_heads_ * head_dim_;
  for (size_t l = 0; l < k_.size(); ++l) {
    float* k = static_cast<float*>(k_[l].data());
    std::memcpy(k + dst * floats, k + src * floats, floats * sizeof(float));
    if (shared_kv_) continue;
    float* v = static_cast<float*>(v_[l].data());
    std::memcpy(v + dst * floats, v + src * floats, floats * sizeof(float));
  }
}

BlockPool::BlockPool(int64_t num_blocks) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void BlockPool::release(int32_t block) { free_.push_back(block); }

}  // namespace lmstack::model
