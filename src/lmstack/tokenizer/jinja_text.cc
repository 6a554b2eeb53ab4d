// Python-compatible string helpers (see jinja_text.h). Whitespace follows str.isspace();
// float repr follows CPython's float_repr_style "short" (shortest round-trip digits, fixed
// notation for decimal exponents in [-4, 16)).
#include "lmstack/tokenizer/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "lmstack/core/error.h"

namespace lmstack::tokenizer::jinja {
namespace {

// Length of the UTF-8 sequence starting at s[i], or 0 if it is not a valid one.
size_t utf8_sequence(std::string_view s, size_t i, char32_t* out) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *out = b0;
    return 1;
  }
  size_t n = b0 >= 0xF0 && b0 < 0xF5 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC2 && b0 < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  char32_t c = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  const bool overlong = (n == 3 && c < 0x800) || (n == 4 && c < 0x10000);
  if (overlong || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return 0;
  *out = c;
  return n;
}

bool is_ascii_alpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char32_t to_upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t to_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const size_t n = utf8_sequence(s, i, &c);
    if (n == 0) {
      out.push_back(0xDC00 + static_cast<unsigned char>(s[i]));
      ++i;
    } else {
      out.push_back(c);
      i += n;
    }
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c >= 0xDC80 && c <= 0xDCFF) {
      out.push_back(static_cast<char>(c - 0xDC00));
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    const size_t len = utf8_sequence(s, i, &c);
    i += len == 0 ? 1 : len;
    ++n;
  }
  return n;
}

bool is_py_space(char32_t c) {
  if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return true;
  switch (c) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string py_strip(std::string_view s, bool left, bool right,
                     const std::optional<std::string>& chars) {
  const std::u32string cps = decode_utf8(s);
  const std::u32string set = chars ? decode_utf8(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_py_space(c);
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strip_it(cps[begin])) ++begin;
  while (right && end > begin && strip_it(cps[end - 1])) --end;
  return encode_utf8(std::u32string_view(cps).substr(begin, end - begin));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) throw_error<Error>("empty separator");
    size_t start = 0;
    for (size_t pos; (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) &&
                     (pos = s.find(*sep, start)) != std::string_view::npos;
         start = pos + sep->size())
      parts.emplace_back(s.substr(start, pos - start));
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::u32string cps = decode_utf8(s);
  size_t i = 0;
  while (true) {
    while (i < cps.size() && is_py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t end = cps.size();
      while (end > i && is_py_space(cps[end - 1])) --end;
      parts.push_back(encode_utf8(std::u32string_view(cps).substr(i, end - i)));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_py_space(cps[j])) ++j;
    parts.push_back(encode_utf8(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return parts;
}

std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                       int64_t count) {
  std::string out;
  if (old_text.empty()) {  // Python inserts `new` before every code point and at the end
    const std::u32string cps = decode_utf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (i < cps.size()) out += encode_utf8(std::u32string_view(cps).substr(i, 1));
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  for (size_t pos;
       (count < 0 || done < count) && (pos = s.find(old_text, start)) != std::string_view::npos;
       ++done) {
    out.append(s.substr(start, pos - start));
    out.append(new_text);
    start = pos + old_text.size();
  }
  out.append(s.substr(start));
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\n' && s[i] != '\r') continue;
    lines.emplace_back(s.substr(start, i - start));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(to_upper(static_cast<unsigned char>(c)));
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(to_lower(static_cast<unsigned char>(c)));
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& ch : out) {
    const char32_t c = static_cast<unsigned char>(ch);
    const bool alpha = is_ascii_alpha(c);
    if (alpha) ch = static_cast<char>(prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = alpha;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(to_upper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += encode_utf8(std::u32string(1, c));
    }
  }
  out += quote;
  return out;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // e.g. "-1.2345e+17"
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const int decpt = exponent + 1;  // position of the decimal point in `digits`
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
             digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

}  // namespace lmstack::tokenizer::jinja
