// The text -> pieces half of a tokenizer as Hugging Face's tokenizer.json declares it: a
// normalizer (Prepend, Replace, Sequence) and a pre-tokenizer sequence (Split with a regex
// or string, ByteLevel, Digits, Metaspace). Known split regexes run on the hand-written
// scanners (scanners.h), any other on PCRE2 (regex_splitter.h).
//
// When there is no normalizer and the pre-tokenizer is one isolating split over the raw bytes
// (tiktoken files, GPT-2, Llama 3 and most byte-level tokenizer.json files), split_fast()
// returns piece boundaries without copying; otherwise split() builds the pieces as strings.
//
// Thread safety: immutable after construction.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/tokenizer/regex_splitter.h"
#include "lmstack/tokenizer/scanners.h"

namespace lmstack::tokenizer {

struct NormalizerStep {
  enum class Kind { kPrepend, kReplace };
  Kind kind;
  std::string text;         // prepended text, or the string Replace looks for
  std::string replacement;  // Replace only
};

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

class TextPipeline {
 public:
  TextPipeline() = default;
  TextPipeline(std::vector<NormalizerStep> normalizer, std::vector<PreTokenizerStep> steps);

  bool has_fast_path() const { return fast_; }
  // Fast path only: appends the end offset of each piece of `text` to `ends`.
  void split_fast(std::string_view text, std::vector<uint32_t>& ends) const;
  // General path: normalizes `text` (one section between added tokens; at_input_start says
  // whether it begins the whole input) and appends its pieces.
  void split(std::string_view text, bool at_input_start, std::vector<std::string>& pieces) const;

 private:
  std::vector<NormalizerStep> normalizer_;
  std::vector<PreTokenizerStep> steps_;
  bool fast_ = true;
  int fast_split_ = -1;  // index of the one split step of the fast path, or -1
};

}  // namespace lmstack::tokenizer
