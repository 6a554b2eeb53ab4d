// The normalizer half of a Hugging Face tokenizer.json pipeline: the steps `tokenizers` runs on
// each section of the input between added tokens, before pre-tokenization. Unicode
// normalization (NFC, NFD, NFKC, NFKD) and lowercase mapping come from utf8proc (Debian
// libutf8proc, Unicode 13 in Debian 12's 2.6; `tokenizers` uses the Rust crates'
// tables, a later Unicode version: characters assigned after Unicode 13 may differ).
//
// Invalid UTF-8 (possible here, never in `tokenizers`, whose input is a Rust string) passes
// through every step unchanged; the valid runs around it are normalized.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "lmstack/tokenizer/regex_splitter.h"

namespace lmstack::tokenizer {

struct NormalizerStep {
  enum class Kind {
    kPrepend,  // `text` before a non-empty section
    kReplace,  // every `text` (or `regex` match) -> `replacement`
    kNfc,      // Unicode normalization forms (UAX #15)
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,    // Rust char::to_lowercase, character by character (no final-sigma rule)
    kStrip,        // White_Space off the left and/or right end
    kStripAccents  // drops combining marks (M: Mn, Mc, Me), as `tokenizers` StripAccents does
  };
  Kind kind;
  std::string text;         // kPrepend: prepended text; kReplace: the string looked for
  std::string replacement;  // kReplace only
  std::shared_ptr<const RegexSplitter> regex = nullptr;  // kReplace with a Regex pattern
  bool strip_left = true, strip_right = true;            // kStrip
};

// Applies one step to `s` in place.
void apply_normalizer(const NormalizerStep& step, std::string& s);

// True when every byte is ASCII (NFC/NFD/NFKC/NFKD leave such text unchanged).
bool is_ascii(std::string_view s);

}  // namespace lmstack::tokenizer
