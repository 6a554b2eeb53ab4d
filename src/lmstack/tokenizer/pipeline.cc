// Normalizer and pre-tokenizer steps (see pipeline.h). Semantics follow Hugging Face
// tokenizers: each step splits every piece the previous step produced.
#include "lmstack/tokenizer/pipeline.h"

#include <algorithm>
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

// One entry of the list `tokenizers` folds: a match of the pattern or a gap between matches.
struct Item {
  uint32_t b, e;
  bool match;
};

// Matches and gaps in order, as Pattern::find_matches builds them (empty matches stay: they
// separate their neighbours; an empty text has no items).
std::vector<Item> to_items(std::string_view text, const Ranges& matches, bool invert) {
  std::vector<Item> items;
  uint32_t prev = 0;
  for (auto [b, e] : matches) {
    if (b != prev) items.push_back({prev, b, invert});
    items.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != text.size()) items.push_back({prev, static_cast<uint32_t>(text.size()), invert});
  return items;
}

// Folds items by a SplitDelimiterBehavior (tokenizers NormalizedString::split); returns the
// kept ranges (`match` now means "remove").
std::vector<Item> fold(std::vector<Item> items, SplitBehavior behavior) {
  std::vector<Item> acc;
  bool previous_match = false;
  auto glue = [&](const Item& it, bool glue_if) {
    if (glue_if && !acc.empty())
      acc.back().e = it.e;
    else
      acc.push_back({it.b, it.e, false});
    previous_match = it.match;
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (Item& it : items) it.match = false;
      return items;
    case SplitBehavior::kRemoved:
      return items;
    case SplitBehavior::kContiguous:
      for (const Item& it : items) glue(it, it.match == previous_match);
      return acc;
    case SplitBehavior::kMergedWithPrevious:
      for (const Item& it : items) glue(it, it.match && !previous_match);
      return acc;
    case SplitBehavior::kMergedWithNext:  // the same fold from the right
      for (auto it = items.rbegin(); it != items.rend(); ++it) {
        if (it->match && !previous_match && !acc.empty())
          acc.back().b = it->b;
        else
          acc.push_back({it->b, it->e, false});
        previous_match = it->match;
      }
      std::reverse(acc.begin(), acc.end());
      return acc;
  }
  return acc;
}

// Applies a split (matches, behavior, invert) to `text`; appends the non-empty kept pieces.
void split_by(std::string_view text, const Ranges& matches, SplitBehavior behavior, bool invert,
              std::vector<std::string>& out) {
  for (const Item& it : fold(to_items(text, matches, invert), behavior))
    if (!it.match && it.e > it.b) out.emplace_back(text.substr(it.b, it.e - it.b));
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

PreTokenizerStep make_regex_step(const std::string& pattern, SplitBehavior behavior, bool invert) {
  PreTokenizerStep step;
  step.regex = std::make_shared<RegexSplitter>(pattern);
  step.behavior = behavior;
  step.invert = invert;
  return step;
}

TextPipeline::TextPipeline(std::vector<NormalizerStep> normalizer,
                           std::vector<PreTokenizerStep> steps)
    : normalizer_(std::move(normalizer)), steps_(std::move(steps)) {
  // A GPT-2 style ByteLevel(use_regex) is the GPT-2 scanner; a plain ByteLevel is a no-op.
  for (PreTokenizerStep& s : steps_)
    if (s.kind == PreTokenizerStep::Kind::kByteLevel && s.use_regex)
      s.scanner = ScannerSpec{ScannerKind::kGpt2, 0};
  fast_ = true;
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
    for (auto [b, e] : m) {  // an empty match is a split point
      if (b > pos) ends.push_back(pos = b);
      if (e > pos) ends.push_back(pos = e);
    }
    if (pos < text.size()) ends.push_back(static_cast<uint32_t>(text.size()));
  }
}

void TextPipeline::normalize(std::string_view text, std::string& out) const {
  out.assign(text);
  for (const NormalizerStep& n : normalizer_) apply_normalizer(n, out);
}

void TextPipeline::split(std::string_view text, bool at_input_start,
                         std::vector<std::string>& pieces) const {
  if (text.empty()) return;
  std::vector<std::string> cur{std::string(text)}, next;
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
