// A pre-tokenizer regex run by PCRE2 (JIT, UTF + Unicode properties), for patterns that no
// hand-written scanner implements. Patterns are written in the Rust/Python `regex` dialect
// that tokenizer.json and tiktoken use; the one difference that matters, \s (Unicode
// White_Space, which includes U+0085 in Rust but not in PCRE2), is translated.
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

  // Appends the [begin, end) byte ranges of all non-overlapping, non-empty matches, leftmost
  // first. Invalid UTF-8 never matches (PCRE2_MATCH_INVALID_UTF): it falls in the gaps.
  void find_all(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) const;

 private:
  std::string pattern_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The Rust/Python-dialect pattern rewritten for PCRE2 (\s, \S -> explicit White_Space).
std::string translate_regex_for_pcre2(std::string_view pattern);

}  // namespace lmstack::tokenizer
