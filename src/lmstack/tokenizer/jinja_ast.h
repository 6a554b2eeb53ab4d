// Syntax tree of a parsed Jinja template. Expressions evaluate to a Value
// (jinja_eval.cc); statements append to the output (jinja_exec.cc). Trees are immutable
// after parsing, so one tree can be rendered by many threads at once, each with its own
// Context.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/tokenizer/jinja_lexer.h"
#include "lmstack/tokenizer/jinja_value.h"

namespace lmstack::tokenizer::jinja {

class Context;

struct Expr {
  explicit Expr(Location l) : loc(l) {}
  virtual ~Expr() = default;
  virtual Value eval(Context& ctx) const = 0;
  Location loc;
  // Levels of the subtree (1 for a leaf). The parser bounds it by Parser::kMaxNesting, since
  // evaluation and destruction recurse once per level.
  int depth = 1;
};
using ExprPtr = std::unique_ptr<Expr>;

// Arguments as written at a call, filter or test site.
struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  CallArgs eval(Context& ctx) const;
};

using FilterFn = Value (*)(Context& ctx, const Value& operand, const CallArgs& args);
using TestFn = bool (*)(Context& ctx, const Value& operand, const CallArgs& args);

struct LiteralExpr : Expr {
  LiteralExpr(Location l, Value v) : Expr(l), value(std::move(v)) {}
  Value eval(Context& ctx) const override;
  Value value;
};
struct ListExpr : Expr {  // [a, b] or (a, b)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
};
struct DictExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};
struct NameExpr : Expr {
  NameExpr(Location l, std::string n) : Expr(l), name(std::move(n)) {}
  Value eval(Context& ctx) const override;
  std::string name;
};
struct AttrExpr : Expr {  // object.name
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object;
  std::string name;
};
struct IndexExpr : Expr {  // object[index]
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object, index;
};
struct SliceExpr : Expr {  // object[start:stop:step], absent parts null
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr object, start, stop, step;
};
struct CallExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr callee;
  Arguments args;
};
struct FilterExpr : Expr {  // operand | name(args)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr operand;
  std::string name;
  FilterFn fn = nullptr;
  Arguments args;
};
struct TestExpr : Expr {  // operand is [not] name(args)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr operand;
  std::string name;
  TestFn fn = nullptr;
  Arguments args;
  bool negated = false;
};

enum class UnaryOp { kNeg, kPos, kNot };
struct UnaryExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  UnaryOp op = UnaryOp::kNot;
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };
struct BinaryExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  BinaryOp op = BinaryOp::kAdd;
  ExprPtr lhs, rhs;
};

// a < b <= c: Python chained comparison; ops are "==", "!=", "<", "<=", ">", ">=", "in",
// "not in".
struct CompareExpr : Expr {
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct CondExpr : Expr {  // then_expr if cond else else_expr (else_expr may be null)
  using Expr::Expr;
  Value eval(Context& ctx) const override;
  ExprPtr cond, then_expr, else_expr;
};

// Statements. exec() appends output and reports loop control.
enum class Flow { kNormal, kBreak, kContinue };
struct Stmt {
  explicit Stmt(Location l) : loc(l) {}
  virtual ~Stmt() = default;
  virtual Flow exec(Context& ctx, std::string& out) const = 0;
  Location loc;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
Flow exec_body(const Body& body, Context& ctx, std::string& out);

struct TextStmt : Stmt {
  TextStmt(Location l, std::string t) : Stmt(l), text(std::move(t)) {}
  Flow exec(Context& ctx, std::string& out) const override;
  std::string text;
};
struct OutputStmt : Stmt {  // {{ expr }}
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  ExprPtr expr;
};
struct IfStmt : Stmt {  // if / elif... / else
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
};
struct ForStmt : Stmt {  // for targets in iterable [if filter] ... [else ...]
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  std::vector<std::string> targets;
  ExprPtr iterable, filter;
  Body body, else_body;
};
struct SetStmt : Stmt {  // set a = v | set a, b = v | set ns.attr = v
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  std::vector<std::string> targets;
  std::string attr;  // non-empty for `set ns.attr`, targets[0] is then the namespace
  ExprPtr value;
};
struct SetBlockStmt : Stmt {  // set name %}body{% endset
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  std::string name;
  Body body;
};
struct MacroStmt : Stmt {
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
};
struct LoopControlStmt : Stmt {  // break / continue
  LoopControlStmt(Location l, Flow f) : Stmt(l), flow(f) {}
  Flow exec(Context& ctx, std::string& out) const override;
  Flow flow;
};
struct FilterBlockStmt : Stmt {  // filter name(args) %}body{% endfilter
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  FilterFn fn = nullptr;
  Arguments args;
  Body body;
};
struct BlockStmt : Stmt {  // HF's {% generation %}: renders its body unchanged
  using Stmt::Stmt;
  Flow exec(Context& ctx, std::string& out) const override;
  Body body;
};

}  // namespace lmstack::tokenizer::jinja
