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

// Whether `bytes` may sit anywhere inside a JSON string body: fed after an opening quote,
// the string matcher accepts them and is back in the body (no escape or UTF-8 sequence open).
bool is_plain_string_text(const std::string& bytes) {
  static const auto string_grammar = std::make_shared<const JsonGrammar>(
      JsonGrammar::from_schema(nlohmann::ordered_json{{"type", "string"}}, "string"));
  if (bytes.find_first_of("\"\\") != std::string::npos) return false;
  JsonMatcher m(string_grammar);
  return m.feed('"') && m.feed(bytes) && m.feed('"') && m.is_complete();
}

}  // namespace

TokenTrie::TokenTrie(const tokenizer::Tokenizer& tok) {
  const int32_t vocab = tok.vocab_size();
  bytes_.resize(static_cast<size_t>(vocab));
  special_.assign(static_cast<size_t>(vocab), 0);
  std::vector<int32_t> ordinary, rest;
  for (int32_t id = 0; id < vocab; ++id) {
    const std::string& b = bytes_[static_cast<size_t>(id)] = bytes_of(tok, id);
    if (tok.is_special(id)) {
      special_[static_cast<size_t>(id)] = 1;
      special_ids_.push_back(id);
    } else if (!b.empty()) {
      ordinary.push_back(id);
      (is_plain_string_text(b) ? plain_ids_ : rest).push_back(id);
      max_len_ = std::max(max_len_, static_cast<int>(b.size()));
    }
  }
  all_ = build(std::move(ordinary));
  rest_ = build(std::move(rest));
}

TokenTrie::Trie TokenTrie::build(std::vector<int32_t> ids) const {
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes(a) < bytes(b); });
  Trie t;
  t.ids = std::move(ids);
  // Breadth-first over ranges of the sorted ids: a node's tokens are the shortest at the start
  // of its range, and the rest split by their next byte into its (contiguous) children.
  struct Pending {
    int32_t node, lo, hi, depth;
  };
  t.nodes.push_back(Node{});
  std::vector<Pending> queue = {{0, 0, static_cast<int32_t>(t.ids.size()), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    // Named copies, not a structured binding: clang 14 (the fuzz build) cannot capture one.
    const int32_t index = queue[q].node, lo = queue[q].lo, hi = queue[q].hi, depth = queue[q].depth;
    auto byte_at = [&](int32_t i) { return static_cast<uint8_t>(bytes(t.ids[i])[depth]); };
    int32_t i = lo;
    while (i < hi && static_cast<int32_t>(bytes(t.ids[i]).size()) == depth) ++i;
    t.nodes[index].first_token = lo;
    t.nodes[index].num_tokens = i - lo;
    t.nodes[index].first_child = static_cast<int32_t>(t.nodes.size());
    while (i < hi) {
      int32_t j = i;
      while (j < hi && byte_at(j) == byte_at(i)) ++j;
      Node child;
      child.byte = byte_at(i);
      queue.push_back({static_cast<int32_t>(t.nodes.size()), i, j, depth + 1});
      t.nodes.push_back(child);
      ++t.nodes[index].num_children;
      i = j;
    }
  }
  return t;
}

void GrammarConstraint::allowed_tokens(std::vector<int32_t>& allowed) {
  if (matcher_.is_closed()) return;
  if (matcher_.in_free_string()) {
    allowed.insert(allowed.end(), trie_->plain_string_ids().begin(),
                   trie_->plain_string_ids().end());
    walk(trie_->non_plain(), allowed);
  } else {
    walk(trie_->all(), allowed);
  }
  if (!matcher_.in_raw_literal()) return;
  JsonMatcher& m = scratch_[1];
  for (int32_t id : trie_->special_ids()) {
    m.copy_state_from(matcher_);
    if (!trie_->bytes(id).empty() && m.feed(trie_->bytes(id))) allowed.push_back(id);
  }
}

// Depth-first over the trie; scratch_[d + 1] is scratch_[d] fed the edge's byte, so a prefix
// the grammar refuses cuts off its whole subtree.
void GrammarConstraint::walk(const TokenTrie::Trie& trie, std::vector<int32_t>& allowed) {
  scratch_[0].copy_state_from(matcher_);
  struct Visit {
    int32_t node, child;  // next child to try
    int depth;
  };
  std::vector<Visit> stack = {{0, 0, 0}};
  while (!stack.empty()) {
    Visit& v = stack.back();
    const TokenTrie::Node& parent = trie.nodes[static_cast<size_t>(v.node)];
    if (v.child == parent.num_children) {
      stack.pop_back();
      continue;
    }
    const int32_t c = parent.first_child + v.child++;
    const TokenTrie::Node& child = trie.nodes[static_cast<size_t>(c)];
    JsonMatcher& m = scratch_[static_cast<size_t>(v.depth) + 1];
    m.copy_state_from(scratch_[static_cast<size_t>(v.depth)]);
    if (!m.feed(child.byte)) continue;
    for (int32_t id : trie.tokens(child)) allowed.push_back(id);
    stack.push_back({c, 0, v.depth + 1});
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
