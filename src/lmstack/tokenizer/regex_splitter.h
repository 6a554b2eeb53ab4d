// A pre-tokenizer regex run by PCRE2 (JIT, UTF + Unicode properties), for patterns that no
// hand-written scanner implements. Patterns are written in the dialect Hugging Face
// `tokenizers` runs them with (Oniguruma, Ruby syntax; of the escapes below tiktoken's patterns
// use only \s, which Rust's `regex` reads the same way). PCRE2 10.42 reads some escapes
// differently, so they are translated:
//   \s \S  Unicode White_Space (PCRE2 lacks U+0085)
//   \w \W  Oniguruma's word class: Alphabetic, marks, Nd, Pc and the Latin-1
//         word characters ² ³ ¹ ¼ ½ ¾ (PCRE2's is L|N|_, so 'नि' would split at its vowel sign)
//   \b \B  boundaries of that word class
//   \h \H  Oniguruma's hexadecimal digit (PCRE2: horizontal space)
// \d is \p{Nd} in both. \W, \B and \H inside a character class are refused by name.
// General-category properties (\p{L}, \p{So}, ...; and \w, \d) also take the code points
// Unicode 15-16 assigned, which PCRE2 10.42 (Unicode 14) calls unassigned
// (regex_unicode_newer.cc, generated from `tokenizers`), so new emoji split as in `tokenizers`.
//
// Thread safety: immutable after construction; find_all may run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmstack::tokenizer {

class RegexSplitter {
 public:
  // Compiles the pattern; throws ConfigError naming the pattern and offset on a syntax error.
  explicit RegexSplitter(const std::string& pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Appends the [begin, end) byte ranges of all non-overlapping matches, leftmost first, as
  // Oniguruma's find_iter reports them (the iterator `tokenizers` splits with): an empty
  // match is reported (a zero-width pattern such as (?=[A-Z]) marks split points) unless it
  // ends where the previous match ended. Invalid UTF-8 never matches
  // (PCRE2_MATCH_INVALID_UTF): it falls in the gaps.
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

 private:
  std::string pattern_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The Oniguruma-dialect pattern rewritten for PCRE2 (the escapes listed above).
std::string translate_regex_for_pcre2(std::string_view pattern);

namespace detail {
struct NewerRange {
  const char* category;  // two-letter general category
  uint32_t first, last;
};
extern const NewerRange kNewerCategoryRanges[];
extern const size_t kNumNewerCategoryRanges;
}  // namespace detail

}  // namespace lmstack::tokenizer
