// BlockManager: the ids of the paged KV pool's fixed-size blocks, with reference counts so
// that one block can be shared (prefix cache, the n > 1 choices of one prompt) and copied on
// write when a sharer appends to it (vLLM's PagedAttention, Kwon et al. 2023, section 4.3).
// It knows ids only: the K/V bytes live in model::KvCache, and copies are the engine's job.
//
// Thread safety: none; only the engine loop thread touches it.
// Invariants: every block is either free (ref_count 0, in the free list exactly once) or
// held (ref_count > 0, not in the free list); num_free() + held blocks == num_blocks().
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace lmstack::serve {

// A block-table entry whose block was released because it lies wholly before a sliding
// window (Scheduler, SchedulerOptions::kv_window): attention never reads it again.
inline constexpr int32_t kReleasedBlock = -1;

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int block_size);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_counts_.size()); }
  int block_size() const { return block_size_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  // Blocks needed to hold `tokens` tokens.
  int64_t blocks_for_tokens(int64_t tokens) const {
    return (tokens + block_size_ - 1) / block_size_;
  }

  // Whether `n` blocks can be allocated right now (no eviction here: see Scheduler).
  bool can_allocate(int64_t n) const { return num_free() >= n; }
  // A free block with ref_count 1, or nullopt when none is free.
  std::optional<int32_t> allocate();
  // One more holder of a held block.
  void add_ref(int32_t block);
  // One holder fewer; the block is free again when none is left.
  void release(int32_t block);
  // Releases every block of `blocks` (skipping kReleasedBlock entries) and clears it.
  void release_all(std::vector<int32_t>& blocks);
  int ref_count(int32_t block) const;
  // A block held by more than one owner must be copied before one of them writes to it.
  bool is_shared(int32_t block) const { return ref_count(block) > 1; }

 private:
  int block_size_;
  std::vector<int32_t> ref_counts_;  // per block
  std::vector<int32_t> free_;        // LIFO free list
};

}  // namespace lmstack::serve
