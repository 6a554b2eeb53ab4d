// Grammar-constrained sampling: which vocabulary tokens may extend a JsonMatcher's text. The
// token byte strings are gathered once per tokenizer into a trie (TokenTrie); each step walks
// the trie depth-first, feeding one byte per edge to a copy of the matcher, so a prefix the
// grammar refuses prunes every token below it (the approach of llama.cpp's grammar sampler
// and XGrammar's token trie, without XGrammar's precomputed per-state caches).
//
// Special tokens never appear inside JSON; they may complete a raw literal (a tool-call
// wrapper such as Qwen's <tool_call>). EOS is allowed exactly when the value is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lmstack/serve/json_grammar.h"
#include "lmstack/serve/token_constraint.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::serve {

// Immutable after construction; shared by every request (thread-safe to read).
class TokenTrie {
 public:
  // Ids >= tokenizer.vocab_size() (a model's padded vocabulary) are never allowed.
  explicit TokenTrie(const tokenizer::Tokenizer& tokenizer);

  struct Node {
    int32_t first_child = 0, num_children = 0;  // children are contiguous in `nodes`
    int32_t first_token = 0, num_tokens = 0;    // tokens ending here, in `ids`
    uint8_t byte = 0;
  };
  struct Trie {
    std::vector<Node> nodes;  // nodes[0] is the root (the empty prefix)
    std::vector<int32_t> ids;
    std::span<const int32_t> tokens(const Node& n) const {
      return {ids.data() + n.first_token, static_cast<size_t>(n.num_tokens)};
    }
  };
  // Every non-special token with bytes.
  const Trie& all() const { return all_; }
  // Tokens that may go anywhere inside a JSON string body: whole UTF-8 characters, no '"',
  // '\' or control byte. Inside a string without maxLength they are all allowed at once,
  // and only the rest (the `non_plain` trie, ~5% of a BPE vocabulary) needs the walk.
  const std::vector<int32_t>& plain_string_ids() const { return plain_ids_; }
  const Trie& non_plain() const { return rest_; }

  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_special(int32_t id) const { return special_[static_cast<size_t>(id)] != 0; }
  const std::vector<int32_t>& special_ids() const { return special_ids_; }
  int max_token_bytes() const { return max_len_; }
  int vocab_size() const { return static_cast<int>(bytes_.size()); }

 private:
  Trie build(std::vector<int32_t> ids) const;

  Trie all_, rest_;
  std::vector<int32_t> plain_ids_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> special_ids_;
  int max_len_ = 0;
};

// A TokenConstraint that follows a JsonGrammar: tokens the grammar refuses get -inf; EOS ids
// are allowed only when the value is complete (and are then the only choice once it is closed).
class GrammarConstraint : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const TokenTrie> trie,
                    std::shared_ptr<const JsonGrammar> grammar, std::vector<int32_t> eos_ids);
  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  const JsonMatcher& matcher() const { return matcher_; }
  // Appends every non-EOS token whose bytes the grammar accepts from here (mask's work).
  void allowed_tokens(std::vector<int32_t>& allowed);

 private:
  std::shared_ptr<const TokenTrie> trie_;
  JsonMatcher matcher_;
  std::vector<int32_t> eos_ids_;
  bool broken_ = false;  // a token the mask refused was sampled: only EOS from now on
  void walk(const TokenTrie::Trie& trie, std::vector<int32_t>& allowed);
  std::vector<JsonMatcher> scratch_;  // one per trie depth: scratch_[d + 1] = [d] + a byte
  std::vector<int32_t> allowed_;
  std::vector<float> kept_;
};

}  // namespace lmstack::serve
