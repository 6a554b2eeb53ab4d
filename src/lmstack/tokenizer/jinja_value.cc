// Python semantics of jinja values (see jinja_value.h): truthiness, str()/repr(), ==, ordering,
// iteration, len(), and json.dumps as Hugging Face's tojson filter calls it.
#include "lmstack/tokenizer/jinja_value.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_text.h"

namespace lmstack::tokenizer::jinja {

void fail(const std::string& message) { throw RenderError(message); }

void check_string_bytes(size_t bytes) {
  if (bytes > kMaxStringBytes)
    fail(fmt::format("a string of {} bytes exceeds the limit of {} bytes (kMaxStringBytes)", bytes,
                     kMaxStringBytes));
}

namespace {

// Depth and namespace flag of a container from its elements.
template <class Items, class Get>
void measure(const Items& items, Get get, uint16_t& depth, bool& has_namespace) {
  int deepest = 0;
  for (const auto& item : items) {
    deepest = std::max(deepest, get(item).depth());
    has_namespace = has_namespace || get(item).has_namespace();
  }
  if (deepest + 1 > kMaxValueDepth)
    fail(fmt::format("a value nests deeper than {} levels (kMaxValueDepth)", kMaxValueDepth));
  depth = static_cast<uint16_t>(deepest + 1);
}
const Value& self(const Value& v) { return v; }
const Value& second(const std::pair<std::string, Value>& kv) { return kv.second; }

}  // namespace

const Value* Dict::find(const std::string& key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

size_t Dict::size() const { return items_.size(); }

void Dict::set(const std::string& key, Value value) {
  const auto [it, inserted] = index_.emplace(key, items_.size());
  if (inserted) {
    items_.emplace_back(key, std::move(value));
  } else {
    items_[it->second].second = std::move(value);
  }
}

Value Value::undefined(std::string hint) {
  Value v;
  v.text_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.data_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.data_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.data_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  check_string_bytes(s.size());
  v.kind_ = Kind::kString;
  v.data_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(ValueList items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.is_tuple_ = is_tuple;
  measure(items, self, v.depth_, v.has_namespace_);
  v.data_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::dict(std::shared_ptr<const Dict> d) {
  Value v;
  v.kind_ = Kind::kDict;
  measure(d->items(), second, v.depth_, v.has_namespace_);
  v.data_ = std::move(d);
  return v;
}
Value Value::name_space(std::shared_ptr<Dict> d) {
  Value v;
  v.kind_ = Kind::kNamespace;
  measure(d->items(), second, v.depth_, v.has_namespace_);
  if (v.has_namespace_) fail("a namespace cannot hold another namespace");
  v.has_namespace_ = true;
  v.data_ = std::move(d);
  return v;
}
Value Value::callable(std::string name, NativeFunction fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.text_ = std::move(name);
  v.data_ = std::make_shared<const NativeFunction>(std::move(fn));
  return v;
}

// Accessors check the kind, so a template passing the wrong type to a filter or method gets
// a RenderError naming the types rather than an exception from std::get.
namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* want) {
  v.require_defined();
  fail(fmt::format("expected {}, got '{}'", want, v.type_name()));
}
}  // namespace

bool Value::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind(*this, "a bool");
  return std::get<bool>(data_);
}
int64_t Value::as_int() const {
  if (kind_ == Kind::kBool) return static_cast<int64_t>(std::get<bool>(data_));
  if (kind_ != Kind::kInt) wrong_kind(*this, "an integer");
  return std::get<int64_t>(data_);
}
double Value::as_double() const {
  if (kind_ == Kind::kFloat) return std::get<double>(data_);
  if (!is_int()) wrong_kind(*this, "a number");
  return static_cast<double>(as_int());
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::kString) wrong_kind(*this, "a string");
  return *std::get<std::shared_ptr<const std::string>>(data_);
}
const ValueList& Value::as_list() const {
  if (kind_ != Kind::kList) wrong_kind(*this, "a list");
  return *std::get<std::shared_ptr<const ValueList>>(data_);
}
const Dict& Value::as_dict() const {
  if (kind_ == Kind::kNamespace) return *std::get<std::shared_ptr<Dict>>(data_);
  if (kind_ != Kind::kDict) wrong_kind(*this, "a dict");
  return *std::get<std::shared_ptr<const Dict>>(data_);
}
Dict& Value::as_namespace() const {
  if (kind_ != Kind::kNamespace) wrong_kind(*this, "a namespace");
  return *std::get<std::shared_ptr<Dict>>(data_);
}
const NativeFunction& Value::as_callable() const {
  if (kind_ != Kind::kCallable) wrong_kind(*this, "a callable");
  return *std::get<std::shared_ptr<const NativeFunction>>(data_);
}
const std::string& Value::undefined_hint() const { return text_; }
const std::string& Value::callable_name() const { return text_; }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return as_dict().size() != 0;
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    case Kind::kNamespace:
      return "<Namespace " + repr() + ">";
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return py_float_repr(as_double());
    case Kind::kString:
      return py_string_repr(as_string());
    case Kind::kList: {
      std::string out = is_tuple_ ? "(" : "[";
      const ValueList& items = as_list();
      for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].repr();
      if (is_tuple_ && items.size() == 1) out += ",";
      return out + (is_tuple_ ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items()) {
        out += (first ? "" : ", ") + py_string_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + "}";
    }
    case Kind::kCallable:
      return "<function " + text_ + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return is_tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "";
}

void Value::require_defined() const {
  if (is_undefined()) fail(text_.empty() ? "value is undefined" : text_);
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const ValueList &x = a.as_list(), &y = b.as_list();
      if (a.is_tuple() != b.is_tuple() || x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!values_equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.find(k);
        if (!other || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.as_dict() == &b.as_dict();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

int compare_values(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat)
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {  // UTF-8 byte order is code point order
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const ValueList &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!values_equal(x[i], y[i])) return compare_values(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  a.require_defined();
  b.require_defined();
  fail(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, a.type_name(),
                   b.type_name()));
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& item : v.as_dict().items()) keys.push_back(Value::string(item.first));
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      for (char32_t c : decode_utf8(v.as_string()))
        chars.push_back(Value::string(encode_utf8(std::u32string(1, c))));
      return chars;
    }
    default:
      fail(fmt::format("'{}' object is not iterable", v.type_name()));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(utf8_length(v.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    default:
      fail(fmt::format("object of type '{}' has no len()", v.type_name()));
  }
}

namespace {

// One conversion for both nlohmann flavours (sorted and insertion-ordered objects).
template <class J>
Value from_json_impl(const J& j, int depth = 0) {
  using value_t = typename J::value_t;
  if (depth >= kMaxValueDepth)  // checked before recursing: the walk itself must stay shallow
    fail(fmt::format("a JSON value in the context nests deeper than {} levels (kMaxValueDepth)",
                     kMaxValueDepth));
  switch (j.type()) {
    case value_t::null:
      return Value::none();
    case value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case value_t::number_float:
      return Value::number(j.template get<double>());
    case value_t::string:
      return Value::string(j.template get<std::string>());
    case value_t::array: {
      ValueList items;
      for (const auto& item : j) items.push_back(from_json_impl(item, depth + 1));
      return Value::list(std::move(items));
    }
    case value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : j.items()) d->set(k, from_json_impl(v, depth + 1));
      return Value::dict(std::move(d));
    }
    default:
      fail("unsupported JSON value type in the template context");
  }
}

}  // namespace

Value from_json(const Json& j) { return from_json_impl(j); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }

namespace {

void dump_json_string(const std::string& s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            const char32_t u = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 + (u >> 10)),
                               static_cast<unsigned>(0xDC00 + (u & 0x3FF)));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
          }
        } else {
          out += encode_utf8(std::u32string(1, c));
        }
    }
  }
  out += '"';
}

void dump_json_value(const Value& v, const JsonStyle& style, int level, std::string& out);

// Writes the items of a list or dict between `open` and `close` in json.dumps layout.
template <class Items, class WriteItem>
void dump_json_container(const Items& items, char open, char close, const JsonStyle& style,
                         int level, std::string& out, WriteItem write_item) {
  out += open;
  if (items.empty()) {
    out += close;
    return;
  }
  const std::string newline =
      style.indent >= 0 ? "\n" + std::string(static_cast<size_t>(style.indent * (level + 1)), ' ')
                        : "";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += style.item_separator;
    out += newline;
    write_item(items[i]);
  }
  if (style.indent >= 0) out += "\n" + std::string(static_cast<size_t>(style.indent * level), ' ');
  out += close;
}

void dump_json_value(const Value& v, const JsonStyle& style, int level, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : py_float_repr(d);
      return;
    }
    case Value::Kind::kString:
      dump_json_string(v.as_string(), style.ensure_ascii, out);
      return;
    case Value::Kind::kList:
      dump_json_container(v.as_list(), '[', ']', style, level, out,
                          [&](const Value& item) { dump_json_value(item, style, level + 1, out); });
      return;
    case Value::Kind::kDict: {
      auto items = v.as_dict().items();
      if (style.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
      dump_json_container(items, '{', '}', style, level, out, [&](const auto& item) {
        dump_json_string(item.first, style.ensure_ascii, out);
        out += style.key_separator;
        dump_json_value(item.second, style, level + 1, out);
      });
      return;
    }
    default:
      fail(fmt::format("Object of type {} is not JSON serializable", v.type_name()));
  }
}

}  // namespace

std::string dump_json(const Value& v, const JsonStyle& style) {
  JsonStyle s = style;
  if (s.item_separator.empty()) s.item_separator = s.indent >= 0 ? "," : ", ";
  if (s.key_separator.empty()) s.key_separator = ": ";
  std::string out;
  dump_json_value(v, s, 0, out);
  return out;
}

}  // namespace lmstack::tokenizer::jinja
