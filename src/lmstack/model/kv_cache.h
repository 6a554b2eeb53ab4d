// The paged KV cache: per layer one K pool and one V pool of fixed-size blocks
// ([num_blocks, block_size, kv_heads, head_dim] f32), all allocated once and counted under
// MemoryCategory::kKvCache. Which blocks a sequence owns is the caller's business (a
// BlockPool for a single generation, serve's BlockManager for many); a token's KV lives at
// slot = block * block_size + offset (vLLM's PagedAttention, Kwon et al. 2023). MLA models
// (config.mla) keep one pool per layer of [c_KV, k_R] rows ([num_blocks, block_size, 1,
// kv_lora_rank + qk_rope_head_dim]); layer() then returns it as both K and V.
//
// Thread safety: none; the forward writes the pools while it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t num_blocks, int block_size);

  // Blocks that fit in `bytes` for this model (K and V of every layer, f32).
  static int64_t blocks_for_bytes(const ModelConfig& config, int block_size, int64_t bytes);
  // Bytes of K and V for one token across all layers: 2 · L · Hkv · D · 4 (MLA: L · (d_c + d_R) ·
  // 4).
  static int64_t bytes_per_token(const ModelConfig& config);

  kernels::PagedKv layer(int index);
  // Copies block `src`'s K and V rows of every layer into block `dst` (copy on write).
  void copy_block(int64_t src, int64_t dst);
  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int64_t bytes() const { return bytes_; }

 private:
  int64_t num_blocks_;
  int block_size_;
  int kv_heads_;
  int head_dim_;
  bool shared_kv_ = false;  // MLA: one pool is both K and V
  int64_t bytes_ = 0;
  std::vector<HostBuffer> k_, v_;  // one per layer
};

// A free list of block ids, for a single generation (serve has a ref-counted BlockManager).
class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);
  // A free block, or nullopt when none is left.
  std::optional<int32_t> allocate();
  void release(int32_t block);
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }

 private:
  std::vector<int32_t> free_;
};

}  // namespace lmstack::model
