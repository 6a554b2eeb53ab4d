// The byte-level pushdown matcher of json_grammar.h. One frame per open value; a frame's
// `phase` is its position inside that value. Numbers and literals such as `12` in enum [1, 12]
// end without a closing byte of their own: the byte after them is handed to the enclosing
// frame (pop_and_refeed). String bytes follow RFC 8259 and the UTF-8 table of RFC 3629
// section 4, so whatever is accepted parses as JSON (no overlongs, no lone surrogates).
#include <cstring>

#include "lmstack/serve/json_grammar.h"

namespace lmstack::serve {
namespace {

using Kind = JsonGrammar::Kind;

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

uint64_t all_of(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

// Number phases; the accepting ones are kZero, kInt, kFrac and kExp.
enum NumPhase : uint8_t {
  kStart,
  kSign,
  kZero,
  kInt,
  kFracFirst,
  kFrac,
  kExpFirst,
  kExpSign,
  kExp
};
// 2 digits: a double holds 1e99 at any mantissa, while 1e400 overflows strict parsers.
constexpr int kMaxExponentDigits = 2;

}  // namespace

JsonMatcher::JsonMatcher(std::shared_ptr<const JsonGrammar> grammar)
    : grammar_(std::move(grammar)), g_(grammar_.get()) {
  push(g_->root());
}

void JsonMatcher::copy_state_from(const JsonMatcher& other) {
  depth_ = other.depth_;
  std::memcpy(stack_, other.stack_, sizeof(Frame) * static_cast<size_t>(depth_));
}

bool JsonMatcher::feed(std::string_view bytes) {
  for (char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonMatcher::push(int node) {
  if (depth_ >= JsonGrammar::kMaxDepth) return false;
  Frame f;
  f.node = node;
  const JsonGrammar::Node& n = g_->node(node);
  if (n.kind == Kind::kLiteral) f.mask = all_of(n.literals.size());
  if (n.kind == Kind::kAlt) f.mask = all_of(n.children.size());
  stack_[depth_++] = f;
  return true;
}

// Closes the top frame, then every sequence that this leaves with no child to come.
void JsonMatcher::pop() {
  --depth_;
  while (depth_ > 0) {
    const Frame& f = stack_[depth_ - 1];
    const JsonGrammar::Node& n = g_->node(f.node);
    if (n.kind != Kind::kSeq || f.count < static_cast<int>(n.children.size())) return;
    --depth_;
  }
}

bool JsonMatcher::pop_and_refeed(uint8_t c) {
  pop();
  return depth_ > 0 && step(c);
}

bool JsonMatcher::frame_complete(const Frame& f) const {
  const JsonGrammar::Node& n = g_->node(f.node);
  switch (n.kind) {
    case Kind::kNumber:
    case Kind::kInteger:
      return f.phase == kZero || f.phase == kInt || f.phase == kFrac || f.phase == kExp;
    case Kind::kLiteral:
      for (size_t j = 0; j < n.literals.size(); ++j)
        if ((f.mask >> j & 1) && n.literals[j].size() == static_cast<size_t>(f.pos)) return true;
      return false;
    case Kind::kSeq:
      return f.count == static_cast<int>(n.children.size());
    default:
      return false;
  }
}

bool JsonMatcher::is_complete() const {
  for (int i = depth_ - 1; i >= 0; --i)
    if (!frame_complete(stack_[i])) return false;
  return true;
}

bool JsonMatcher::in_free_string() const {
  if (depth_ == 0) return false;
  const Frame& f = stack_[depth_ - 1];
  const JsonGrammar::Node& n = g_->node(f.node);
  return n.kind == Kind::kString && f.phase == 1 && n.max_count == INT32_MAX;
}

bool JsonMatcher::in_raw_literal() const {
  if (depth_ == 0) return false;
  const Frame& f = stack_[depth_ - 1];
  const JsonGrammar::Node& n = g_->node(f.node);
  if (n.kind == Kind::kAlt) return true;  // its alternatives start with raw literals
  if (n.kind == Kind::kLiteral) return n.raw;
  if (n.kind == Kind::kSeq && f.count < static_cast<int>(n.children.size()))
    return g_->node(n.children[static_cast<size_t>(f.count)]).raw;
  return false;
}

bool JsonMatcher::step(uint8_t c) {
  Frame& f = stack_[depth_ - 1];
  switch (g_->node(f.node).kind) {
    case Kind::kAny:
      return start_value(f, c);
    case Kind::kObject:
      return feed_object(f, c);
    case Kind::kFreeObject:
      return feed_free_object(f, c);
    case Kind::kArray:
      return feed_array(f, c);
    case Kind::kString:
      return feed_string(f, c);
    case Kind::kNumber:
      return feed_number(f, c, false);
    case Kind::kInteger:
      return feed_number(f, c, true);
    case Kind::kLiteral:
      return feed_literal(f, c);
    case Kind::kSeq:
      return feed_seq(f, c);
    case Kind::kAlt:
      return feed_alt(f, c);
  }
  return false;
}

// An untyped value: its first byte says which kind it is; the frame becomes that kind.
bool JsonMatcher::start_value(Frame& f, uint8_t c) {
  int node = -1;
  if (c == '{') node = JsonGrammar::kFreeObjectNode;
  if (c == '[') node = JsonGrammar::kAnyArrayNode;
  if (c == '"') node = JsonGrammar::kStringNode;
  if (c == '-' || is_digit(c)) node = JsonGrammar::kNumberNode;
  if (c == 't' || c == 'f' || c == 'n') node = JsonGrammar::kWordNode;
  if (node < 0) return false;
  // A container needs a frame for its key or item: none may open in the last one.
  if ((c == '{' || c == '[') && depth_ >= JsonGrammar::kMaxDepth) return false;
  f = Frame{};
  f.node = node;
  if (node == JsonGrammar::kWordNode) f.mask = all_of(3);
  return step(c);
}

// Properties in the schema's order; from `count` on, any up to the first required one.
uint64_t JsonMatcher::key_candidates(const Frame& f) const {
  const auto& props = g_->node(f.node).props;
  uint64_t mask = 0;
  for (size_t j = static_cast<size_t>(f.count); j < props.size(); ++j) {
    mask |= uint64_t{1} << j;
    if (props[j].required) break;
  }
  return mask;
}

bool JsonMatcher::required_left(const Frame& f) const {
  const auto& props = g_->node(f.node).props;
  for (size_t j = static_cast<size_t>(f.count); j < props.size(); ++j)
    if (props[j].required) return true;
  return false;
}

// Phases: 0 before '{', 1 after it, 2 inside a key (`"name":`), 3 after a value, 4 after ','.
bool JsonMatcher::feed_object(Frame& f, uint8_t c) {
  const auto& props = g_->node(f.node).props;
  switch (f.phase) {
    case 0:
      f.phase = 1;
      return c == '{';
    case 1:
    case 4:
      if (c == '}' && f.phase == 1 && !required_left(f)) return pop(), true;
      f.mask = key_candidates(f);
      if (c != '"' || f.mask == 0) return false;
      f.phase = 2;
      f.pos = 1;
      return true;
    case 2: {
      uint64_t next = 0;
      for (size_t j = 0; j < props.size(); ++j)
        if ((f.mask >> j & 1) && props[j].key.size() > static_cast<size_t>(f.pos) &&
            static_cast<uint8_t>(props[j].key[static_cast<size_t>(f.pos)]) == c)
          next |= uint64_t{1} << j;
      if (next == 0) return false;
      f.mask = next;
      ++f.pos;
      for (size_t j = 0; j < props.size(); ++j)  // keys end in `":`, so at most one is whole
        if ((next >> j & 1) && props[j].key.size() == static_cast<size_t>(f.pos)) {
          f.count = static_cast<int32_t>(j) + 1;
          f.phase = 3;
          return push(props[j].node);
        }
      return true;
    }
    default:
      if (c == '}' && !required_left(f)) return pop(), true;
      f.phase = 4;
      return c == ',' && key_candidates(f) != 0;
  }
}

// Phases: 0 before '{', 1 after it, 2 after a key, 3 after a value, 4 after ','.
bool JsonMatcher::feed_free_object(Frame& f, uint8_t c) {
  switch (f.phase) {
    case 0:
      f.phase = 1;
      return c == '{';
    case 1:
    case 4:
      if (c == '}' && f.phase == 1) return pop(), true;
      f.phase = 2;
      return c == '"' && push(JsonGrammar::kStringNode) && step(c);
    case 2:
      f.phase = 3;
      return c == ':' && push(JsonGrammar::kAnyNode);
    default:
      if (c == '}') return pop(), true;
      f.phase = 4;
      return c == ',';
  }
}

// Phases: 0 before '[', 1 after it, 2 after an item; `count` items so far.
bool JsonMatcher::feed_array(Frame& f, uint8_t c) {
  const JsonGrammar::Node& n = g_->node(f.node);
  if (f.phase == 0) {
    f.phase = 1;
    return c == '[';
  }
  if (c == ']' && f.count >= n.min_count) return pop(), true;
  if (f.phase == 2) {
    if (c != ',' || f.count >= n.max_count) return false;
    ++f.count;
    return push(n.items);
  }
  if (n.max_count == 0) return false;
  f.phase = 2;
  f.count = 1;
  return push(n.items) && step(c);
}

// Phases: 0 before '"', 1 in the body, 2 after '\', 3 in \uXXXX (pos digits), 4 inside a
// multi-byte UTF-8 character. `count` counts characters (an escape is one).
bool JsonMatcher::feed_string(Frame& f, uint8_t c) {
  const JsonGrammar::Node& n = g_->node(f.node);
  switch (f.phase) {
    case 0:
      f.phase = 1;
      return c == '"';
    case 1:
      if (c == '"') return f.count >= n.min_count && (pop(), true);
      if (c < 0x20 || f.count >= n.max_count) return false;
      ++f.count;
      if (c == '\\') return f.phase = 2, true;
      if (c < 0x80) return true;
      f.lo = 0x80, f.hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF)
        f.pending = 1;
      else if (c >= 0xE0 && c <= 0xEF)
        f.pending = 2;
      else if (c >= 0xF0 && c <= 0xF4)
        f.pending = 3;
      else
        return false;
      if (c == 0xE0) f.lo = 0xA0;
      if (c == 0xED) f.hi = 0x9F;  // U+D800..DFFF are surrogates
      if (c == 0xF0) f.lo = 0x90;
      if (c == 0xF4) f.hi = 0x8F;  // past U+10FFFF
      f.phase = 4;
      return true;
    case 2:
      if (c == 'u') return f.phase = 3, f.pos = 0, f.lo = 0, true;
      f.phase = 1;
      return std::strchr("\"\\/bfnrt", c) != nullptr && c != 0;
    case 3:
      if (!is_hex(c)) return false;
      // A lone surrogate (\uD800-\uDFFF) is refused by strict JSON parsers.
      if (f.pos == 0 && (c == 'd' || c == 'D')) f.lo = 1;
      if (f.pos == 1 && f.lo == 1 && !(c >= '0' && c <= '7')) return false;
      if (++f.pos == 4) f.phase = 1;
      return true;
    default:
      if (c < f.lo || c > f.hi) return false;
      f.lo = 0x80, f.hi = 0xBF;
      if (--f.pending == 0) f.phase = 1;
      return true;
  }
}

bool JsonMatcher::feed_number(Frame& f, uint8_t c, bool integer) {
  const bool digit = is_digit(c);
  auto go = [&](NumPhase p, uint8_t digits) {
    f.phase = p;
    f.pending = digits;
    return true;
  };
  switch (f.phase) {
    case kStart:
      if (c == '-') return go(kSign, 0);
      [[fallthrough]];
    case kSign:
      if (c == '0') return go(kZero, 1);
      return digit && go(kInt, 1);
    case kZero:
    case kInt:
      if (digit && f.phase == kInt && f.pending < JsonGrammar::kMaxDigits)
        return go(kInt, f.pending + 1);
      if (c == '.' && !integer) return go(kFracFirst, 0);
      if ((c == 'e' || c == 'E') && !integer) return go(kExpFirst, 0);
      return !digit && pop_and_refeed(c);
    case kFracFirst:
      return digit && go(kFrac, 1);
    case kFrac:
      if (digit && f.pending < JsonGrammar::kMaxDigits) return go(kFrac, f.pending + 1);
      if (c == 'e' || c == 'E') return go(kExpFirst, 0);
      return !digit && pop_and_refeed(c);
    case kExpFirst:
      if (c == '+' || c == '-') return go(kExpSign, 0);
      [[fallthrough]];
    case kExpSign:
      return digit && go(kExp, 1);
    default:
      if (digit && f.pending < kMaxExponentDigits) return go(kExp, f.pending + 1);
      return !digit && pop_and_refeed(c);
  }
}

bool JsonMatcher::feed_literal(Frame& f, uint8_t c) {
  const auto& lits = g_->node(f.node).literals;
  const size_t pos = static_cast<size_t>(f.pos);
  uint64_t next = 0;
  bool longer = false;  // some candidate goes on after this byte
  for (size_t j = 0; j < lits.size(); ++j)
    if ((f.mask >> j & 1) && lits[j].size() > pos && static_cast<uint8_t>(lits[j][pos]) == c) {
      next |= uint64_t{1} << j;
      longer = longer || lits[j].size() > pos + 1;
    }
  if (next == 0) return frame_complete(f) && pop_and_refeed(c);
  f.mask = next;
  ++f.pos;
  if (!longer) pop();
  return true;
}

bool JsonMatcher::feed_seq(Frame& f, uint8_t c) {
  const auto& children = g_->node(f.node).children;
  if (f.count >= static_cast<int>(children.size())) return pop_and_refeed(c);
  return push(children[static_cast<size_t>(f.count++)]) && step(c);
}

// Picks the alternative whose first literal the bytes spell; the frame becomes its sequence.
bool JsonMatcher::feed_alt(Frame& f, uint8_t c) {
  const auto& alts = g_->node(f.node).children;
  const size_t pos = static_cast<size_t>(f.pos);
  uint64_t next = 0;
  for (size_t j = 0; j < alts.size(); ++j) {
    const std::string& lit = g_->node(g_->node(alts[j]).children[0]).literals[0];
    if ((f.mask >> j & 1) && lit.size() > pos && static_cast<uint8_t>(lit[pos]) == c)
      next |= uint64_t{1} << j;
  }
  if (next == 0) return false;
  f.mask = next;
  ++f.pos;
  for (size_t j = 0; j < alts.size(); ++j) {
    const auto& seq = g_->node(alts[j]);
    if ((next >> j & 1) && g_->node(seq.children[0]).literals[0].size() == pos + 1) {
      f = Frame{};
      f.node = alts[j];
      f.count = 1;
      if (seq.children.size() == 1) pop();
      return true;
    }
  }
  return true;
}

}  // namespace lmstack::serve
