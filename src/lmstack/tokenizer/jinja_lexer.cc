// Jinja lexer (see jinja_lexer.h). Follows jinja2's lexer rules for the environment Hugging
// Face uses: a block or comment end eats one following newline (trim_blocks); a block or
// comment start alone on its line eats the indentation before it (lstrip_blocks); `-` eats
// all whitespace on its side; `+` disables both. Brackets nest, so `}}` inside a dict literal
// does not close a tag.
#include "lmstack/tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string_view>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/jinja_text.h"

namespace lmstack::tokenizer::jinja {
namespace {

// Newlines become \n and one trailing newline is dropped (keep_trailing_newline=False).
std::string normalize_source(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out += '\n';
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& name) : src_(std::move(source)), name_(name) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_text_and_tag();
    tokens_.push_back({TokenType::kEnd, "", location(src_.size())});
    return std::move(tokens_);
  }

 private:
  Location location(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void error(size_t offset, const std::string& what) const {
    const Location loc = location(offset);
    throw_error<FormatError>("{}:{}:{}: {}", name_, loc.line, loc.column, what);
  }

  // Length of the Python whitespace character at `at`, or 0.
  size_t space_at(size_t at) const {
    const auto c = static_cast<unsigned char>(src_[at]);
    if (c < 0x80) return is_py_space(c) ? 1 : 0;
    const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    const std::u32string cp = decode_utf8(std::string_view(src_).substr(at, n));
    return cp.size() == 1 && is_py_space(cp[0]) ? n : 0;
  }

  void skip_spaces_after_tag() {
    for (size_t n; pos_ < src_.size() && (n = space_at(pos_)) > 0;) pos_ += n;
  }

  void emit(TokenType type, std::string text, size_t offset) {
    tokens_.push_back({type, std::move(text), location(offset)});
  }

  // Emits the text up to the next tag, trimmed by the tag's rules, then lexes the tag.
  void lex_text_and_tag() {
    size_t tag = pos_;
    while ((tag = src_.find('{', tag)) != std::string::npos) {
      const char next = tag + 1 < src_.size() ? src_[tag + 1] : '\0';
      if (next == '{' || next == '%' || next == '#') break;
      ++tag;
    }
    if (tag == std::string::npos) {
      emit(TokenType::kText, src_.substr(pos_), pos_);
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                          ? src_[tag + 2]
                          : '\0';
    std::string text = src_.substr(pos_, tag - pos_);
    if (sign == '-') {
      text = py_strip(text, false, true);
    } else if (sign != '+' && kind != '{') {           // lstrip_blocks
      const size_t line_begin = text.rfind('\n') + 1;  // npos + 1 == 0
      const bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
      const std::string tail = text.substr(line_begin);
      if ((line_begin > 0 || line_starting) && !tail.empty() && py_strip(tail, true, true).empty())
        text.resize(line_begin);
    }
    if (!text.empty()) emit(TokenType::kText, std::move(text), pos_);
    pos_ = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      lex_comment(tag);
    } else {
      emit(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "", tag);
      lex_tag(kind == '{', tag);
    }
  }

  void lex_comment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) error(tag, "unterminated comment '{#'");
    const char sign =
        end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    if (sign == '-') {
      skip_spaces_after_tag();
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
    }
  }

  // Lexes expression tokens until the tag's end delimiter at bracket depth 0.
  void lex_tag(bool is_variable, size_t tag) {
    int depth = 0;
    const char closer = is_variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && std::strchr(" \t\n\r\f\v", src_[pos_]) && src_[pos_]) ++pos_;
      if (pos_ >= src_.size())
        error(tag, is_variable ? "unterminated tag '{{'" : "unterminated tag '{%'");
      if (depth == 0 && lex_tag_end(is_variable, closer)) return;
      const char c = src_[pos_];
      if (c == '\'' || c == '"') {
        lex_string();
      } else if (c >= '0' && c <= '9') {
        lex_number();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        const size_t start = pos_;
        while (pos_ < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_'))
          ++pos_;
        emit(TokenType::kName, src_.substr(start, pos_ - start), start);
        if (!is_variable && tokens_.size() >= 2 &&
            tokens_[tokens_.size() - 2].type == TokenType::kBlockBegin &&
            tokens_.back().text == "raw")
          error(start, "unsupported construct 'raw'");
      } else {
        lex_operator(depth);
      }
    }
  }

  bool lex_tag_end(bool is_variable, char closer) {
    const std::string_view rest = std::string_view(src_).substr(pos_);
    const char sign =
        !rest.empty() && (rest[0] == '-' || (!is_variable && rest[0] == '+')) ? rest[0] : '\0';
    const size_t at = sign ? 1 : 0;
    if (rest.size() < at + 2 || rest[at] != closer || rest[at + 1] != '}') return false;
    emit(is_variable ? TokenType::kVarEnd : TokenType::kBlockEnd, "", pos_);
    pos_ += at + 2;
    if (sign == '-') {
      skip_spaces_after_tag();
    } else if (!is_variable && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;  // trim_blocks
    }
    return true;
  }

  void lex_operator(int& depth) {
    static constexpr const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    const size_t start = pos_;
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        emit(TokenType::kOperator, op, start);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    if (!std::strchr("+-*/%~<>=.:|,()[]{}", c))
      error(pos_, fmt::format("unexpected character '{}'", c));
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) error(pos_, fmt::format("unexpected '{}'", c));
      --depth;
    }
    emit(TokenType::kOperator, std::string(1, c), start);
    ++pos_;
  }

  void lex_number() {
    const size_t start = pos_;
    std::string digits;
    auto take_digits = [&] {
      while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                                    (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                     std::isdigit(static_cast<unsigned char>(src_[pos_ + 1])))))
        if (src_[pos_++] != '_') digits += src_[pos_ - 1];
    };
    take_digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      digits += src_[pos_++];
      take_digits();
      is_float = true;
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t at = pos_ + 1;
      if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
      if (at < src_.size() && std::isdigit(static_cast<unsigned char>(src_[at]))) {
        digits += src_.substr(pos_, at - pos_);
        pos_ = at;
        take_digits();
        is_float = true;
      }
    }
    emit(is_float ? TokenType::kFloat : TokenType::kInt, digits, start);
  }

  void lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) error(start, "unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) error(start, "unterminated string literal");
      decode_escape(value);
    }
    emit(TokenType::kString, std::move(value), start);
  }

  // Decodes the escape after a backslash as Python's "unicode-escape" codec does.
  void decode_escape(std::string& value) {
    const char e = src_[pos_++];
    static constexpr std::string_view kSimple = "\\\\''\"\"a\ab\bf\fn\nr\rt\tv\v";
    for (size_t i = 0; i < kSimple.size(); i += 2) {
      if (kSimple[i] == e) {
        value += kSimple[i + 1];
        return;
      }
    }
    if (e == '\n') return;  // line continuation
    if (e >= '0' && e <= '7') {
      int code = e - '0';
      for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
        code = code * 8 + (src_[pos_++] - '0');
      value += encode_utf8(std::u32string(1, static_cast<char32_t>(code)));
      return;
    }
    const int hex_digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (hex_digits == 0) {
      if (e == 'N') error(pos_ - 2, "unsupported construct '\\N{...}' escape");
      value += '\\';
      value += e;
      return;
    }
    if (pos_ + static_cast<size_t>(hex_digits) > src_.size() ||
        !std::all_of(src_.begin() + static_cast<std::ptrdiff_t>(pos_),
                     src_.begin() + static_cast<std::ptrdiff_t>(pos_) + hex_digits,
                     [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
      error(pos_ - 2, fmt::format("truncated \\{} escape", e));
    const auto code = std::stoul(src_.substr(pos_, static_cast<size_t>(hex_digits)), nullptr, 16);
    if (code > 0x10FFFF) error(pos_ - 2, "escape outside the Unicode range");
    pos_ += static_cast<size_t>(hex_digits);
    value += encode_utf8(std::u32string(1, static_cast<char32_t>(code)));
  }

  std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& name) {
  return Lexer(normalize_source(source), name).run();
}

}  // namespace lmstack::tokenizer::jinja
