// Reference-counted block ids of the paged KV pool (see block_manager.h).
#include "lmstack/serve/block_manager.h"

#include "lmstack/core/error.h"

namespace lmstack::serve {

BlockManager::BlockManager(int64_t num_blocks, int block_size)
    : block_size_(block_size), ref_counts_(static_cast<size_t>(num_blocks), 0) {
  LMSTACK_CHECK(num_blocks > 0 && block_size > 0, "KV pool of {} blocks of {} tokens", num_blocks,
                block_size);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Hand out low ids first (pop_back), which keeps small runs easy to read in logs.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> BlockManager::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t block = free_.back();
  free_.pop_back();
  ref_counts_[static_cast<size_t>(block)] = 1;
  return block;
}

void BlockManager::add_ref(int32_t block) {
  LMSTACK_CHECK(ref_count(block) > 0, "add_ref on free block {}", block);
  ++ref_counts_[static_cast<size_t>(block)];
}

void BlockManager::release(int32_t block) {
  LMSTACK_CHECK(ref_count(block) > 0, "release of free block {}", block);
  if (--ref_counts_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

void BlockManager::release_all(std::vector<int32_t>& blocks) {
  for (int32_t b : blocks)
    if (b != kReleasedBlock) release(b);
  blocks.clear();
}

int BlockManager::ref_count(int32_t block) const {
  LMSTACK_CHECK(block >= 0 && block < num_blocks(), "block {} outside the pool of {}", block,
                num_blocks());
  return ref_counts_[static_cast<size_t>(block)];
}

}  // namespace lmstack::serve
