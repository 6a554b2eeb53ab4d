// Normalizer and pre-tokenizer steps (see pipeline.h). Semantics follow Hugging Face
// tokenizers: each step splits every piece the previous step produced.
#include "lmstack/tokenizer/pipeline.h"

#include <utility>

#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// Matches of a split step in `text`, as [begin, end) ranges, leftmost first.
Ranges find_matches(const PreTokenizerStep& step, std::string_view text) {
  Ranges m;
  if (step.scanner) {
    std::vector<uint32_t> ends;
    scan_pieces(*step.scanner, text, ends);
    uint32_t b = 0;
    for (uint32_t e : ends) m.emplace_back(b, e), b = e;
  } else if (step.regex) {
    step.regex->find_all(text, m);
  } else if (!step.literal.empty()) {
    for (size_t p = 0; (p = text.find(step.literal, p)) != std::string_view::npos;
         p += step.literal.size())
      m.emplace_back(static_cast<uint32_t>(p), static_cast<uint32_t>(p + step.literal.size()));
  }
  return m;
}

// Applies a split behavior (Hugging Face SplitDelimiterBehavior) to matches in `text`.
void split_by(std::string_view text, const Ranges& matches, SplitBehavior behavior, bool invert,
              std::vector<std::string>& out) {
  struct Seg {
    uint32_t b, e;
    bool match;
  };
  std::vector<Seg> segs;
  uint32_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) segs.push_back({pos, b, invert});
    segs.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < text.size()) segs.push_back({pos, static_cast<uint32_t>(text.size()), invert});
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  bool glue_next = false;  // MergedWithNext: the previous match waits for the next segment
  for (const Seg& s : segs) {
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!s.match) pieces.emplace_back(s.b, s.e);
        break;
      case SplitBehavior::kIsolated:
        pieces.emplace_back(s.b, s.e);
        break;
      case SplitBehavior::kContiguous:
        if (s.match && !pieces.empty() && glue_next)
          pieces.back().second = s.e;
        else
          pieces.emplace_back(s.b, s.e);
        glue_next = s.match;
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (s.match && !pieces.empty())
          pieces.back().second = s.e;
        else
          pieces.emplace_back(s.b, s.e);
        break;
      case SplitBehavior::kMergedWithNext:
        if (glue_next)
          pieces.back().second = s.e;
        else
          pieces.emplace_back(s.b, s.e);
        glue_next = s.match;
        break;
    }
  }
  for (auto [b, e] : pieces) out.emplace_back(text.substr(b, e - b));
}

Ranges digit_matches(std::string_view text, bool individual) {
  Ranges m;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  for (uint32_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(s + i, text.size() - i);
    if (char_class(c.cp) & kClassNumber) {
      if (!individual && !m.empty() && m.back().second == i)
        m.back().second = i + c.len;
      else
        m.emplace_back(i, i + c.len);
    }
    i += c.len;
  }
  return m;
}

}  // namespace

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
    out.append(s, pos, hit - pos).append(to);
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

PreTokenizerStep make_split_step(const std::string& pattern) {
  PreTokenizerStep step;
  step.scanner = scanner_for_pattern(pattern);
  if (!step.scanner) step.regex = std::make_shared<RegexSplitter>(pattern);
  return step;
}

TextPipeline::TextPipeline(std::vector<NormalizerStep> normalizer,
                           std::vector<PreTokenizerStep> steps)
    : normalizer_(std::move(normalizer)), steps_(std::move(steps)) {
  // A GPT-2 style ByteLevel(use_regex) is the GPT-2 scanner; a plain ByteLevel is a no-op.
  for (PreTokenizerStep& s : steps_)
    if (s.kind == PreTokenizerStep::Kind::kByteLevel && s.use_regex)
      s.scanner = ScannerSpec{ScannerKind::kGpt2, 0};
  fast_ = normalizer_.empty();
  int num_splits = 0;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const PreTokenizerStep& s = steps_[i];
    const bool byte_level = s.kind == PreTokenizerStep::Kind::kByteLevel && !s.add_prefix_space;
    if (byte_level && !s.use_regex) continue;  // no-op on raw bytes
    const bool isolating_split = s.kind == PreTokenizerStep::Kind::kSplit &&
                                 s.behavior == SplitBehavior::kIsolated && !s.invert &&
                                 s.literal.empty();
    if (byte_level || isolating_split) {
      ++num_splits;
      fast_split_ = static_cast<int>(i);
    } else {
      fast_ = false;
    }
  }
  if (num_splits > 1) fast_ = false;
  if (!fast_) fast_split_ = -1;
}

void TextPipeline::split_fast(std::string_view text, std::vector<uint32_t>& ends) const {
  if (text.empty()) return;
  if (fast_split_ < 0) {
    ends.push_back(static_cast<uint32_t>(text.size()));
    return;
  }
  const PreTokenizerStep& s = steps_[fast_split_];
  if (s.scanner) {
    scan_pieces(*s.scanner, text, ends);
  } else {
    Ranges m;
    s.regex->find_all(text, m);
    uint32_t pos = 0;
    for (auto [b, e] : m) {
      if (b > pos) ends.push_back(b);
      ends.push_back(pos = e);
    }
    if (pos < text.size()) ends.push_back(static_cast<uint32_t>(text.size()));
  }
}

void TextPipeline::split(std::string_view text, bool at_input_start,
                         std::vector<std::string>& pieces) const {
  std::string normalized(text);
  for (const NormalizerStep& n : normalizer_) {
    if (n.kind == NormalizerStep::Kind::kPrepend && !normalized.empty())
      normalized.insert(0, n.text);
    else if (n.kind == NormalizerStep::Kind::kReplace)
      replace_all(normalized, n.text, n.replacement);
  }
  if (normalized.empty()) return;
  std::vector<std::string> cur{std::move(normalized)}, next;
  for (const PreTokenizerStep& s : steps_) {
    next.clear();
    for (size_t i = 0; i < cur.size(); ++i) {
      std::string& p = cur[i];
      switch (s.kind) {
        case PreTokenizerStep::Kind::kSplit:
          split_by(p, find_matches(s, p), s.behavior, s.invert, next);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (s.add_prefix_space && p[0] != ' ') p.insert(0, " ");
          if (s.use_regex)
            split_by(p, find_matches(s, p), SplitBehavior::kIsolated, false, next);
          else
            next.push_back(std::move(p));
          break;
        case PreTokenizerStep::Kind::kDigits:
          split_by(p, digit_matches(p, s.individual_digits), SplitBehavior::kIsolated, false, next);
          break;
        case PreTokenizerStep::Kind::kMetaspace: {
          replace_all(p, " ", s.replacement);
          const bool first = at_input_start && i == 0;
          if (p.rfind(s.replacement, 0) != 0 &&
              (s.prepend == PreTokenizerStep::Prepend::kAlways ||
               (s.prepend == PreTokenizerStep::Prepend::kFirst && first)))
            p.insert(0, s.replacement);
          if (s.split) {
            PreTokenizerStep lit;
            lit.literal = s.replacement;
            split_by(p, find_matches(lit, p), SplitBehavior::kMergedWithNext, false, next);
          } else {
            next.push_back(std::move(p));
          }
          break;
        }
      }
    }
    cur.swap(next);
  }
  for (std::string& p : cur)
    if (!p.empty()) pieces.push_back(std::move(p));
}

}  // namespace lmstack::tokenizer
