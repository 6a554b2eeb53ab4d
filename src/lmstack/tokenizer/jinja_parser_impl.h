// Internal to the Jinja parser: the Parser class shared by jinja_parser.cc (statements) and
// jinja_parser_expr.cc (expressions). One Parser parses one token stream, front to back;
// errors throw FormatError "<name>:<line>:<col>: ...".
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/tokenizer/jinja_ast.h"
#include "lmstack/tokenizer/jinja_lexer.h"

namespace lmstack::tokenizer::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name)
      : tokens_(tokens), name_(name) {}

  Body parse_all() {
    Body body = parse_body({});
    if (peek().type != TokenType::kEnd) error(peek(), "unexpected tag");
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kOperator && peek(ahead).text == op;
  }
  bool is_name(const char* word, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::kName && peek(ahead).text == word;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* word) {
    if (!is_name(word)) return false;
    next();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TokenType::kEnd:
        return "end of template";
      case TokenType::kText:
        return "template text";
      case TokenType::kVarBegin:
        return "'{{'";
      case TokenType::kVarEnd:
        return "'}}'";
      case TokenType::kBlockBegin:
        return "'{%'";
      case TokenType::kBlockEnd:
        return "'%}'";
      case TokenType::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  [[noreturn]] void error(const Token& at, const std::string& what) const {
    throw_error<FormatError>("{}:{}:{}: {}", name_, at.loc.line, at.loc.column, what);
  }
  [[noreturn]] void error_at(Location loc, const std::string& what) const {
    throw_error<FormatError>("{}:{}:{}: {}", name_, loc.line, loc.column, what);
  }
  // Makes `node` at least one level deeper than `child`; fails past kMaxNesting. Chains
  // (`a ~ b ~ ...`, `x.a.b`, `f()()`, `x|f|g`) deepen the tree without recursing here, and a
  // few thousand links crashed the renderer (issue 13).
  void deepen(Expr& node, const Expr* child) const {
    if (child == nullptr) return;
    node.depth = std::max(node.depth, child->depth + 1);
    if (node.depth > kMaxNesting)
      error_at(node.loc,
               fmt::format("expression nests deeper than {} levels (kMaxNesting)", kMaxNesting));
  }
  void deepen(Expr& node, const Arguments& args) const {
    for (const auto& e : args.positional) deepen(node, e.get());
    for (const auto& [k, e] : args.keyword) deepen(node, e.get());
  }
  [[noreturn]] void unsupported(const Token& at, const std::string& what) const {
    error(at, "unsupported construct '" + what + "'");
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(peek(), fmt::format("expected '{}', got {}", op, describe(peek())));
  }
  void expect(TokenType type, const char* what) {
    if (peek().type != type)
      error(peek(), fmt::format("expected {}, got {}", what, describe(peek())));
    next();
  }
  std::string expect_name() {
    if (peek().type != TokenType::kName) error(peek(), "expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() { expect(TokenType::kBlockEnd, "'%}'"); }

  // ---- statements ----
  // Parses until a `{% <stop> %}` tag (left unconsumed) or the end of the template.
  Body parse_body(const std::set<std::string>& stop);

  // Consumes `{% name` and returns name (for end/elif/else tags).
  std::string take_tag();

  StmtPtr parse_statement();

  StmtPtr parse_if(Location loc);

  StmtPtr parse_for(Location loc);

  StmtPtr parse_set(Location loc);

  StmtPtr parse_macro(Location loc);

  StmtPtr parse_filter_block(Location loc);

  // ---- expressions, loosest first ----
  // An expression, or a tuple when commas follow (`{{ a, b }}`, `set x = 1, 2`).
  ExprPtr parse_tuple(bool with_cond = true);

  ExprPtr parse_expression(bool with_cond = true);

  ExprPtr make_binary(Location loc, BinaryOp op, ExprPtr lhs, ExprPtr rhs);

  ExprPtr parse_or();

  ExprPtr parse_and();

  ExprPtr parse_not();

  ExprPtr parse_compare();

  // One precedence level of left-associative operators.
  template <class Next>
  ExprPtr parse_level(const std::vector<std::pair<const char*, BinaryOp>>& ops, Next next_level) {
    ExprPtr lhs = next_level();
    while (true) {
      bool matched = false;
      for (const auto& [text, op] : ops) {
        if (!is_op(text)) continue;
        const Location loc = next().loc;
        lhs = make_binary(loc, op, std::move(lhs), next_level());
        matched = true;
        break;
      }
      if (!matched) return lhs;
    }
  }
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();

  ExprPtr parse_unary(bool with_filter);

  ExprPtr parse_primary();
  ExprPtr parse_collection(const char* close, bool is_dict, Location loc);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node, Location loc);
  ExprPtr parse_filter_chain(ExprPtr node);
  Arguments parse_call_args();

  const std::vector<Token>& tokens_;
  const std::string& name_;
  size_t pos_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;  // expression and statement recursion, bounded by kMaxNesting

 public:
  // Bounds recursion so a hostile template cannot overflow the stack while parsing or
  // rendering (evaluation recursion follows the tree's depth).
  static constexpr int kMaxNesting = 200;
  class NestingGuard {
   public:
    NestingGuard(Parser& parser, const Token& at) : parser_(parser) {
      if (++parser_.nesting_ > kMaxNesting)
        parser_.error(at, fmt::format("nesting deeper than {} levels (kMaxNesting)", kMaxNesting));
    }
    ~NestingGuard() { --parser_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& parser_;
  };
};

}  // namespace lmstack::tokenizer::jinja
