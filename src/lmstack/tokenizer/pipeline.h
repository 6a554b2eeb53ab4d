// The text -> pieces half of a tokenizer as Hugging Face's tokenizer.json declares it: a
// normalizer (normalizer.h) and a pre-tokenizer sequence. Every pre-tokenizer `tokenizers` has
// for BPE models reduces to four step kinds: Split (a regex, scanner or string with a
// SplitDelimiterBehavior and `invert`: also Whitespace, WhitespaceSplit, Punctuation,
// CharDelimiterSplit and BertPreTokenizer), ByteLevel, Digits and Metaspace. Known split
// regexes run on the hand-written scanners (scanners.h), any other on PCRE2
// (regex_splitter.h). Splitting follows tokenizers/src/tokenizer/normalizer.rs `split`
// exactly: matches and the gaps between them become a list of (range, is_match) items, empty
// matches included, and the behavior folds neighbours (MergedWithNext glues one match to the
// next item, not a run of matches).
//
// When the pre-tokenizer is one isolating split over the (normalized) bytes (tiktoken files,
// GPT-2, Llama 3, Qwen2 and most byte-level tokenizer.json files), split_fast() returns piece
// boundaries without copying; otherwise split() builds the pieces as strings.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/tokenizer/normalizer.h"
#include "lmstack/tokenizer/regex_splitter.h"
#include "lmstack/tokenizer/scanners.h"

namespace lmstack::tokenizer {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kDigits, kMetaspace };
  Kind kind = Kind::kSplit;
  // kSplit: exactly one of scanner / regex / literal is set.
  std::optional<ScannerSpec> scanner;
  std::shared_ptr<const RegexSplitter> regex;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel (the byte -> unicode mapping itself is a no-op: lmstack keeps raw bytes)
  bool add_prefix_space = false;
  bool use_regex = false;
  // kDigits
  bool individual_digits = false;
  // kMetaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;
};

// Replaces every occurrence of `from` (non-empty) in s.
void replace_all(std::string& s, std::string_view from, std::string_view to);

// A split step that runs the scanner or regex `pattern` and isolates its matches.
PreTokenizerStep make_split_step(const std::string& pattern);
// A split step on a PCRE2 pattern used as written (no scanner, no Oniguruma translation
// beyond regex_splitter.h's), with the given behavior.
PreTokenizerStep make_regex_step(const std::string& pattern, SplitBehavior behavior,
                                 bool invert = false);

class TextPipeline {
 public:
  TextPipeline() = default;
  TextPipeline(std::vector<NormalizerStep> normalizer, std::vector<PreTokenizerStep> steps);

  bool has_fast_path() const { return fast_; }
  bool has_normalizer() const { return !normalizer_.empty(); }
  // Runs the normalizer on `text` (one section between added tokens) into `out`.
  void normalize(std::string_view text, std::string& out) const;
  // Fast path only: appends the end offset of each piece of (normalized) `text` to `ends`.
  void split_fast(std::string_view text, std::vector<uint32_t>& ends) const;
  // General path: appends the pieces of (normalized) `text`; at_input_start says whether it
  // begins the whole input (Metaspace prepend_scheme "first").
  void split(std::string_view text, bool at_input_start, std::vector<std::string>& pieces) const;

 private:
  std::vector<NormalizerStep> normalizer_;
  std::vector<PreTokenizerStep> steps_;
  bool fast_ = true;
  int fast_split_ = -1;  // index of the one split step of the fast path, or -1
};

}  // namespace lmstack::tokenizer
