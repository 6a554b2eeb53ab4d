// Token statistics of a text, to check the glossary's rules of thumb on any input: "Token ≈ 4
// characters / 0.75 English words; Chinese 1-2 tokens per character".
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::tokenizer {

struct TextStats {
  int64_t bytes = 0;
  int64_t chars = 0;  // UTF-8 characters (an invalid byte counts as one)
  int64_t words = 0;  // runs of non-whitespace characters (as `wc -w`)
  int64_t tokens = 0;
  int64_t cjk_chars = 0;   // CJK ideographs, kana and hangul
  int64_t cjk_tokens = 0;  // tokens whose bytes overlap a CJK character
  double bytes_per_token() const { return tokens ? double(bytes) / tokens : 0; }
  double chars_per_token() const { return tokens ? double(chars) / tokens : 0; }
  double words_per_token() const { return tokens ? double(words) / tokens : 0; }
  double tokens_per_cjk_char() const { return cjk_chars ? double(cjk_tokens) / cjk_chars : 0; }
};

// Statistics of `ids` as an encoding of their decoded text. Counting on the decoded bytes keeps
// token boundaries exact (for byte-level models the decoded bytes are the input). Throws like
// decode() for bad ids.
TextStats text_stats(const Tokenizer& tok, std::span<const int32_t> ids);

// Adds b into a (for per-line totals).
void accumulate(TextStats& a, const TextStats& b);

}  // namespace lmstack::tokenizer
