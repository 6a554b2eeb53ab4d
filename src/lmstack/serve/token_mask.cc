// The vocabulary trie and the per-step token mask of token_mask.h.
#include "lmstack/serve/token_mask.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "lmstack/core/error.h"

namespace lmstack::serve {
namespace {

std::string bytes_of(const tokenizer::Tokenizer& tok, int32_t id) {
  try {
    return tok.token_bytes(id);
  } catch (const Error&) {
    return "";  // an unused id: never allowed
  }
}

}  // namespace

TokenTrie::TokenTrie(const tokenizer::Tokenizer& tok) {
  const int32_t vocab = tok.vocab_size();
  bytes_.resize(static_cast<size_t>(vocab));
  special_.assign(static_cast<size_t>(vocab), 0);
  std::vector<int32_t> order;
  for (int32_t id = 0; id < vocab; ++id) {
    bytes_[static_cast<size_t>(id)] = bytes_of(tok, id);
    if (tok.is_special(id)) {
      special_[static_cast<size_t>(id)] = 1;
      special_ids_.push_back(id);
    } else if (!bytes_[static_cast<size_t>(id)].empty()) {
      order.push_back(id);
      max_len_ = std::max(max_len_, static_cast<int>(bytes_[static_cast<size_t>(id)].size()));
    }
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  ids_ = order;
  // Breadth-first over ranges of the sorted ids: a node's tokens are the shortest at the start
  // of its range, and the rest split by their next byte into its (contiguous) children.
  struct Pending {
    int32_t node, lo, hi, depth;
  };
  nodes_.push_back(Node{});
  std::vector<Pending> queue = {{0, 0, static_cast<int32_t>(ids_.size()), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    auto [index, lo, hi, depth] = queue[q];
    auto byte_at = [&](int32_t i) { return static_cast<uint8_t>(bytes(ids_[i])[depth]); };
    int32_t i = lo;
    while (i < hi && static_cast<int32_t>(bytes(ids_[i]).size()) == depth) ++i;
    nodes_[index].first_token = lo;
    nodes_[index].num_tokens = i - lo;
    nodes_[index].first_child = static_cast<int32_t>(nodes_.size());
    while (i < hi) {
      int32_t j = i;
      while (j < hi && byte_at(j) == byte_at(i)) ++j;
      Node child;
      child.byte = byte_at(i);
      queue.push_back({static_cast<int32_t>(nodes_.size()), i, j, depth + 1});
      nodes_.push_back(child);
      ++nodes_[index].num_children;
      i = j;
    }
  }
}

void GrammarConstraint::allowed_tokens(std::vector<int32_t>& allowed) {
  const TokenTrie& trie = *trie_;
  const JsonMatcher& matcher = matcher_;
  std::vector<JsonMatcher>& scratch = scratch_;
  if (matcher.is_closed()) return;
  scratch[0].copy_state_from(matcher);
  struct Visit {
    int32_t node, child;  // next child to try
    int depth;
  };
  std::vector<Visit> stack = {{0, 0, 0}};
  while (!stack.empty()) {
    Visit& v = stack.back();
    const TokenTrie::Node& parent = trie.node(v.node);
    if (v.child == parent.num_children) {
      stack.pop_back();
      continue;
    }
    const int32_t c = parent.first_child + v.child++;
    JsonMatcher& m = scratch[static_cast<size_t>(v.depth) + 1];
    m.copy_state_from(scratch[static_cast<size_t>(v.depth)]);
    if (!m.feed(trie.node(c).byte)) continue;
    for (int32_t id : trie.tokens(trie.node(c))) allowed.push_back(id);
    stack.push_back({c, 0, v.depth + 1});
  }
  if (!matcher.in_raw_literal()) return;
  JsonMatcher& m = scratch[1];
  for (int32_t id : trie.special_ids()) {
    m.copy_state_from(matcher);
    if (!trie.bytes(id).empty() && m.feed(trie.bytes(id))) allowed.push_back(id);
  }
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const TokenTrie> trie,
                                     std::shared_ptr<const JsonGrammar> grammar,
                                     std::vector<int32_t> eos_ids)
    : trie_(std::move(trie)), matcher_(grammar), eos_ids_(std::move(eos_ids)) {
  LMSTACK_CHECK(!eos_ids_.empty(), "a grammar constraint needs an EOS token to end with");
  scratch_.assign(static_cast<size_t>(trie_->max_token_bytes()) + 2, JsonMatcher(grammar));
}

void GrammarConstraint::mask(std::span<float> logits) {
  allowed_.clear();
  if (!broken_) allowed_tokens(allowed_);
  if (broken_ || matcher_.is_complete() || allowed_.empty())
    allowed_.insert(allowed_.end(), eos_ids_.begin(), eos_ids_.end());
  kept_.resize(allowed_.size());
  for (size_t i = 0; i < allowed_.size(); ++i) {
    const auto id = static_cast<size_t>(allowed_[i]);
    kept_[i] = id < logits.size() ? logits[id] : -std::numeric_limits<float>::infinity();
  }
  std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < allowed_.size(); ++i)
    if (static_cast<size_t>(allowed_[i]) < logits.size())
      logits[static_cast<size_t>(allowed_[i])] = kept_[i];
}

void GrammarConstraint::accept(int32_t token) {
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) return;
  if (broken_ || token < 0 || token >= trie_->vocab_size() || !matcher_.feed(trie_->bytes(token)))
    broken_ = true;
}

}  // namespace lmstack::serve
