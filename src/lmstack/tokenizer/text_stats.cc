// Token statistics (see text_stats.h).
#include "lmstack/tokenizer/text_stats.h"

#include <string>
#include <vector>

#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {

TextStats text_stats(const Tokenizer& tok, std::span<const int32_t> ids) {
  TextStats s;
  std::string text;
  std::vector<size_t> token_end;  // byte offset where each token ends
  for (int32_t id : ids) {
    text += tok.token_bytes(id);
    token_end.push_back(text.size());
  }
  s.bytes = static_cast<int64_t>(text.size());
  s.tokens = static_cast<int64_t>(ids.size());
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  bool in_word = false;
  size_t t = 0;  // token containing the current byte
  int64_t last_cjk_token = -1;
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(p + i, text.size() - i);
    ++s.chars;
    const bool space = (char_class(c.cp) & kClassSpace) != 0;
    if (!space && !in_word) ++s.words;
    in_word = !space;
    if (is_cjk(c.cp)) {
      ++s.cjk_chars;
      while (t < token_end.size() && token_end[t] <= i) ++t;
      for (size_t k = t; k < token_end.size(); ++k) {  // every token that covers the character
        if (static_cast<int64_t>(k) > last_cjk_token) ++s.cjk_tokens, last_cjk_token = k;
        if (token_end[k] >= i + c.len) break;
      }
    }
    i += c.len;
  }
  return s;
}

void accumulate(TextStats& a, const TextStats& b) {
  a.bytes += b.bytes;
  a.chars += b.chars;
  a.words += b.words;
  a.tokens += b.tokens;
  a.cjk_chars += b.cjk_chars;
  a.cjk_tokens += b.cjk_tokens;
}

}  // namespace lmstack::tokenizer
