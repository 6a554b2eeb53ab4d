// UTF-8 decoding and the Unicode classes the pre-tokenizer patterns use (\p{L}, \p{N}, \s and
// o200k's two letter-case classes). The class data comes from tiktoken's regex engine
// (tools/ref/gen_unicode_tables.py), so the hand-written scanners follow the reference's
// Unicode version exactly. Not a general Unicode library: no normalization, no case mapping.
//
// Invalid UTF-8 (overlongs, surrogates, > U+10FFFF, stray or truncated bytes) decodes one byte
// at a time to kInvalidCodePoint, whose class is 0 ("other", like U+FFFD), so byte-level
// tokenizers can split and encode any byte string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lmstack::tokenizer {

// Bit flags of char_class().
enum CharClass : uint8_t {
  kClassLetter = 1,     // \p{L}
  kClassNumber = 2,     // \p{N}
  kClassSpace = 4,      // \s (Unicode White_Space)
  kClassUpperish = 8,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
  kClassLowerish = 16,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
};

inline constexpr uint32_t kInvalidCodePoint = 0x110000;

struct Utf8Char {
  uint32_t cp;   // code point, or kInvalidCodePoint for an invalid byte
  uint32_t len;  // bytes consumed: 1-4 (1 for an invalid byte)
};

// Decodes the character at s[0] (n >= 1 bytes available). Strict: rejects overlongs,
// surrogates and code points above U+10FFFF.
inline Utf8Char decode_utf8(const uint8_t* s, size_t n) {
  const uint8_t c = s[0];
  if (c < 0x80) return {c, 1};
  auto cont = [&](size_t i) { return i < n && (s[i] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) {
    if (cont(1)) return {(uint32_t(c & 0x1F) << 6) | (s[1] & 0x3F), 2};
  } else if (c >= 0xE0 && c <= 0xEF) {
    if (cont(1) && cont(2)) {
      const uint32_t cp = (uint32_t(c & 0x0F) << 12) | (uint32_t(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
      if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return {cp, 3};
    }
  } else if (c >= 0xF0 && c <= 0xF4) {
    if (cont(1) && cont(2) && cont(3)) {
      const uint32_t cp = (uint32_t(c & 0x07) << 18) | (uint32_t(s[1] & 0x3F) << 12) |
                          (uint32_t(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
      if (cp >= 0x10000 && cp <= 0x10FFFF) return {cp, 4};
    }
  }
  return {kInvalidCodePoint, 1};
}

// CharClass flags of a code point (0 for kInvalidCodePoint and unassigned code points).
uint8_t char_class(uint32_t cp);

// The contraction letter ('s', 't', ...) that a non-ASCII code point case-folds to under
// (?i:...), or 0. (Only U+017F LATIN SMALL LETTER LONG S, which folds to 's'.)
char contraction_fold(uint32_t cp);

// True if the bytes are valid UTF-8.
bool is_valid_utf8(std::string_view s);
// Byte offset of the first invalid UTF-8 sequence, or s.size() if there is none.
size_t first_invalid_utf8(std::string_view s);
// Number of invalid UTF-8 sequences (each invalid byte counts as one).
size_t count_invalid_utf8(std::string_view s);
// The bytes with every invalid byte replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view s);
// Length of the trailing bytes of s that are a proper prefix of a valid UTF-8 character (they
// may complete when more bytes arrive), else 0.
size_t incomplete_utf8_suffix(std::string_view s);
// Appends the UTF-8 encoding of a code point (<= U+10FFFF, not a surrogate).
void append_utf8(std::string& out, uint32_t cp);
// True for CJK ideographs and the Japanese/Korean syllabaries (used by --stats only).
bool is_cjk(uint32_t cp);

namespace detail {
struct UnicodeRange {
  uint32_t first, last;
  uint8_t flags;
};
struct CaseFold {
  uint32_t cp;
  char letter;
};
}  // namespace detail

}  // namespace lmstack::tokenizer
