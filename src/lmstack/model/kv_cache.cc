// Paged KV pools and a simple block free list (see kv_cache.h).
#include "lmstack/model/kv_cache.h"

#include <cstring>

#include "lmstack/core/error.h"

namespace lmstack::model {

DType parse_kv_dtype(const std::string& name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "int8" || name == "i8") return DType::kI8;
  throw_error<ConfigError>("--kv-dtype '{}': expected f32, bf16 or int8", name);
}

std::string kv_dtype_name(DType t) {
  if (t == DType::kBF16) return "bf16";
  if (t == DType::kI8) return "int8";
  return "f32";
}

namespace {

void check_kv_dtype(DType t) {
  if (!kernels::is_kv_dtype(t))
    throw_error<ConfigError>("--kv-dtype {}: the KV cache holds f32, bf16 or int8", dtype_name(t));
}

}  // namespace

int64_t KvCache::bytes_per_token(const ModelConfig& c, DType kv_dtype) {
  check_kv_dtype(kv_dtype);
  // MLA caches one row of [c_KV, k_R] per token and layer (mla.h), not K and V per head.
  if (c.mla.enabled())
    return static_cast<int64_t>(c.num_layers) *
           kernels::kv_row_bytes(kv_dtype, static_cast<int>(c.mla.cache_width()));
  return 2ll * c.num_layers * c.num_kv_heads * kernels::kv_row_bytes(kv_dtype, c.head_dim);
}

int64_t KvCache::blocks_for_bytes(const ModelConfig& c, int block_size, int64_t bytes,
                                  DType kv_dtype) {
  return bytes / (bytes_per_token(c, kv_dtype) * block_size);
}

KvCache::KvCache(const ModelConfig& config, int64_t num_blocks, int block_size, DType kv_dtype)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      kv_heads_(config.mla.enabled() ? 1 : config.num_kv_heads),
      head_dim_(config.mla.enabled() ? static_cast<int>(config.mla.cache_width())
                                     : config.head_dim),
      dtype_(kv_dtype),
      shared_kv_(config.mla.enabled()) {
  check_kv_dtype(kv_dtype);
  LMSTACK_CHECK(num_blocks > 0 && block_size > 0, "KV cache of {} blocks x {} tokens", num_blocks,
                block_size);
  const size_t rows = static_cast<size_t>(num_blocks) * block_size * kv_heads_;
  const size_t pool_bytes = static_cast<size_t>(dtype_bytes(dtype_, int64_t{head_dim_})) * rows;
  const size_t scale_bytes = dtype_ == DType::kI8 ? rows * sizeof(float) : 0;
  const int pools = shared_kv_ ? 1 : 2;
  for (int l = 0; l < config.num_layers; ++l)
    for (int i = 0; i < pools; ++i) {
      (i == 0 ? k_ : v_).emplace_back(pool_bytes, MemoryCategory::kKvCache);
      if (scale_bytes > 0)
        (i == 0 ? k_scale_ : v_scale_).emplace_back(scale_bytes, MemoryCategory::kKvCache);
    }
  bytes_ = static_cast<int64_t>(pool_bytes + scale_bytes) * pools * config.num_layers;
}

kernels::PagedKv KvCache::layer(int index) {
  const auto l = static_cast<size_t>(index);
  kernels::PagedKv kv;
  kv.k = k_[l].data();
  kv.v = shared_kv_ ? kv.k : v_[l].data();
  kv.num_blocks = num_blocks_;
  kv.block_size = block_size_;
  kv.kv_heads = kv_heads_;
  kv.head_dim = head_dim_;
  kv.dtype = dtype_;
  if (dtype_ == DType::kI8) {
    kv.k_scale = static_cast<float*>(k_scale_[l].data());
    kv.v_scale = shared_kv_ ? kv.k_scale : static_cast<float*>(v_scale_[l].data());
  }
  return kv;
}

void KvCache::copy_block(int64_t src, int64_t dst) {
  LMSTACK_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_,
                "block copy {} -> {} outside the {} blocks", src, dst, num_blocks_);
  // Every pool is [blocks, ...] with a fixed number of bytes per block.
  auto copy = [&](std::vector<HostBuffer>& pools) {
    for (HostBuffer& pool : pools) {
      const size_t block_bytes = pool.size() / static_cast<size_t>(num_blocks_);
      char* base = static_cast<char*>(pool.data());
      std::memcpy(base + dst * block_bytes, base + src * block_bytes, block_bytes);
    }
  };
  copy(k_);
  copy(v_);
  copy(k_scale_);
  copy(v_scale_);
}

int64_t KvCache::layer_token_bytes() const {
  return (shared_kv_ ? 1 : 2) * kv_heads_ * kernels::kv_row_bytes(dtype_, head_dim_);
}

// The pools one token's transfer bytes come from, in order, each with its bytes per token.
std::vector<std::pair<uint8_t*, size_t>> KvCache::token_parts(int layer) {
  const auto l = static_cast<size_t>(layer);
  const size_t rows = static_cast<size_t>(kv_heads_) * dtype_bytes(dtype_, int64_t{head_dim_});
  const size_t scales = kv_heads_ * sizeof(float);
  std::vector<std::pair<uint8_t*, size_t>> parts;
  auto add = [&](std::vector<HostBuffer>& pools, size_t n) {
    if (!pools.empty()) parts.emplace_back(static_cast<uint8_t*>(pools[l].data()), n);
  };
  add(k_, rows);
  add(k_scale_, scales);
  if (shared_kv_) return parts;
  add(v_, rows);
  add(v_scale_, scales);
  return parts;
}

void KvCache::read_token(int layer, int64_t slot, uint8_t* dst) {
  LMSTACK_CHECK(slot >= 0 && slot < num_blocks_ * block_size_, "KV slot {} outside the pool", slot);
  for (auto [base, n] : token_parts(layer)) {
    std::memcpy(dst, base + slot * static_cast<int64_t>(n), n);
    dst += n;
  }
}

void KvCache::write_token(int layer, int64_t slot, const uint8_t* src) {
  LMSTACK_CHECK(slot >= 0 && slot < num_blocks_ * block_size_, "KV slot {} outside the pool", slot);
  for (auto [base, n] : token_parts(layer)) {
    std::memcpy(base + slot * static_cast<int64_t>(n), src, n);
    src += n;
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
