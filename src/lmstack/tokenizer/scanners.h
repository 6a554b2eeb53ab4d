// Hand-written pre-tokenizer scanners for the patterns of the known encodings. Each returns
// the end of the piece that starts at a given offset, exactly as the encoding's regex (Rust
// `regex`/`fancy-regex` leftmost-first semantics, as tiktoken runs it) would match there;
// scanners_test.cc proves it against PCRE2 on the whole corpus. They are here for speed: no
// backtracking, one table lookup per character.
//
//   gpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   cl100k (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//          ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+       (also Llama 3; Qwen2 uses \p{N})
//   o200k  [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]*[Ll Lm Lo M]+(?i:'s|...)?|
//          [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]+[Ll Lm Lo M]*(?i:'s|...)?|\p{N}{1,3}|
//          ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Invalid UTF-8 bytes count as "other" characters (neither letter, number nor space).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack::tokenizer {

enum class ScannerKind { kGpt2, kCl100k, kO200k };

struct ScannerSpec {
  ScannerKind kind = ScannerKind::kCl100k;
  int max_digits = 3;  // cl100k/o200k \p{N}{1,3}; 1 for Qwen2's \p{N}; unused by gpt2
  bool operator==(const ScannerSpec&) const = default;
};

// The regex each scanner implements (the form in shared/peers/tokenizers/encodings.json).
std::string scanner_pattern(const ScannerSpec& spec);

// The scanner that implements `pattern`, if it is one of the known spellings (including the
// possessive forms current tiktoken uses and the tokenizer.json forms of Llama 3 and Qwen2).
std::optional<ScannerSpec> scanner_for_pattern(std::string_view pattern);

// Splits text into pieces; appends the end offset of each piece to `ends` (the first piece
// starts at 0, each next one where the previous ended; the last ends at text.size()).
void scan_pieces(const ScannerSpec& spec, std::string_view text, std::vector<uint32_t>& ends);

}  // namespace lmstack::tokenizer
