// Python-compatible string helpers for the Jinja interpreter: UTF-8 <-> code points, and the
// str methods chat templates call (strip, split, replace, title, ...), with Python's rules
// for whitespace and empty separators. Case mapping covers ASCII letters only (documented in
// chat_template.h). Not a general Unicode library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack::tokenizer::jinja {

// Decodes UTF-8 into code points. An invalid byte b becomes U+DC00+b (Python's
// "surrogateescape"), so encode_utf8(decode_utf8(s)) == s for every byte string.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
// Number of code points (Python len()).
size_t utf8_length(std::string_view s);
// True for the characters Python's str.isspace() accepts.
bool is_py_space(char32_t c);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace, else any code point in `chars`.
std::string py_strip(std::string_view s, bool left, bool right,
                     const std::optional<std::string>& chars = std::nullopt);
// str.split(sep, maxsplit): sep absent splits on whitespace runs; maxsplit < 0 is unlimited.
// An empty sep throws (Python's ValueError).
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code
// points, as Python does.
std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                       int64_t count);
// str.splitlines() (without keepends) over \n, \r\n and \r.
std::vector<std::string> py_splitlines(std::string_view s);
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
// str.title(): a letter after a non-letter is upper-cased, every other letter lower-cased.
std::string py_title(std::string_view s);
// str.capitalize(): first character upper-cased, the rest lower-cased.
std::string py_capitalize(std::string_view s);
// Escapes for a Python repr() of a string, choosing quotes as Python does.
std::string py_string_repr(std::string_view s);
// Python repr() of a float: shortest round-trip digits, "1.0", "1e+16", "1e-05", "inf", "nan".
std::string py_float_repr(double v);

}  // namespace lmstack::tokenizer::jinja
