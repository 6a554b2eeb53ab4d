// Parser for the Jinja subset of chat templates: turns the token stream of jinja_lexer.h into
// the tree of jinja_ast.h, with jinja2's operator precedence (or < and < not < comparisons <
// + - < ~ < * / // % < ** < unary < filters/tests/calls < attribute/subscript). Tags, filters
// and tests outside the subset are rejected here, before any render:
//   FormatError "<name>:<line>:<col>: unsupported construct '<what>'".
#pragma once

#include <string>
#include <vector>

#include "lmstack/tokenizer/jinja_ast.h"
#include "lmstack/tokenizer/jinja_lexer.h"

namespace lmstack::tokenizer::jinja {

// Parses a whole template. Throws FormatError with name, line and column on any syntax error.
Body parse_template(const std::vector<Token>& tokens, const std::string& name);

}  // namespace lmstack::tokenizer::jinja
