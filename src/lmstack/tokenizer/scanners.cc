// The hand-written pre-tokenizer scanners (see scanners.h for the patterns). Each function
// mirrors the regex's alternatives in order; comments give the alternative being matched.
#include "lmstack/tokenizer/scanners.h"

#include <array>

#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

constexpr uint8_t kL = kClassLetter, kN = kClassNumber, kS = kClassSpace;
constexpr uint8_t kU = kClassUpperish, kW = kClassLowerish;

constexpr std::array<uint8_t, 128> make_ascii_classes() {
  std::array<uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c >= 'A' && c <= 'Z') t[c] = kL | kU;
    if (c >= 'a' && c <= 'z') t[c] = kL | kW;
    if (c >= '0' && c <= '9') t[c] = kN;
    if ((c >= 0x09 && c <= 0x0D) || c == ' ') t[c] = kS;
  }
  return t;
}
constexpr std::array<uint8_t, 128> kAsciiClass = make_ascii_classes();

// A character with its class, decoded at a byte offset.
struct Ch {
  uint32_t cp, len;
  uint8_t cls;
};

class Text {
 public:
  explicit Text(std::string_view t)
      : s_(reinterpret_cast<const uint8_t*>(t.data())), n_(t.size()) {}
  size_t size() const { return n_; }
  Ch at(size_t i) const {
    const uint8_t b = s_[i];
    if (b < 0x80) return {b, 1, kAsciiClass[b]};
    const Utf8Char c = decode_utf8(s_ + i, n_ - i);
    return {c.cp, c.len, char_class(c.cp)};
  }
  // End of the run of characters whose class intersects `any` and avoids `none`.
  size_t run(size_t i, uint8_t any, uint8_t none = 0) const {
    while (i < n_) {
      const Ch c = at(i);
      if (!(c.cls & any) || (c.cls & none)) break;
      i += c.len;
    }
    return i;
  }
  size_t run_other(size_t i) const {
    while (i < n_) {
      const Ch c = at(i);
      if (c.cls & (kL | kN | kS)) break;
      i += c.len;
    }
    return i;
  }
  size_t run_bytes(size_t i, std::string_view set) const {
    while (i < n_ && set.find(static_cast<char>(s_[i])) != std::string_view::npos) ++i;
    return i;
  }

  // Length of a contraction ('s 't 're 've 'm 'll 'd) at i (s_[i] == '\''), or 0.
  // Case-insensitive matching also accepts upper case and U+017F for 's'.
  size_t contraction(size_t i, bool ignore_case) const {
    auto letter = [&](size_t j, uint32_t& len) -> char {
      if (j >= n_) return 0;
      const Ch c = at(j);
      len = c.len;
      if (c.cp < 0x80) {
        char x = static_cast<char>(c.cp);
        if (ignore_case && x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
        return x;
      }
      return ignore_case ? contraction_fold(c.cp) : 0;
    };
    uint32_t l1 = 0, l2 = 0;
    const char a = letter(i + 1, l1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + l1;
    if (a != 'r' && a != 'v' && a != 'l') return 0;
    const char b = letter(i + 1 + l1, l2);
    if ((a == 'l' && b == 'l') || (a != 'l' && b == 'e')) return 1 + l1 + l2;
    return 0;
  }

  // Whitespace at i: `\s*[\r\n]+` (if newline_alt), then `\s+(?!\S)`, then `\s+`.
  size_t whitespace(size_t i, bool newline_alt) const {
    size_t j = i, last_start = i, after_newline = 0;
    while (j < n_) {
      const Ch c = at(j);
      if (!(c.cls & kS)) break;
      if (c.cp == '\r' || c.cp == '\n') after_newline = j + 1;
      last_start = j;
      j += c.len;
    }
    if (newline_alt && after_newline) return after_newline;
    if (j == n_ || last_start == i) return j;
    return last_start;  // leave the last space to prefix the next word
  }

 private:
  const uint8_t* s_;
  size_t n_;
};

bool is_other(uint8_t cls) { return !(cls & (kL | kN | kS)); }

size_t scan_gpt2(const Text& t, size_t i) {
  const Ch c = t.at(i);
  if (c.cp == '\'') {
    if (size_t m = t.contraction(i, false)) return i + m;
  }
  size_t start = i;
  uint8_t cls = c.cls;
  if (c.cp == ' ' && i + 1 < t.size()) {  // " ?" before a letter, number or other run
    const Ch d = t.at(i + 1);
    if (!(d.cls & kS)) start = i + 1, cls = d.cls;
  }
  if (cls & kL) return t.run(start, kL);
  if (cls & kN) return t.run(start, kN);
  if (is_other(cls)) return t.run_other(start);
  return t.whitespace(i, false);
}

size_t scan_cl100k(const Text& t, size_t i, int max_digits) {
  const Ch c = t.at(i);
  if (c.cp == '\'') {  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (size_t m = t.contraction(i, true)) return i + m;
  }
  if (c.cls & kL) return t.run(i, kL);  // \p{L}+
  const size_t next = i + c.len;
  const bool prefix = !(c.cls & kN) && c.cp != '\r' && c.cp != '\n';
  if (prefix && next < t.size() && (t.at(next).cls & kL))  // [^\r\n\p{L}\p{N}]\p{L}+
    return t.run(next, kL);
  if (c.cls & kN) {  // \p{N}{1,max_digits}
    size_t j = next;
    for (int k = 1; k < max_digits && j < t.size(); ++k) {
      const Ch d = t.at(j);
      if (!(d.cls & kN)) break;
      j += d.len;
    }
    return j;
  }
  size_t start = i;  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  if (c.cp == ' ' && next < t.size() && is_other(t.at(next).cls)) start = next;
  if (start != i || is_other(c.cls)) return t.run_bytes(t.run_other(start), "\r\n");
  return t.whitespace(i, true);
}

// o200k's words: [Lu Lt Lm Lo M]*[Ll Lm Lo M]+ (lower_required) or [Lu Lt Lm Lo M]+[Ll Lm
// Lo M]* starting at p, as a backtracking matcher would find them; 0 if no match.
size_t o200k_word(const Text& t, size_t p, bool lower_required) {
  size_t e = p, last_lowerish_end = 0;
  while (e < t.size()) {  // greedy upper run, remembering the last char also in the lower class
    const Ch c = t.at(e);
    if (!(c.cls & kU)) break;
    e += c.len;
    if (c.cls & kW) last_lowerish_end = e;
  }
  if (e < t.size() && (t.at(e).cls & kW)) return t.run(e, kW);
  if (!lower_required) return e > p ? e : 0;
  return last_lowerish_end;  // backtrack: the lower run is the last lower-class char
}

size_t scan_o200k(const Text& t, size_t i, int max_digits) {
  const Ch c = t.at(i);
  const size_t next = i + c.len;
  const bool prefix = !(c.cls & (kL | kN)) && c.cp != '\r' && c.cp != '\n';
  for (bool lower_required : {true, false}) {
    size_t e = 0;
    if (prefix && next < t.size()) e = o200k_word(t, next, lower_required);
    if (!e) e = o200k_word(t, i, lower_required);
    if (e) {
      if (e < t.size() && t.at(e).cp == '\'') e += t.contraction(e, true);
      return e;
    }
  }
  if (c.cls & kN) {
    size_t j = next;
    for (int k = 1; k < max_digits && j < t.size(); ++k) {
      const Ch d = t.at(j);
      if (!(d.cls & kN)) break;
      j += d.len;
    }
    return j;
  }
  size_t start = i;  // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
  if (c.cp == ' ' && next < t.size() && is_other(t.at(next).cls)) start = next;
  if (start != i || is_other(c.cls)) return t.run_bytes(t.run_other(start), "\r\n/");
  return t.whitespace(i, true);
}

struct KnownPattern {
  std::string_view pattern;
  ScannerSpec spec;
};

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Other spellings of the same splits (tiktoken >= 0.7 writes them with possessive
// quantifiers and an anchored whitespace alternative).
const KnownPattern kKnownPatterns[] = {
    {kGpt2Pattern, {ScannerKind::kGpt2, 0}},
    {R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)",
     {ScannerKind::kGpt2, 0}},
    {R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
     {ScannerKind::kGpt2, 0}},
    {kCl100kPattern, {ScannerKind::kCl100k, 3}},
    {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)",
     {ScannerKind::kCl100k, 3}},
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     {ScannerKind::kCl100k, 3}},
    {kQwen2Pattern, {ScannerKind::kCl100k, 1}},
    {kO200kPattern, {ScannerKind::kO200k, 3}},
    {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     {ScannerKind::kO200k, 3}},
};

}  // namespace

std::string scanner_pattern(const ScannerSpec& spec) {
  switch (spec.kind) {
    case ScannerKind::kGpt2:
      return std::string(kGpt2Pattern);
    case ScannerKind::kCl100k:
      return std::string(spec.max_digits == 1 ? kQwen2Pattern : kCl100kPattern);
    case ScannerKind::kO200k:
      return std::string(kO200kPattern);
  }
  return "";
}

std::optional<ScannerSpec> scanner_for_pattern(std::string_view pattern) {
  for (const KnownPattern& k : kKnownPatterns)
    if (k.pattern == pattern) return k.spec;
  return std::nullopt;
}

void scan_pieces(const ScannerSpec& spec, std::string_view text, std::vector<uint32_t>& ends) {
  const Text t(text);
  size_t i = 0;
  switch (spec.kind) {
    case ScannerKind::kGpt2:
      while (i < t.size()) ends.push_back(static_cast<uint32_t>(i = scan_gpt2(t, i)));
      break;
    case ScannerKind::kCl100k:
      while (i < t.size())
        ends.push_back(static_cast<uint32_t>(i = scan_cl100k(t, i, spec.max_digits)));
      break;
    case ScannerKind::kO200k:
      while (i < t.size())
        ends.push_back(static_cast<uint32_t>(i = scan_o200k(t, i, spec.max_digits)));
      break;
  }
}

}  // namespace lmstack::tokenizer
