// Unicode class lookup: a two-stage table (256-code-point blocks, identical blocks shared)
// built once from the generated ranges in unicode_tables.cc.
#include "lmstack/tokenizer/unicode.h"

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lmstack::tokenizer {
namespace detail {
extern const UnicodeRange kUnicodeRanges[];
extern const int kNumUnicodeRanges;
extern const CaseFold kContractionFolds[];
extern const int kNumContractionFolds;
}  // namespace detail

namespace {

constexpr uint32_t kNumBlocks = 0x110000 >> 8;

struct ClassTable {
  uint16_t stage1[kNumBlocks];
  std::vector<uint8_t> stage2;  // 256 flags per distinct block

  ClassTable() {
    std::vector<uint8_t> flat(0x110000, 0);
    for (int i = 0; i < detail::kNumUnicodeRanges; ++i) {
      const auto& r = detail::kUnicodeRanges[i];
      std::memset(flat.data() + r.first, r.flags, r.last - r.first + 1);
    }
    std::map<std::string, uint16_t> seen;
    for (uint32_t b = 0; b < kNumBlocks; ++b) {
      std::string block(reinterpret_cast<const char*>(flat.data()) + (b << 8), 256);
      auto [it, inserted] = seen.emplace(block, static_cast<uint16_t>(seen.size()));
      if (inserted) stage2.insert(stage2.end(), block.begin(), block.end());
      stage1[b] = it->second;
    }
  }
};

const ClassTable& table() {
  static const auto t = std::make_unique<ClassTable>();
  return *t;
}

}  // namespace

uint8_t char_class(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  const ClassTable& t = table();
  return t.stage2[(static_cast<size_t>(t.stage1[cp >> 8]) << 8) | (cp & 0xFF)];
}

char contraction_fold(uint32_t cp) {
  for (int i = 0; i < detail::kNumContractionFolds; ++i)
    if (detail::kContractionFolds[i].cp == cp) return detail::kContractionFolds[i].letter;
  return 0;
}

size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const Utf8Char c = decode_utf8(p + i, s.size() - i);
    if (c.cp == kInvalidCodePoint) return i;
    i += c.len;
  }
  return s.size();
}

bool is_valid_utf8(std::string_view s) { return first_invalid_utf8(s) == s.size(); }

size_t count_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = decode_utf8(p + i, s.size() - i);
    n += c.cp == kInvalidCodePoint;
    i += c.len;
  }
  return n;
}

size_t incomplete_utf8_suffix(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const uint8_t b = p[s.size() - k];
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: the lead is further back
    const size_t need = (b >= 0xC2 && b <= 0xDF)   ? 2
                        : (b >= 0xE0 && b <= 0xEF) ? 3
                        : (b >= 0xF0 && b <= 0xF4) ? 4
                                                   : 0;
    if (need <= k) return 0;  // complete, or not a lead byte
    if (k >= 2) {             // the second byte's range depends on the lead (no overlongs,
      const uint8_t c = p[s.size() - k + 1];  // surrogates or code points above U+10FFFF)
      const uint8_t lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
      const uint8_t hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
      if (c < lo || c > hi) return 0;
    }
    return k;
  }
  return 0;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string replace_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Char c = decode_utf8(p + i, s.size() - i);
    if (c.cp == kInvalidCodePoint)
      append_utf8(out, 0xFFFD);
    else
      out.append(s.data() + i, c.len);
    i += c.len;
  }
  return out;
}

bool is_cjk(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x323AF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0xAC00 && cp <= 0xD7AF);
}

}  // namespace lmstack::tokenizer
