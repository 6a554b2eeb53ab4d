// Radix tree of whole KV blocks (see prefix_cache.h). Nodes are keyed in their parent by the
// token ids of their first block; matching walks edges block by block, so a prefix shared up
// to the middle of an edge still hits (the edge is split only on insert).
#include "lmstack/serve/prefix_cache.h"

#include <algorithm>

#include <fmt/format.h>

#include "lmstack/core/error.h"

namespace lmstack::serve {

using BlockKey = std::vector<int32_t>;

struct PrefixCache::Node {
  std::vector<int32_t> tokens;  // the edge from the parent: blocks.size() × block_size ids
  std::vector<int32_t> blocks;
  std::map<BlockKey, std::unique_ptr<Node>> children;
  Node* parent = nullptr;
  uint64_t last_used = 0;
};

namespace {

bool block_equal(std::span<const int32_t> a, std::span<const int32_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

BlockKey key_of(std::span<const int32_t> tokens, size_t pos, int block_size) {
  return BlockKey(tokens.begin() + static_cast<std::ptrdiff_t>(pos),
                  tokens.begin() + static_cast<std::ptrdiff_t>(pos + block_size));
}

}  // namespace

PrefixCache::PrefixCache(BlockManager& blocks) : blocks_(blocks), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() {
  // Return the tree's references so the pool is whole again for whoever outlives us.
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (int32_t b : n->blocks) blocks_.release(b);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
}

PrefixMatch PrefixCache::match(std::span<const int32_t> tokens, int max_tokens) {
  const int bs = blocks_.block_size();
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(std::max(max_tokens, 0)));
  PrefixMatch m;
  Node* node = root_.get();
  size_t pos = 0;
  ++clock_;
  while (true) {
    if (pos + static_cast<size_t>(bs) > limit) {
      m.explanation = limit < tokens.size()
                          ? fmt::format(
                                "capped at {} tokens (the last prompt token is always "
                                "computed; blocks of {})",
                                limit, bs)
                          : fmt::format("only {} tokens after the last full block of {}",
                                        tokens.size() - pos, bs);
      break;
    }
    auto it = node->children.find(key_of(tokens, pos, bs));
    if (it == node->children.end()) {
      m.explanation = pos == 0 ? std::string("no cached prefix shares the first block")
                               : fmt::format("no cached continuation after token {}", pos);
      break;
    }
    Node* child = it->second.get();
    child->last_used = clock_;
    size_t j = 0;
    for (; j < child->blocks.size() && pos + static_cast<size_t>(bs) <= limit; ++j) {
      const auto cached = std::span<const int32_t>(child->tokens).subspan(j * bs, bs);
      if (!block_equal(cached, tokens.subspan(pos, static_cast<size_t>(bs)))) {
        size_t k = 0;
        while (cached[k] == tokens[pos + k]) ++k;
        m.explanation = fmt::format("diverged at token {} (cached {}, prompt {})", pos + k,
                                    cached[k], tokens[pos + k]);
        break;
      }
      m.blocks.push_back(child->blocks[j]);
      pos += static_cast<size_t>(bs);
    }
    if (!m.explanation.empty()) break;
    if (j < child->blocks.size()) continue;  // the limit stops us on the next turn
    node = child;
  }
  m.num_tokens = static_cast<int>(pos);
  return m;
}

void PrefixCache::record_query(int64_t query_tokens, int64_t hit_tokens) {
  ++stats_.num_queries;
  stats_.num_query_tokens += query_tokens;
  stats_.num_hit_tokens += hit_tokens;
}

// Cuts `child`'s edge after `keep_blocks` blocks: a new node takes the first part and
// becomes the parent of `child`, which keeps the rest.
void PrefixCache::split(Node& child, size_t keep_blocks) {
  const int bs = blocks_.block_size();
  Node* parent = child.parent;
  auto head = std::make_unique<Node>();
  head->tokens.assign(child.tokens.begin(), child.tokens.begin() + keep_blocks * bs);
  head->blocks.assign(child.blocks.begin(), child.blocks.begin() + keep_blocks);
  head->parent = parent;
  head->last_used = child.last_used;
  child.tokens.erase(child.tokens.begin(), child.tokens.begin() + keep_blocks * bs);
  child.blocks.erase(child.blocks.begin(), child.blocks.begin() + keep_blocks);
  auto slot = parent->children.find(key_of(head->tokens, 0, bs));
  std::unique_ptr<Node> owned = std::move(slot->second);
  owned->parent = head.get();
  head->children.emplace(key_of(owned->tokens, 0, bs), std::move(owned));
  slot->second = std::move(head);
}

void PrefixCache::insert(std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  const size_t bs = static_cast<size_t>(blocks_.block_size());
  LMSTACK_CHECK(tokens.size() >= blocks.size() * bs, "{} tokens cannot fill {} blocks",
                tokens.size(), blocks.size());
  Node* node = root_.get();
  size_t b = 0;  // blocks consumed
  ++clock_;
  while (b < blocks.size()) {
    auto it = node->children.find(key_of(tokens, b * bs, static_cast<int>(bs)));
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(b * bs),
                          tokens.begin() + static_cast<std::ptrdiff_t>(blocks.size() * bs));
      leaf->blocks.assign(blocks.begin() + static_cast<std::ptrdiff_t>(b), blocks.end());
      for (int32_t id : leaf->blocks) blocks_.add_ref(id);
      stats_.num_cached_blocks += static_cast<int64_t>(leaf->blocks.size());
      leaf->parent = node;
      leaf->last_used = clock_;
      node->children.emplace(key_of(leaf->tokens, 0, static_cast<int>(bs)), std::move(leaf));
      return;
    }
    Node* child = it->second.get();
    child->last_used = clock_;
    size_t j = 0;
    while (j < child->blocks.size() && b < blocks.size() &&
           block_equal(std::span<const int32_t>(child->tokens).subspan(j * bs, bs),
                       tokens.subspan(b * bs, bs))) {
      ++j;
      ++b;
    }
    if (j < child->blocks.size()) {
      split(*child, j);
      node = child->parent;  // the new head: the rest of `tokens` hangs below it
    } else {
      node = child;
    }
  }
}

PrefixCache::Node* PrefixCache::find_evictable_leaf(Node& node, Node* best) {
  for (auto& [key, child] : node.children) best = find_evictable_leaf(*child, best);
  const bool evictable =
      &node != root_.get() && node.children.empty() && blocks_.ref_count(node.blocks.back()) == 1;
  if (evictable && (best == nullptr || node.last_used < best->last_used)) best = &node;
  return best;
}

bool PrefixCache::evict_one() {
  Node* leaf = find_evictable_leaf(*root_, nullptr);
  if (leaf == nullptr) return false;
  const size_t bs = static_cast<size_t>(blocks_.block_size());
  // Holders of a block also hold every block before it on the path, so the blocks only the
  // tree holds form a tail of the edge.
  while (!leaf->blocks.empty() && blocks_.ref_count(leaf->blocks.back()) == 1) {
    blocks_.release(leaf->blocks.back());
    leaf->blocks.pop_back();
    leaf->tokens.resize(leaf->tokens.size() - bs);
    --stats_.num_cached_blocks;
    ++stats_.num_evicted_blocks;
  }
  if (leaf->blocks.empty()) {
    Node* parent = leaf->parent;
    for (auto it = parent->children.begin(); it != parent->children.end(); ++it)
      if (it->second.get() == leaf) {
        parent->children.erase(it);
        break;
      }
  }
  return true;
}

bool PrefixCache::make_free(int64_t n) {
  while (!blocks_.can_allocate(n))
    if (!evict_one()) return false;
  return true;
}

void PrefixCache::clear() {
  while (evict_one()) {
  }
}

PrefixCacheStats PrefixCache::stats() const { return stats_; }

}  // namespace lmstack::serve
