// Expression evaluation for the Jinja interpreter (see jinja_ast.h): names, attribute and item
// access with jinja2's fallbacks (obj.x tries the attribute, then the key; a missing one is
// Undefined), slices, calls, filters, tests, and Python's operators, including its int/float
// promotion, floor division and modulo signs.
#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_eval.h"
#include "lmstack/tokenizer/jinja_text.h"

namespace lmstack::tokenizer::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    const auto it = s->vars_.find(name);
    if (it != s->vars_.end()) return &it->second;
  }
  return nullptr;
}

Value Context::lookup(const std::string& name) const {
  if (const Value* v = scope->find(name)) return *v;
  if (const Value* g = find_global(name)) return *g;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

CallArgs Arguments::eval(Context& ctx) const {
  CallArgs out;
  for (const auto& e : positional) out.positional.push_back(e->eval(ctx));
  for (const auto& [k, e] : keyword) out.keyword.emplace_back(k, e->eval(ctx));
  return out;
}

namespace {

std::string missing_attribute(const Value& obj, const std::string& what) {
  if (obj.is_none()) return fmt::format("'None' has no attribute '{}'", what);
  if (obj.is_string() || obj.is_list())
    return fmt::format(
        "'{0} object' has no attribute '{1}' (unsupported construct 'method {0}.{1}')",
        obj.type_name(), what);
  return fmt::format("'{} object' has no attribute '{}'", obj.type_name(), what);
}

// Python's slice.indices(): the positions a[start:stop:step] selects from a sequence of n.
std::vector<int64_t> slice_positions(int64_t n, const Value& start_v, const Value& stop_v,
                                     const Value& step_v) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) fail(fmt::format("slice {} must be an integer or None", what));
    return v.as_int();
  };
  const int64_t step = as_index(step_v, "step").value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> i, int64_t fallback) {
    if (!i) return fallback;
    int64_t x = *i < 0 ? *i + n : *i;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(as_index(start_v, "start"), step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(as_index(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<int64_t> positions;
  // A step near INT64_MAX would wrap `i` past the end back into the sequence (issue 13).
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    positions.push_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return positions;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) obj.require_defined();
  if (has_method(obj, name)) {
    return Value::callable(name, [obj, name](Context& ctx, const CallArgs& args) {
      return call_method(ctx, obj, name, args);
    });
  }
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  }
  return Value::undefined(missing_attribute(obj, name));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.require_defined();
  if (key.is_int() && (obj.is_list() || obj.is_string())) {
    const int64_t n = length(obj);
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i < 0 || i >= n)
      return Value::undefined(fmt::format("{} index out of range", obj.type_name()));
    if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
    const std::u32string cps = decode_utf8(obj.as_string());
    return Value::string(encode_utf8(cps.substr(static_cast<size_t>(i), 1)));
  }
  if (key.is_string()) {
    if ((obj.is_dict() || obj.is_namespace())) {
      if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
      return Value::undefined(missing_attribute(obj, key.as_string()));
    }
    return get_attr(obj, key.as_string());
  }
  return Value::undefined(missing_attribute(obj, key.repr()));
}

Value LiteralExpr::eval(Context&) const { return value; }

Value ListExpr::eval(Context& ctx) const {
  ValueList values;
  values.reserve(items.size());
  for (const auto& item : items) values.push_back(item->eval(ctx));
  return Value::list(std::move(values), is_tuple);
}

Value DictExpr::eval(Context& ctx) const {
  auto dict = std::make_shared<Dict>();
  for (const auto& [key_expr, value_expr] : entries) {
    const Value key = key_expr->eval(ctx);
    if (!key.is_string()) {
      ctx.at(key_expr->loc);
      fail("unsupported construct 'non-string dict key'");
    }
    dict->set(key.as_string(), value_expr->eval(ctx));
  }
  return Value::dict(std::move(dict));
}

Value NameExpr::eval(Context& ctx) const { return ctx.lookup(name); }

Value AttrExpr::eval(Context& ctx) const {
  const Value obj = object->eval(ctx);
  ctx.at(loc);
  return get_attr(obj, name);
}

Value IndexExpr::eval(Context& ctx) const {
  const Value obj = object->eval(ctx);
  const Value key = index->eval(ctx);
  ctx.at(loc);
  return get_item(obj, key);
}

Value SliceExpr::eval(Context& ctx) const {
  const Value obj = object->eval(ctx);
  const Value none = Value::none();
  const Value a = start ? start->eval(ctx) : none;
  const Value b = stop ? stop->eval(ctx) : none;
  const Value c = step ? step->eval(ctx) : none;
  ctx.at(loc);
  obj.require_defined();
  if (obj.is_list()) {
    ValueList out;
    for (int64_t i : slice_positions(length(obj), a, b, c))
      out.push_back(obj.as_list()[static_cast<size_t>(i)]);
    return Value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::u32string cps = decode_utf8(obj.as_string());
    std::u32string out;
    for (int64_t i : slice_positions(static_cast<int64_t>(cps.size()), a, b, c))
      out.push_back(cps[static_cast<size_t>(i)]);
    return Value::string(encode_utf8(out));
  }
  fail(fmt::format("'{}' object is not subscriptable", obj.type_name()));
}

Value CallExpr::eval(Context& ctx) const {
  const Value fn = callee->eval(ctx);
  const CallArgs call_args = args.eval(ctx);
  ctx.at(loc);
  if (fn.is_undefined()) fn.require_defined();
  if (fn.kind() != Value::Kind::kCallable)
    fail(fmt::format("'{}' object is not callable", fn.type_name()));
  Value result = fn.as_callable()(ctx, call_args);
  ctx.charge(result);
  return result;
}

Value FilterExpr::eval(Context& ctx) const {
  const Value operand_value = operand->eval(ctx);
  const CallArgs call_args = args.eval(ctx);
  ctx.at(loc);
  Value result = fn(ctx, operand_value, call_args);
  ctx.charge(result);
  return result;
}

Value TestExpr::eval(Context& ctx) const {
  const Value operand_value = operand->eval(ctx);
  const CallArgs call_args = args.eval(ctx);
  ctx.at(loc);
  return Value::boolean(fn(ctx, operand_value, call_args) != negated);
}

Value UnaryExpr::eval(Context& ctx) const {
  const Value v = operand->eval(ctx);
  ctx.at(loc);
  if (op == UnaryOp::kNot) return Value::boolean(!v.truthy());
  v.require_defined();
  if (!v.is_number())
    fail(fmt::format("bad operand type for unary {}: '{}'", op == UnaryOp::kNeg ? '-' : '+',
                     v.type_name()));
  if (op == UnaryOp::kPos) return v.is_int() ? Value::integer(v.as_int()) : v;
  return v.is_int() ? Value::integer(-v.as_int()) : Value::number(-v.as_double());
}

Value BinaryExpr::eval(Context& ctx) const {
  const Value a = lhs->eval(ctx);
  if (op == BinaryOp::kAnd) return a.truthy() ? rhs->eval(ctx) : a;
  if (op == BinaryOp::kOr) return a.truthy() ? a : rhs->eval(ctx);
  const Value b = rhs->eval(ctx);
  ctx.at(loc);
  Value result;
  if (op == BinaryOp::kConcat) {
    std::string sa = a.str(), sb = b.str();
    check_string_bytes(sa.size() + sb.size());
    result = Value::string(std::move(sa) + sb);
  } else {
    result = binary_arithmetic(op, a, b);
  }
  ctx.charge(result);
  return result;
}

Value CompareExpr::eval(Context& ctx) const {
  Value left = first->eval(ctx);
  for (const auto& [op, expr] : rest) {
    Value right = expr->eval(ctx);
    ctx.at(loc);
    if (!compare(op, left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value CondExpr::eval(Context& ctx) const {
  if (cond->eval(ctx).truthy()) return then_expr->eval(ctx);
  if (else_expr) return else_expr->eval(ctx);
  return Value::undefined(
      "the inline if-expression evaluated to false and no else section was defined");
}

}  // namespace lmstack::tokenizer::jinja
