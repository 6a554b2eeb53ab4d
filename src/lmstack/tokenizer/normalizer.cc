// Normalizer steps (see normalizer.h), each following the `tokenizers` normalizer of the same
// name (tokenizers/src/normalizers/{unicode,utils,strip,replace,prepend}.rs).
#include "lmstack/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/pipeline.h"
#include "lmstack/tokenizer/unicode.h"

namespace lmstack::tokenizer {
namespace {

// Runs fn(valid_run, out) over each maximal valid UTF-8 run of s; invalid bytes are copied.
template <class Fn>
std::string map_valid_runs(std::string_view s, Fn&& fn) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t bad = pos + first_invalid_utf8(s.substr(pos));
    if (bad > pos) fn(s.substr(pos, bad - pos), out);
    if (bad == s.size()) break;
    out += s[bad];
    pos = bad + 1;
  }
  return out;
}

// UAX #15 normalization of a valid UTF-8 run with utf8proc.
void normalize_form(std::string_view run, int options, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                   static_cast<utf8proc_ssize_t>(run.size()), &result,
                   static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) {
    std::free(result);
    throw_error<RequestError>("Unicode normalization failed: {}", utf8proc_errmsg(n));
  }
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
}

// Characters that normalization leaves alone whatever surrounds them: no decomposition,
// combining class 0, never the second character of a composition (ASCII, CJK ideographs and,
// for NFC/NFD, the fullwidth ASCII forms, which decompose only under compatibility).
bool inert(uint32_t cp, bool compat) {
  return cp < 0x80 || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
         (!compat && cp >= 0xFF01 && cp <= 0xFF5E);
}

// Normalizes only the runs of other characters, each with the inert character before it (it
// may compose with the run: e + U+0301): UAX #15 normalization is closed under splitting at
// such characters, and utf8proc is slow next to copying. Invalid bytes are copied and cut runs.
std::string normalize_runs(std::string_view s, int options) {
  const bool compat = (options & UTF8PROC_COMPAT) != 0;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  std::string out;
  out.reserve(s.size());
  size_t i = 0, prev_inert_len = 0;
  while (i < s.size()) {
    const Utf8Char c = decode_utf8(p + i, s.size() - i);
    if (c.cp == kInvalidCodePoint || inert(c.cp, compat)) {
      out.append(s.substr(i, c.len));
      prev_inert_len = c.cp == kInvalidCodePoint ? 0 : c.len;
      i += c.len;
      continue;
    }
    const size_t b = i - prev_inert_len;
    out.resize(out.size() - prev_inert_len);
    size_t e = i;
    while (e < s.size()) {
      const Utf8Char d = decode_utf8(p + e, s.size() - e);
      if (d.cp == kInvalidCodePoint || inert(d.cp, compat)) break;
      e += d.len;
    }
    normalize_form(s.substr(b, e - b), options, out);
    i = e;
    prev_inert_len = 0;
  }
  return out;
}

// Calls fn(code_point, out) for each character of a valid UTF-8 run.
template <class Fn>
void for_each_char(std::string_view run, std::string& out, Fn&& fn) {
  const auto* p = reinterpret_cast<const uint8_t*>(run.data());
  for (size_t i = 0; i < run.size();) {
    const Utf8Char c = decode_utf8(p + i, run.size() - i);
    fn(c.cp, out);
    i += c.len;
  }
}

void lowercase(uint32_t cp, std::string& out) {
  if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping (SpecialCasing)
    out += "i\xCC\x87";
    return;
  }
  append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

bool is_white_space(std::string_view s, size_t i, size_t* len) {
  const Utf8Char c = decode_utf8(reinterpret_cast<const uint8_t*>(s.data()) + i, s.size() - i);
  *len = c.len;
  return (char_class(c.cp) & kClassSpace) != 0;
}

void strip(std::string& s, bool left, bool right) {
  size_t b = 0, e = s.size(), len = 0;
  if (left)
    while (b < e && is_white_space(s, b, &len)) b += len;
  if (right) {
    while (e > b) {
      size_t start = e - 1;  // back to the lead byte of the last character
      while (start > b && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
      if (!is_white_space(s, start, &len) || start + len != e) break;
      e = start;
    }
  }
  s = s.substr(b, e - b);
}

void replace_regex(const RegexSplitter& regex, const std::string& to, std::string& s) {
  std::vector<std::pair<uint32_t, uint32_t>> m;
  regex.find_all(s, m);
  std::string out;
  uint32_t pos = 0;
  for (auto [b, e] : m) {
    out.append(s, pos, b - pos).append(to);
    pos = e;
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

}  // namespace

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  return true;
}

void apply_normalizer(const NormalizerStep& step, std::string& s) {
  using K = NormalizerStep::Kind;
  auto form = [&s](int options) {
    if (!is_ascii(s)) s = normalize_runs(s, options);
  };
  switch (step.kind) {
    case K::kPrepend:
      if (!s.empty()) s.insert(0, step.text);
      break;
    case K::kReplace:
      if (step.regex)
        replace_regex(*step.regex, step.replacement, s);
      else
        replace_all(s, step.text, step.replacement);
      break;
    case K::kNfc:
      form(UTF8PROC_COMPOSE);
      break;
    case K::kNfd:
      form(UTF8PROC_DECOMPOSE);
      break;
    case K::kNfkc:
      form(UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
      break;
    case K::kNfkd:
      form(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
      break;
    case K::kLowercase:
      s = map_valid_runs(
          s, [](std::string_view run, std::string& out) { for_each_char(run, out, lowercase); });
      break;
    case K::kStrip:
      strip(s, step.strip_left, step.strip_right);
      break;
    case K::kStripAccents:
      s = map_valid_runs(s, [](std::string_view run, std::string& out) {
        for_each_char(run, out, [](uint32_t cp, std::string& o) {
          const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
          if (cat != UTF8PROC_CATEGORY_MN && cat != UTF8PROC_CATEGORY_MC &&
              cat != UTF8PROC_CATEGORY_ME)
            append_utf8(o, cp);
        });
      });
      break;
  }
}

}  // namespace lmstack::tokenizer
