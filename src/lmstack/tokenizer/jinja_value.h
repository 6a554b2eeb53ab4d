// The value model of the Jinja interpreter: Python's types as chat templates see them
// (None, bool, int, float, str, list/tuple, dict in insertion order, jinja2's Undefined,
// namespace objects and callables), with Python's truthiness, str()/repr(), equality and
// ordering. Lists and dicts are immutable and shared (ImmutableSandboxedEnvironment
// semantics); only a namespace() can be assigned to, through `{% set ns.attr = ... %}`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::tokenizer::jinja {

// A render-time error without a location; the renderer adds "name:line:col: " to it.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& message);

// Limits on values (issue 13; docs/reliability.md). Containers record their nesting depth, so
// the recursive walks (repr, tojson, ==, destruction) stay shallow: a list nested 100,000 deep
// by a loop crashed tojson. A namespace may not hold another namespace, directly or inside a
// list or dict, which also keeps a namespace from containing itself.
constexpr int kMaxValueDepth = 512;                   // > kMaxJsonDepth, so any parsed JSON fits
constexpr size_t kMaxStringBytes = size_t{64} << 20;  // one string value (= the output limit)
constexpr size_t kMaxListItems = size_t{1} << 20;     // lists built by `*` and `+`
// Fails "a string of N bytes exceeds the limit of kMaxStringBytes" when bytes is larger.
void check_string_bytes(size_t bytes);

class Value;
using ValueList = std::vector<Value>;

// A dict with Python's insertion order. Keys are strings (JSON objects, keyword arguments,
// string-keyed dict literals); a hash index keeps lookups O(1) for large request objects.
class Dict {
 public:
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const;  // out of line: Value is incomplete here (clang rejects it inline)

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;  // key -> position in items_
};

// Arguments of a call, filter or test: positional ones, then keyword ones.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Context;
using NativeFunction = std::function<Value(Context&, const CallArgs&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() = default;  // Undefined with no hint
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(ValueList items, bool is_tuple = false);
  static Value dict(std::shared_ptr<const Dict> d);
  // A namespace(): a dict whose attributes `set` may assign.
  static Value name_space(std::shared_ptr<Dict> d);
  static Value callable(std::string name, NativeFunction fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_tuple() const { return is_tuple_; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  // Containers: 1 + the deepest element (at creation); scalars 0.
  int depth() const { return depth_; }
  // True for a namespace and for containers holding one.
  bool has_namespace() const { return has_namespace_; }

  // Accessors; each requires the matching kind (checked).
  bool as_bool() const;
  int64_t as_int() const;    // bool or int
  double as_double() const;  // bool, int or float
  const std::string& as_string() const;
  const ValueList& as_list() const;
  const Dict& as_dict() const;  // a dict or a namespace
  Dict& as_namespace() const;
  const NativeFunction& as_callable() const;
  const std::string& undefined_hint() const;  // for Undefined: the error its misuse raises
  const std::string& callable_name() const;

  bool truthy() const;
  std::string str() const;        // Python str(); Undefined renders as ""
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // Python's name of the type, for error messages
  // Throws jinja2's UndefinedError message if this is Undefined.
  void require_defined() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool is_tuple_ = false;
  bool has_namespace_ = false;
  uint16_t depth_ = 0;
  // Strings are shared like lists: copying a value never copies its text (a list of 60
  // copies of a 60 MB string took 3.6 GB before).
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const ValueList>, std::shared_ptr<const Dict>, std::shared_ptr<Dict>,
               std::shared_ptr<const NativeFunction>>
      data_;
  std::string text_;  // Undefined: its hint; callable: its name
};

// Python ==: numbers compare across int/float/bool, containers element-wise, Undefined
// equals only Undefined.
bool values_equal(const Value& a, const Value& b);
// Python ordering (<0, 0, >0) of numbers, strings and lists; other pairs throw RenderError
// naming both types.
int compare_values(const Value& a, const Value& b, const char* op);
// Iterating a value: list items, dict keys, string characters; Undefined is empty. Other
// kinds throw "'T' object is not iterable".
ValueList iterate(const Value& v);
// Python len(); throws for kinds without one.
int64_t length(const Value& v);

// JSON -> Value. Objects keep the order of `j`: alphabetical for Json (nlohmann::json sorts
// keys), insertion order for nlohmann::ordered_json (what Python's json.loads gives).
Value from_json(const Json& j);
Value from_json(const nlohmann::ordered_json& j);

// HF's tojson: json.dumps(value, ensure_ascii, indent, separators, sort_keys).
struct JsonStyle {
  bool ensure_ascii = false;
  int indent = -1;             // < 0: single line
  std::string item_separator;  // empty: Python's default for the indent mode
  std::string key_separator;
  bool sort_keys = false;
};
std::string dump_json(const Value& v, const JsonStyle& style);

}  // namespace lmstack::tokenizer::jinja
