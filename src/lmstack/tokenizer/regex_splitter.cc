// PCRE2-backed pre-tokenizer regex (see regex_splitter.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "lmstack/tokenizer/regex_splitter.h"

#include <pcre2.h>

#include <fmt/format.h>

#include <optional>

#include "lmstack/core/error.h"

namespace lmstack::tokenizer {

namespace {
// Unicode White_Space = \p{Z} + U+0009..U+000D + U+0085 (Oniguruma and Rust `regex` \s).
constexpr std::string_view kSpaceMembers = R"(\t-\r\x{85}\p{Z})";
// Oniguruma's \w under UTF-8: Alphabetic, M, Nd and Pc (not Join_Control, unlike UTS #18)
// plus the Latin-1 word characters of its ISO-8859-1 ctype table (U+00B2 U+00B3 U+00B9
// U+00BC-U+00BE). regex_splitter_test.cc checks it code point by code point against the set
// `tokenizers` matches (tests/data/tokenizer/onig_classes.txt).
constexpr std::string_view kWordMembers =
    R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";

// Class members for the code points newer than PCRE2's Unicode whose general category starts
// with `category` ("L" or "Lu"), e.g. "\x{1FAE8}-\x{1FAE8}".
std::string newer_members(std::string_view category) {
  std::string out;
  for (size_t i = 0; i < detail::kNumNewerCategoryRanges; ++i) {
    const detail::NewerRange& r = detail::kNewerCategoryRanges[i];
    if (std::string_view(r.category).starts_with(category))
      out += fmt::format("\\x{{{:X}}}-\\x{{{:X}}}", r.first, r.last);
  }
  return out;
}

const std::string& word_members() {
  static const std::string w = std::string(kWordMembers) + newer_members("L") + newer_members("M") +
                               newer_members("Nd") + newer_members("Pc");
  return w;
}

std::string word_class(bool negated) { return (negated ? "[^" : "[") + word_members() + "]"; }

// \p{X} / \P{X} at p[i] ('p' or 'P'); returns the translation and sets `consumed`, or "" for
// properties that are not general categories (scripts, binary properties).
std::string translate_property(std::string_view p, size_t i, bool in_class, size_t& consumed) {
  if (i + 1 >= p.size() || p[i + 1] != '{') return "";
  const size_t close = p.find('}', i + 2);
  if (close == std::string_view::npos) return "";
  const std::string_view name = p.substr(i + 2, close - i - 2);
  const bool category = (name.size() == 1 || name.size() == 2) &&
                        std::string_view("LMNPSZC").find(name[0]) != std::string_view::npos;
  const std::string extra = category ? newer_members(name) : "";
  if (extra.empty() || (in_class && p[i] == 'P')) return "";
  consumed = close - i;
  const std::string own = "\\p{" + std::string(name) + "}";
  if (in_class) return own + extra;
  return (p[i] == 'P' ? "[^" : "[") + own + extra + "]";
}

// \b and \B over Oniguruma's word class, as lookarounds (PCRE2's own use L|N|_).
std::string word_boundary(bool negated) {
  const std::string w = word_class(false);
  if (negated) return "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
  return "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))";
}

// The translation of escape `\e`, or "" when PCRE2 reads it as Oniguruma does.
std::string translate_escape(char e, bool in_class, std::string_view pattern) {
  if (in_class && (e == 'W' || e == 'B' || e == 'H'))
    throw_error<ConfigError>(
        "pre-tokenizer regex '{}': \\{} inside a character class is not supported", pattern, e);
  switch (e) {
    case 's':
      return in_class ? std::string(kSpaceMembers) : "[" + std::string(kSpaceMembers) + "]";
    case 'S':  // inside a class PCRE2's \S stands (it differs from White_Space only at U+0085)
      return in_class ? "" : "[^" + std::string(kSpaceMembers) + "]";
    case 'w':
      return in_class ? word_members() : word_class(false);
    case 'W':
      return word_class(true);
    case 'b':
      return in_class ? "" : word_boundary(false);  // [\b] is a backspace in both
    case 'B':
      return word_boundary(true);
    case 'd':
      return in_class ? "\\p{Nd}" + newer_members("Nd") : "[\\p{Nd}" + newer_members("Nd") + "]";
    case 'h':
      return in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
    case 'H':
      return "[^0-9a-fA-F]";
    default:
      return "";
  }
}

}  // namespace

std::string translate_regex_for_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      size_t consumed = 0;
      if (e == 'p' || e == 'P') {
        const std::string t = translate_property(p, i, in_class, consumed);
        if (!t.empty()) {
          out += t;
          i += consumed;
          continue;
        }
      }
      const std::string t = translate_escape(e, in_class, p);
      if (t.empty()) {
        out += c;
        out += e;
      } else {
        out += t;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // literal ']' first in class
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
};

RegexSplitter::RegexSplitter(const std::string& pattern)
    : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  const std::string translated = translate_regex_for_pcre2(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw_error<ConfigError>("pre-tokenizer regex '{}': {} at offset {}", pattern,
                             reinterpret_cast<const char*>(msg), offset);
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(impl_->code); }

void RegexSplitter::find_all(std::string_view text,
                             std::vector<std::pair<uint32_t, uint32_t>>& out) const {
  struct MatchData {
    pcre2_match_data* md;
    pcre2_match_context* ctx;
    pcre2_jit_stack* stack;
    MatchData()
        : md(pcre2_match_data_create(16, nullptr)),
          ctx(pcre2_match_context_create(nullptr)),
          stack(pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr)) {
      pcre2_jit_stack_assign(ctx, nullptr, stack);
    }
    ~MatchData() {
      pcre2_jit_stack_free(stack);
      pcre2_match_context_free(ctx);
      pcre2_match_data_free(md);
    }
  };
  thread_local MatchData data;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // Oniguruma's FindMatches: search from `pos`; an empty match that ends where the previous
  // match ended is dropped and the search steps one character on.
  size_t pos = 0;
  std::optional<size_t> last_end;
  while (pos <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, data.md, data.ctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw_error<RequestError>("pre-tokenizer regex '{}' failed at byte {}: {}", pattern_, pos,
                                reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    if (ov[1] == ov[0] && last_end == ov[1]) {
      ++pos;  // one character on: a UTF-8 lead byte and its continuations
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    out.emplace_back(static_cast<uint32_t>(ov[0]), static_cast<uint32_t>(ov[1]));
    pos = ov[1];
    last_end = ov[1];
  }
}

}  // namespace lmstack::tokenizer
