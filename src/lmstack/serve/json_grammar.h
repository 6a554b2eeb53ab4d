// JSON grammars for constrained sampling: a JSON schema (or "any JSON object") compiled into a
// tree of nodes, and a byte-level pushdown matcher over it that says whether a byte may extend
// the text so far and whether the text is a complete value. token_mask.h runs the matcher over
// the vocabulary. The idea is llama.cpp's json-schema-to-grammar / XGrammar, cut down to the
// schema keywords listed below; it is not a general JSON-schema validator.
//
// Accepted output is compact JSON (no whitespace between tokens), object properties in the
// schema's order (optional ones may be left out), numbers of at most kMaxDigits digits per
// part, nesting of at most kMaxSchemaDepth (kMaxDepth for free JSON). Keywords: type (one of
// object, array, string, number, integer, boolean, null), properties, required,
// additionalProperties (false only, which is what a schema with properties gets anyway), items,
// minItems, maxItems, minLength, maxLength, enum, const; annotations (title, description, default,
// examples, $schema, $id, format) are ignored. Anything else is refused with a RequestError naming
// its path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::serve {

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 24;  // matcher frames
  static constexpr int kMaxSchemaDepth = kMaxDepth - 6;
  static constexpr int kMaxDigits = 16;
  static constexpr int kMaxChoices = 64;  // enum values, properties, alternatives

  enum class Kind : uint8_t {
    kAny,
    kObject,
    kFreeObject,
    kArray,
    kString,
    kNumber,
    kInteger,
    kLiteral,
    kSeq,
    kAlt
  };
  struct Prop {
    std::string key;  // `"name":`, matched as a literal
    int node = 0;
    bool required = false;
  };
  struct Node {
    Kind kind = Kind::kAny;
    std::vector<Prop> props;            // kObject
    std::vector<std::string> literals;  // kLiteral: the accepted texts (prefix-free or not)
    std::vector<int> children;          // kSeq: in order; kAlt: kSeq children, first a kLiteral
    int items = -1;                     // kArray
    int64_t min_count = 0, max_count = INT32_MAX;  // string length in characters; array items
    bool raw = false;  // kLiteral outside JSON text (a tool-call wrapper): special tokens allowed
  };

  // Compiles a JSON schema; throws RequestError "<path>: <why>" for what it does not support,
  // with `path` starting at `root_path` (e.g. "response_format.json_schema.schema").
  static JsonGrammar from_schema(const nlohmann::ordered_json& schema,
                                 const std::string& root_path);
  // Any JSON object (response_format json_object).
  static JsonGrammar any_object();
  // Nodes 0-5, present in every grammar: any value, free object, array of any, string,
  // number, true/false/null.
  static constexpr int kAnyNode = 0, kFreeObjectNode = 1, kAnyArrayNode = 2, kStringNode = 3,
                       kNumberNode = 4, kWordNode = 5;
  JsonGrammar();

  // Building blocks for tool-call wrappers (tool_grammar.cc): a node index for each.
  int add_schema(const nlohmann::ordered_json& schema, const std::string& path);
  int add_raw_literal(std::string text);
  int add_seq(std::vector<int> children);
  int add_alt(std::vector<int> seqs);  // each a kSeq whose first child is a kLiteral
  void set_root(int node) { root_ = node; }

  const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int root() const { return root_; }

 private:
  int add(Node n);
  int compile(const nlohmann::ordered_json& s, const std::string& path, int depth);
  int compile_object(const nlohmann::ordered_json& s, const std::string& path, int depth);
  int compile_array(const nlohmann::ordered_json& s, const std::string& path, int depth);
  std::vector<Node> nodes_;
  int root_ = 0;
};

// The matcher's position in a grammar: a stack of frames, copied freely (token_mask.cc copies
// it once per trie node). Invariant: the text fed so far is a prefix of some accepted text.
class JsonMatcher {
 public:
  explicit JsonMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Consumes one byte if the grammar allows it here. False when it does not; the state is then
  // undefined, so callers that probe bytes feed a copy (copy_state_from).
  bool feed(uint8_t byte) { return depth_ > 0 && step(byte); }
  bool feed(std::string_view bytes);
  // This matcher's position := `other`'s (same grammar), copying only the live frames.
  void copy_state_from(const JsonMatcher& other);
  // The text so far is a whole accepted value (EOS may follow).
  bool is_complete() const;
  // No byte may follow (the root value is closed).
  bool is_closed() const { return depth_ == 0; }
  // Inside the body of a string without maxLength (any whole character may come next).
  bool in_free_string() const;
  // The innermost frame is a raw literal (a tool-call wrapper), where special tokens may go.
  bool in_raw_literal() const;

  struct Frame {
    int32_t node = 0;
    uint8_t phase = 0;
    uint8_t lo = 0, hi = 0;  // string: the next UTF-8 continuation byte's range
    uint8_t pending = 0;     // string: continuation bytes still due; number: digits in part
    int32_t count = 0;       // string chars, array items, object's next property, seq child
    int32_t pos = 0;         // bytes matched of a literal or key
    uint64_t mask = 0;       // literal / key / alternative candidates
  };

 private:
  bool step(uint8_t c);
  bool push(int node);
  void pop();
  bool start_value(Frame& f, uint8_t c);
  bool pop_and_refeed(uint8_t c);
  bool feed_object(Frame& f, uint8_t c);
  bool feed_free_object(Frame& f, uint8_t c);
  bool feed_array(Frame& f, uint8_t c);
  bool feed_string(Frame& f, uint8_t c);
  bool feed_number(Frame& f, uint8_t c, bool integer);
  bool feed_literal(Frame& f, uint8_t c);
  bool feed_seq(Frame& f, uint8_t c);
  bool feed_alt(Frame& f, uint8_t c);
  bool frame_complete(const Frame& f) const;
  uint64_t key_candidates(const Frame& f) const;
  bool required_left(const Frame& f) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  const JsonGrammar* g_;  // grammar_.get(), so copies in the mask's inner loop stay cheap
  Frame stack_[JsonGrammar::kMaxDepth + 4];
  int depth_ = 0;
};

}  // namespace lmstack::serve
