// Recursive-descent parser for the Jinja subset (see jinja_parser.h). Statement parsing comes
// first, then expressions from the loosest operator to the tightest, mirroring jinja2's
// parser.py grammar so precedence quirks match (e.g. `a + b | trim` filters only b).
#include "lmstack/tokenizer/jinja_parser.h"

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_parser_impl.h"

namespace lmstack::tokenizer::jinja {

Body Parser::parse_body(const std::set<std::string>& stop) {
  Body body;
  while (true) {
    const Token& t = peek();
    if (t.type == TokenType::kEnd) {
      if (!stop.empty()) error(t, "unexpected end of template, expected '" + *stop.rbegin() + "'");
      return body;
    }
    if (t.type == TokenType::kText) {
      body.push_back(std::make_unique<TextStmt>(t.loc, t.text));
      next();
    } else if (t.type == TokenType::kVarBegin) {
      next();
      auto stmt = std::make_unique<OutputStmt>(t.loc);
      stmt->expr = parse_tuple();
      expect(TokenType::kVarEnd, "'}}'");
      body.push_back(std::move(stmt));
    } else if (t.type == TokenType::kBlockBegin) {
      if (peek(1).type == TokenType::kName && stop.count(peek(1).text)) return body;
      body.push_back(parse_statement());
    } else {
      error(t, "unexpected " + describe(t));
    }
  }
}

std::string Parser::take_tag() {
  next();
  return expect_name();
}

StmtPtr Parser::parse_statement() {
  const NestingGuard guard(*this, peek());
  next();  // {%
  const Token& tag = peek();
  if (tag.type != TokenType::kName) error(tag, "expected a tag name, got " + describe(tag));
  const std::string word = next().text;
  if (word == "if") return parse_if(tag.loc);
  if (word == "for") return parse_for(tag.loc);
  if (word == "set") return parse_set(tag.loc);
  if (word == "macro") return parse_macro(tag.loc);
  if (word == "filter") return parse_filter_block(tag.loc);
  if (word == "break" || word == "continue") {
    expect_block_end();
    if (loop_depth_ == 0) error(tag, "'" + word + "' outside of a for loop");
    return std::make_unique<LoopControlStmt>(tag.loc,
                                             word == "break" ? Flow::kBreak : Flow::kContinue);
  }
  if (word == "generation") {
    expect_block_end();
    auto stmt = std::make_unique<BlockStmt>(tag.loc);
    stmt->body = parse_body({"endgeneration"});
    take_tag();
    expect_block_end();
    return stmt;
  }
  static const std::set<std::string> kEnds = {"endif", "endfor", "endset",    "endmacro",
                                              "else",  "elif",   "endfilter", "endgeneration"};
  if (kEnds.count(word)) error(tag, "unexpected '" + word + "'");
  unsupported(tag, word);
}

StmtPtr Parser::parse_if(Location loc) {
  auto stmt = std::make_unique<IfStmt>(loc);
  ExprPtr cond = parse_expression();
  while (true) {
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"});
    stmt->branches.emplace_back(std::move(cond), std::move(body));
    const std::string tag = take_tag();
    if (tag == "elif") {
      cond = parse_expression();
      continue;
    }
    if (tag == "else") {
      expect_block_end();
      stmt->else_body = parse_body({"endif"});
      take_tag();
    }
    expect_block_end();
    return stmt;
  }
}

StmtPtr Parser::parse_for(Location loc) {
  auto stmt = std::make_unique<ForStmt>(loc);
  const bool paren = skip_op("(");
  do {
    stmt->targets.push_back(expect_name());
  } while (skip_op(","));
  if (paren) expect_op(")");
  if (!skip_name("in")) error(peek(), "expected 'in', got " + describe(peek()));
  stmt->iterable = parse_tuple(/*with_cond=*/false);
  if (skip_name("if")) stmt->filter = parse_expression();
  if (is_name("recursive")) unsupported(peek(), "recursive for loop");
  expect_block_end();
  ++loop_depth_;
  stmt->body = parse_body({"else", "endfor"});
  --loop_depth_;
  if (take_tag() == "else") {
    expect_block_end();
    stmt->else_body = parse_body({"endfor"});
    take_tag();
  }
  expect_block_end();
  return stmt;
}

StmtPtr Parser::parse_set(Location loc) {
  std::vector<std::string> targets{expect_name()};
  std::string attr;
  if (skip_op(".")) {
    attr = expect_name();
  } else {
    while (skip_op(",")) targets.push_back(expect_name());
  }
  if (peek().type == TokenType::kBlockEnd && attr.empty() && targets.size() == 1) {
    next();
    auto stmt = std::make_unique<SetBlockStmt>(loc);
    stmt->name = targets[0];
    stmt->body = parse_body({"endset"});
    take_tag();
    expect_block_end();
    return stmt;
  }
  if (is_op("|")) unsupported(peek(), "filtered block set");
  expect_op("=");
  auto stmt = std::make_unique<SetStmt>(loc);
  stmt->targets = std::move(targets);
  stmt->attr = std::move(attr);
  stmt->value = parse_tuple();
  expect_block_end();
  return stmt;
}

StmtPtr Parser::parse_macro(Location loc) {
  auto stmt = std::make_unique<MacroStmt>(loc);
  stmt->name = expect_name();
  expect_op("(");
  while (!skip_op(")")) {
    if (is_op("*") || is_op("**")) unsupported(peek(), "macro varargs");
    std::string param = expect_name();
    ExprPtr fallback;
    if (skip_op("=")) fallback = parse_expression();
    stmt->params.emplace_back(std::move(param), std::move(fallback));
    if (!is_op(")")) expect_op(",");
  }
  expect_block_end();
  const int saved_depth = loop_depth_;
  loop_depth_ = 0;
  stmt->body = parse_body({"endmacro"});
  loop_depth_ = saved_depth;
  take_tag();
  expect_block_end();
  return stmt;
}

StmtPtr Parser::parse_filter_block(Location loc) {
  auto stmt = std::make_unique<FilterBlockStmt>(loc);
  const Token& name_token = peek();
  const std::string name = expect_name();
  stmt->fn = find_filter(name);
  if (!stmt->fn) unsupported(name_token, "filter " + name);
  if (is_op("(")) stmt->args = parse_call_args();
  if (is_op("|")) unsupported(peek(), "chained filters in a filter block");
  expect_block_end();
  stmt->body = parse_body({"endfilter"});
  take_tag();
  expect_block_end();
  return stmt;
}

Body parse_template(const std::vector<Token>& tokens, const std::string& name) {
  return Parser(tokens, name).parse_all();
}

}  // namespace lmstack::tokenizer::jinja
