// Expression half of the Jinja parser (statements are in jinja_parser.cc). Precedence, from
// loosest: conditional `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %,
// **, unary - +, then filters `|f`, tests `is t` and calls, then `.attr`, `[index]`, `[a:b:c]`.
#include <charconv>
#include <cstdlib>

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_parser_impl.h"

namespace lmstack::tokenizer::jinja {

ExprPtr Parser::parse_tuple(bool with_cond) {
  const Location loc = peek().loc;
  ExprPtr first = parse_expression(with_cond);
  if (!is_op(",")) return first;
  auto tuple = std::make_unique<ListExpr>(loc);
  tuple->is_tuple = true;
  tuple->items.push_back(std::move(first));
  while (skip_op(",")) {
    if (peek().type == TokenType::kVarEnd || peek().type == TokenType::kBlockEnd || is_op(")"))
      break;
    tuple->items.push_back(parse_expression(with_cond));
  }
  for (const auto& item : tuple->items) deepen(*tuple, item.get());
  return tuple;
}

ExprPtr Parser::parse_expression(bool with_cond) {
  const NestingGuard guard(*this, peek());  // `a if b else c if d else ...` recurses here
  ExprPtr expr = parse_or();
  while (with_cond && is_name("if")) {
    auto cond = std::make_unique<CondExpr>(next().loc);
    cond->then_expr = std::move(expr);
    cond->cond = parse_or();
    if (skip_name("else")) cond->else_expr = parse_expression();
    deepen(*cond, cond->then_expr.get());
    deepen(*cond, cond->cond.get());
    deepen(*cond, cond->else_expr.get());
    expr = std::move(cond);
  }
  return expr;
}

ExprPtr Parser::make_binary(Location loc, BinaryOp op, ExprPtr lhs, ExprPtr rhs) {
  auto node = std::make_unique<BinaryExpr>(loc);
  node->op = op;
  node->lhs = std::move(lhs);
  node->rhs = std::move(rhs);
  deepen(*node, node->lhs.get());
  deepen(*node, node->rhs.get());
  return node;
}

ExprPtr Parser::parse_or() {
  ExprPtr lhs = parse_and();
  while (is_name("or")) {
    const Location loc = next().loc;
    lhs = make_binary(loc, BinaryOp::kOr, std::move(lhs), parse_and());
  }
  return lhs;
}

ExprPtr Parser::parse_and() {
  ExprPtr lhs = parse_not();
  while (is_name("and")) {
    const Location loc = next().loc;
    lhs = make_binary(loc, BinaryOp::kAnd, std::move(lhs), parse_not());
  }
  return lhs;
}

ExprPtr Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  const NestingGuard guard(*this, peek());
  auto node = std::make_unique<UnaryExpr>(next().loc);
  node->op = UnaryOp::kNot;
  node->operand = parse_not();
  deepen(*node, node->operand.get());
  return node;
}

ExprPtr Parser::parse_compare() {
  const Location loc = peek().loc;
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> rest;
  while (true) {
    static const std::set<std::string> kOps = {"==", "!=", "<", "<=", ">", ">="};
    std::string op;
    if (peek().type == TokenType::kOperator && kOps.count(peek().text)) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    rest.emplace_back(op, parse_math1());
  }
  if (rest.empty()) return first;
  auto node = std::make_unique<CompareExpr>(loc);
  node->first = std::move(first);
  node->rest = std::move(rest);
  deepen(*node, node->first.get());
  for (const auto& [op, e] : node->rest) deepen(*node, e.get());
  return node;
}

ExprPtr Parser::parse_math1() {
  return parse_level({{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}},
                     [this] { return parse_concat(); });
}

ExprPtr Parser::parse_concat() {
  return parse_level({{"~", BinaryOp::kConcat}}, [this] { return parse_math2(); });
}

ExprPtr Parser::parse_math2() {
  return parse_level({{"*", BinaryOp::kMul},
                      {"/", BinaryOp::kDiv},
                      {"//", BinaryOp::kFloorDiv},
                      {"%", BinaryOp::kMod}},
                     [this] { return parse_pow(); });
}

ExprPtr Parser::parse_pow() {
  return parse_level({{"**", BinaryOp::kPow}}, [this] { return parse_unary(true); });
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const NestingGuard guard(*this, peek());
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    auto unary = std::make_unique<UnaryExpr>(peek().loc);
    unary->op = next().text == "-" ? UnaryOp::kNeg : UnaryOp::kPos;
    unary->operand = parse_unary(false);
    deepen(*unary, unary->operand.get());
    node = std::move(unary);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  return with_filter ? parse_filter_chain(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.type) {
    case TokenType::kName: {
      next();
      if (t.text == "true" || t.text == "True")
        return std::make_unique<LiteralExpr>(t.loc, Value::boolean(true));
      if (t.text == "false" || t.text == "False")
        return std::make_unique<LiteralExpr>(t.loc, Value::boolean(false));
      if (t.text == "none" || t.text == "None")
        return std::make_unique<LiteralExpr>(t.loc, Value::none());
      return std::make_unique<NameExpr>(t.loc, t.text);
    }
    case TokenType::kString: {
      std::string text = next().text;
      while (peek().type == TokenType::kString) text += next().text;  // 'a' 'b' == 'ab'
      return std::make_unique<LiteralExpr>(t.loc, Value::string(std::move(text)));
    }
    case TokenType::kInt: {
      next();
      int64_t v = 0;
      const auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (res.ec != std::errc()) unsupported(t, "integer literal beyond 64 bits");
      return std::make_unique<LiteralExpr>(t.loc, Value::integer(v));
    }
    case TokenType::kFloat:
      next();
      return std::make_unique<LiteralExpr>(t.loc,
                                           Value::number(std::strtod(t.text.c_str(), nullptr)));
    case TokenType::kOperator:
      if (t.text == "(") {
        next();
        if (skip_op(")")) {
          auto empty = std::make_unique<ListExpr>(t.loc);
          empty->is_tuple = true;
          return empty;
        }
        ExprPtr inner = parse_tuple();
        expect_op(")");
        return inner;
      }
      if (t.text == "[" || t.text == "{") {
        next();
        return parse_collection(t.text == "[" ? "]" : "}", t.text == "{", t.loc);
      }
      break;
    default:
      break;
  }
  error(t, "unexpected " + describe(t));
}

ExprPtr Parser::parse_collection(const char* close, bool is_dict, Location loc) {
  if (!is_dict) {
    auto list = std::make_unique<ListExpr>(loc);
    while (!skip_op(close)) {
      list->items.push_back(parse_expression());
      deepen(*list, list->items.back().get());
      if (!is_op(close)) expect_op(",");
    }
    return list;
  }
  auto dict = std::make_unique<DictExpr>(loc);
  while (!skip_op(close)) {
    ExprPtr key = parse_expression();
    expect_op(":");
    dict->entries.emplace_back(std::move(key), parse_expression());
    deepen(*dict, dict->entries.back().first.get());
    deepen(*dict, dict->entries.back().second.get());
    if (!is_op(close)) expect_op(",");
  }
  return dict;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    const Location loc = peek().loc;
    if (skip_op(".")) {
      const Token& t = next();
      if (t.type == TokenType::kName) {
        auto attr = std::make_unique<AttrExpr>(loc);
        attr->object = std::move(node);
        attr->name = t.text;
        deepen(*attr, attr->object.get());
        node = std::move(attr);
      } else if (t.type == TokenType::kInt) {
        int64_t position = 0;
        const auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), position);
        if (res.ec != std::errc()) unsupported(t, "integer literal beyond 64 bits");
        auto index = std::make_unique<IndexExpr>(loc);
        index->object = std::move(node);
        index->index = std::make_unique<LiteralExpr>(t.loc, Value::integer(position));
        deepen(*index, index->object.get());
        node = std::move(index);
      } else {
        error(t, "expected an attribute name after '.', got " + describe(t));
      }
    } else if (skip_op("[")) {
      node = parse_subscript(std::move(node), loc);
    } else if (is_op("(")) {
      auto call = std::make_unique<CallExpr>(loc);
      call->callee = std::move(node);
      call->args = parse_call_args();
      deepen(*call, call->callee.get());
      deepen(*call, call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

// After `[`: an index `x[i]` or a slice `x[a:b:c]` with any part omitted.
ExprPtr Parser::parse_subscript(ExprPtr node, Location loc) {
  ExprPtr start, stop, step;
  if (!is_op(":")) start = parse_expression();
  if (!skip_op(":")) {
    expect_op("]");
    auto index = std::make_unique<IndexExpr>(loc);
    index->object = std::move(node);
    index->index = std::move(start);
    deepen(*index, index->object.get());
    deepen(*index, index->index.get());
    return index;
  }
  if (!is_op("]") && !is_op(":")) stop = parse_expression();
  if (skip_op(":") && !is_op("]")) step = parse_expression();
  expect_op("]");
  auto slice = std::make_unique<SliceExpr>(loc);
  slice->object = std::move(node);
  slice->start = std::move(start);
  slice->stop = std::move(stop);
  slice->step = std::move(step);
  for (const Expr* e :
       {slice->object.get(), slice->start.get(), slice->stop.get(), slice->step.get()})
    deepen(*slice, e);
  return slice;
}

// Filters `| name(args)`, tests `is [not] name(args)` / `is name arg`, and calls on their
// results, left to right.
ExprPtr Parser::parse_filter_chain(ExprPtr node) {
  while (true) {
    const Location loc = peek().loc;
    if (skip_op("|")) {
      const Token& name_token = peek();
      auto filter = std::make_unique<FilterExpr>(loc);
      filter->name = expect_name();
      filter->fn = find_filter(filter->name);
      if (!filter->fn) unsupported(name_token, "filter " + filter->name);
      if (is_op(".")) unsupported(peek(), "dotted filter name");
      if (is_op("(")) filter->args = parse_call_args();
      filter->operand = std::move(node);
      deepen(*filter, filter->operand.get());
      deepen(*filter, filter->args);
      node = std::move(filter);
    } else if (skip_name("is")) {
      auto test = std::make_unique<TestExpr>(loc);
      test->negated = skip_name("not");
      const Token& name_token = peek();
      test->name = expect_name();
      test->fn = find_test(test->name);
      if (!test->fn) unsupported(name_token, "test " + test->name);
      const TokenType type = peek().type;
      if (is_op("(")) {
        test->args = parse_call_args();
      } else if ((type == TokenType::kName || type == TokenType::kString ||
                  type == TokenType::kInt || type == TokenType::kFloat || is_op("[") ||
                  is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) error(peek(), "tests cannot be chained with 'is'");
        test->args.positional.push_back(parse_postfix(parse_primary()));
      }
      test->operand = std::move(node);
      deepen(*test, test->operand.get());
      deepen(*test, test->args);
      node = std::move(test);
    } else if (is_op("(")) {
      auto call = std::make_unique<CallExpr>(loc);
      call->callee = std::move(node);
      call->args = parse_call_args();
      deepen(*call, call->callee.get());
      deepen(*call, call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Arguments Parser::parse_call_args() {
  expect_op("(");
  Arguments args;
  while (!skip_op(")")) {
    if (is_op("*") || is_op("**")) unsupported(peek(), "*args/**kwargs in a call");
    if (peek().type == TokenType::kName && is_op("=", 1)) {
      std::string key = next().text;
      next();
      args.keyword.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.keyword.empty()) error(peek(), "positional argument after a keyword argument");
      args.positional.push_back(parse_expression());
    }
    if (!is_op(")")) expect_op(",");
  }
  return args;
}

}  // namespace lmstack::tokenizer::jinja
