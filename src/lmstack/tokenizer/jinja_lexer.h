// Lexer for the Jinja subset of chat templates. It applies jinja2's whitespace rules as
// Hugging Face configures them (trim_blocks and lstrip_blocks on, `-`/`+` markers, newlines
// normalized to \n, one trailing newline dropped), so text tokens come out already trimmed.
// String literals are decoded with Python's escapes. Errors throw FormatError
// "<name>:<line>:<col>: <what>".
#pragma once

#include <string>
#include <vector>

namespace lmstack::tokenizer::jinja {

struct Location {
  int line = 1;
  int column = 1;  // 1-based, in bytes
};

enum class TokenType {
  kText,        // template text to output verbatim
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword
  kString,      // string literal; text is the decoded value
  kInt,         // integer literal; text holds the digits (underscores removed)
  kFloat,       // float literal; text as written (underscores removed)
  kOperator,    // + - * / // ** % ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,         // end of the template
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  Location loc;
};

// Splits `source` into tokens; the last one is kEnd. Throws FormatError naming `name`, line
// and column on an unterminated tag, comment or string, or a character outside the language.
std::vector<Token> tokenize(const std::string& source, const std::string& name);

}  // namespace lmstack::tokenizer::jinja
