// Python's binary operators, comparisons and membership on jinja values (see jinja_eval.h).
// Integer arithmetic stays in int64 (Python ints are unbounded: overflow throws instead of
// wrapping); `/` always gives a float; `//` and `%` round toward negative infinity.
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_eval.h"

namespace lmstack::tokenizer::jinja {
namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "**";
    default:
      return "?";
  }
}

void check_overflow(bool overflow) {
  if (overflow) fail("integer overflow (lmstack keeps template integers in 64 bits)");
}

Value int_arithmetic(BinaryOp op, int64_t x, int64_t y) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      check_overflow(__builtin_add_overflow(x, y, &r));
      return Value::integer(r);
    case BinaryOp::kSub:
      check_overflow(__builtin_sub_overflow(x, y, &r));
      return Value::integer(r);
    case BinaryOp::kMul:
      check_overflow(__builtin_mul_overflow(x, y, &r));
      return Value::integer(r);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) fail("integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == BinaryOp::kFloorDiv ? q : m);
    }
    case BinaryOp::kPow: {
      if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
      if (x == 0 || x == 1) return Value::integer(y == 0 ? 1 : x);
      if (x == -1) return Value::integer(y % 2 ? -1 : 1);
      int64_t acc = 1;  // |x| >= 2: overflows within 63 steps
      for (int64_t i = 0; i < y; ++i) check_overflow(__builtin_mul_overflow(acc, x, &acc));
      return Value::integer(acc);
    }
    default:
      break;
  }
  if (y == 0) fail("division by zero");
  return Value::number(static_cast<double>(x) / static_cast<double>(y));
}

Value float_arithmetic(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::kAdd:
      return Value::number(x + y);
    case BinaryOp::kSub:
      return Value::number(x - y);
    case BinaryOp::kMul:
      return Value::number(x * y);
    case BinaryOp::kDiv:
      if (y == 0) fail("float division by zero");
      return Value::number(x / y);
    case BinaryOp::kFloorDiv:
      if (y == 0) fail("float floor division by zero");
      return Value::number(std::floor(x / y));
    case BinaryOp::kMod: {
      if (y == 0) fail("float modulo");
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::number(m);
    }
    case BinaryOp::kPow:
      return Value::number(std::pow(x, y));
    default:
      return Value::none();
  }
}

// str * n or list * n (n <= 0 gives an empty result, as in Python). The size is checked
// before the loop, without overflow: `'' * 10**18` looped for ever and a wrapped product let
// huge results through (issue 13).
Value repeat(const Value& seq, int64_t n) {
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().size();
  if (n <= 0 || unit == 0)
    return seq.is_string() ? Value::string("") : Value::list({}, seq.is_tuple());
  const size_t limit = seq.is_string() ? kMaxStringBytes : kMaxListItems;
  if (static_cast<uint64_t>(n) > limit / unit)
    fail(fmt::format("repetition result too large ({} x {} {}; the limit is {})", unit, n,
                     seq.is_string() ? "bytes" : "items", limit));
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * static_cast<size_t>(n));
    out = seq.as_string();
    while (out.size() * 2 <= unit * static_cast<size_t>(n)) out += out;  // doubling, not n appends
    out.append(out.data(), unit * static_cast<size_t>(n) - out.size());
    return Value::string(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out), seq.is_tuple());
}

}  // namespace

Value binary_arithmetic(BinaryOp op, const Value& a, const Value& b) {
  a.require_defined();
  b.require_defined();
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return float_arithmetic(op, a.as_double(), b.as_double());
    return int_arithmetic(op, a.as_int(), b.as_int());
  }
  if (op == BinaryOp::kAdd && a.is_string() && b.is_string()) {
    check_string_bytes(a.as_string().size() + b.as_string().size());
    return Value::string(a.as_string() + b.as_string());
  }
  if (op == BinaryOp::kAdd && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    if (a.as_list().size() + b.as_list().size() > kMaxListItems)
      fail(fmt::format("list concatenation result too large (the limit is {} items)",
                       kMaxListItems));
    ValueList out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out), a.is_tuple());
  }
  if (op == BinaryOp::kMul && (a.is_string() || a.is_list()) && b.is_int())
    return repeat(a, b.as_int());
  if (op == BinaryOp::kMul && a.is_int() && (b.is_string() || b.is_list()))
    return repeat(b, a.as_int());
  if (op == BinaryOp::kMod && a.is_string()) fail("unsupported construct 'string % formatting'");
  if (op == BinaryOp::kAdd && a.is_string())
    fail(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
  if (op == BinaryOp::kAdd && a.is_list())
    fail(fmt::format("can only concatenate list (not \"{}\") to list", b.type_name()));
  fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op),
                   a.type_name(), b.type_name()));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string())
        fail(
            fmt::format("'in <string>' requires string as left operand, not {}", item.type_name()));
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list())
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::kDict:
      return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
    default:
      fail(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

bool compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") return !contains(b, a);
  const int c = compare_values(a, b, op.c_str());
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value get_attribute_path(const Value& obj, const std::string& path) {
  Value v = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    int64_t index = 0;
    const auto res = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric =
        !part.empty() && res.ec == std::errc() && res.ptr == part.data() + part.size();
    v = numeric ? get_item(v, Value::integer(index)) : get_item(v, Value::string(part));
    if (dot == std::string::npos || v.is_undefined()) return v;
    start = dot + 1;
  }
}

}  // namespace lmstack::tokenizer::jinja
