// PrefixCache: a radix tree over token ids whose edges are whole KV blocks, so a new request
// reuses the KV of the longest cached prefix that ends on a block boundary (SGLang's
// RadixAttention, Zheng et al. 2024, with vLLM's block-granular sharing). The tree holds one
// reference on each block it stores (BlockManager); a request that reuses a block takes its
// own. Eviction removes, least recently used first, the tail blocks of leaves that nobody but
// the tree holds.
//
// Thread safety: none; only the engine loop thread touches it.
// Invariants: an edge's token count is a positive multiple of block_size and equals
// block_size × its block count; children of a node differ in their first block of tokens.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lmstack/serve/block_manager.h"

namespace lmstack::serve {

struct PrefixMatch {
  std::vector<int32_t> blocks;  // cached blocks covering tokens [0, num_tokens)
  int num_tokens = 0;
  // Why the match is not longer, for logs and /debug/prefix: "no cached prefix", "diverged at
  // token 37 (cached 512, prompt 98)", "only 5 tokens after the last full block", ...
  std::string explanation;
};

struct PrefixCacheStats {
  int64_t num_queries = 0;       // match() calls
  int64_t num_query_tokens = 0;  // tokens offered to match()
  int64_t num_hit_tokens = 0;    // tokens found
  int64_t num_cached_blocks = 0;
  int64_t num_evicted_blocks = 0;
};

class PrefixCache {
 public:
  // The block manager must outlive the cache.
  explicit PrefixCache(BlockManager& blocks);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of `tokens` made of whole blocks, at most `max_tokens` long.
  // Takes no references: the caller add_ref()s the blocks it keeps. Marks the path as used
  // (LRU); stats() count a query only through record_query().
  PrefixMatch match(std::span<const int32_t> tokens, int max_tokens);
  // Counts one admitted request's lookup in stats() (a request that waits is looked up again
  // each step; only the lookup that admits it counts).
  void record_query(int64_t query_tokens, int64_t hit_tokens);
  // Stores the first blocks.size() × block_size tokens of `tokens` with their KV `blocks`.
  // Parts already cached keep their existing blocks; new parts take a reference on theirs.
  void insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks);
  // Frees one LRU leaf's unshared tail blocks; false when nothing can be evicted.
  bool evict_one();
  // Evicts until `n` blocks are free or nothing more can go; returns whether n are free.
  bool make_free(int64_t n);
  // Evicts everything that nobody else holds.
  void clear();

  PrefixCacheStats stats() const;

 private:
  struct Node;
  void split(Node& child, size_t keep_blocks);
  Node* find_evictable_leaf(Node& node, Node* best);

  BlockManager& blocks_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;  // LRU time stamps
  PrefixCacheStats stats_;
};

}  // namespace lmstack::serve
