// The paged KV cache: per layer one K pool and one V pool of fixed-size blocks
// ([num_blocks, block_size, kv_heads, head_dim] of the KV dtype), all allocated once and
// counted under MemoryCategory::kKvCache. Which blocks a sequence owns is the caller's
// business (a BlockPool for a single generation, serve's BlockManager for many); a token's KV
// lives at slot = block * block_size + offset (vLLM's PagedAttention, Kwon et al. 2023). MLA
// models (config.mla) keep one pool per layer of [c_KV, k_R] rows ([num_blocks, block_size, 1,
// kv_lora_rank + qk_rope_head_dim]); layer() then returns it as both K and V.
// The KV dtype (--kv-dtype) is f32, bf16 or int8 with one f32 scale per token per kv head
// (kernels::PagedKv in ops.h has the exact rounding); MLA's int8 row has one scale for the
// whole [c_KV, k_R] row.
//
// Thread safety: none; the forward writes the pools while it runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

// The --kv-dtype value: "f32", "bf16" or "int8" (also "float32", "bfloat16", "i8").
// Throws ConfigError naming --kv-dtype for anything else.
DType parse_kv_dtype(const std::string& name);
// "f32", "bf16" or "int8": the spelling --kv-dtype and calc use.
std::string kv_dtype_name(DType t);

class KvCache {
 public:
  // kv_dtype: DType::kF32, kBF16 or kI8 (ConfigError naming --kv-dtype otherwise).
  KvCache(const ModelConfig& config, int64_t num_blocks, int block_size,
          DType kv_dtype = DType::kF32);

  // Blocks that fit in `bytes` for this model (K and V of every layer, scales included).
  static int64_t blocks_for_bytes(const ModelConfig& config, int block_size, int64_t bytes,
                                  DType kv_dtype = DType::kF32);
  // Bytes of K and V for one token across all layers: 2 · L · Hkv · row, row = D · 4 (f32),
  // D · 2 (bf16) or D + 4 (int8 values and their f32 scale); MLA: L · row with D = d_c + d_R.
  static int64_t bytes_per_token(const ModelConfig& config, DType kv_dtype = DType::kF32);

  kernels::PagedKv layer(int index);
  // Copies block `src`'s K and V rows (and int8 scales) of every layer into block `dst`
  // (copy on write).
  void copy_block(int64_t src, int64_t dst);
  // One token's KV in one layer, as disaggregated serving ships it (serve/kv_transfer.h):
  // its K rows of every kv head, their int8 scales, then the same for V (MLA: the one row
  // and its scale). slot = block * block_size + offset.
  int64_t layer_token_bytes() const;
  void read_token(int layer, int64_t slot, uint8_t* dst);
  void write_token(int layer, int64_t slot, const uint8_t* src);
  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  int num_layers() const { return static_cast<int>(k_.size()); }
  DType dtype() const { return dtype_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::vector<std::pair<uint8_t*, size_t>> token_parts(int layer);

  int64_t num_blocks_;
  int block_size_;
  int kv_heads_;
  int head_dim_;
  DType dtype_;
  bool shared_kv_ = false;  // MLA: one pool is both K and V
  int64_t bytes_ = 0;
  // One per layer; the scale pools are empty unless dtype_ is kI8.
  std::vector<HostBuffer> k_, v_, k_scale_, v_scale_;
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
