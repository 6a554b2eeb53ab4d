// Jinja tests (`x is string`), Python methods on str/dict/list values (`s.strip()`,
// `d.get(k)`), and the global functions Hugging Face's chat environment provides: range,
// namespace, dict, raise_exception and strftime_now. Tests follow jinja2's tests.py; methods
// that would mutate a value are refused, as ImmutableSandboxedEnvironment refuses them.
#include <algorithm>
#include <ctime>
#include <unordered_map>

#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_eval.h"
#include "lmstack/tokenizer/jinja_text.h"

namespace lmstack::tokenizer::jinja {
namespace {

const Value& arg0(const CallArgs& args, const char* test) {
  if (args.positional.empty()) fail(fmt::format("test '{}' needs an argument", test));
  return args.positional[0];
}

using Kind = Value::Kind;
bool t_defined(Context&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Context&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Context&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(Context&, const Value& v, const CallArgs&) { return v.kind() == Kind::kBool; }
bool t_true(Context&, const Value& v, const CallArgs&) {
  return v.kind() == Kind::kBool && v.as_bool();
}
bool t_false(Context&, const Value& v, const CallArgs&) {
  return v.kind() == Kind::kBool && !v.as_bool();
}
bool t_integer(Context&, const Value& v, const CallArgs&) { return v.kind() == Kind::kInt; }
bool t_float(Context&, const Value& v, const CallArgs&) { return v.kind() == Kind::kFloat; }
bool t_number(Context&, const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(Context&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(Context&, const Value& v, const CallArgs&) { return v.is_dict(); }
// jinja2's Undefined defines __iter__ and __len__, so it counts as iterable and sequence.
bool t_iterable(Context&, const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_callable(Context&, const Value& v, const CallArgs&) { return v.kind() == Kind::kCallable; }
bool t_odd(Context&, const Value& v, const CallArgs&) {
  if (!v.is_int()) fail("test 'odd' needs an integer");
  return v.as_int() % 2 != 0;
}
bool t_even(Context&, const Value& v, const CallArgs&) {
  if (!v.is_int()) fail("test 'even' needs an integer");
  return v.as_int() % 2 == 0;
}
bool t_divisibleby(Context&, const Value& v, const CallArgs& args) {
  const Value& d = arg0(args, "divisibleby");
  if (!v.is_int() || !d.is_int() || d.as_int() == 0)
    fail("test 'divisibleby' needs nonzero integers");
  return v.as_int() % d.as_int() == 0;
}
bool t_eq(Context&, const Value& v, const CallArgs& a) { return values_equal(v, arg0(a, "eq")); }
bool t_ne(Context&, const Value& v, const CallArgs& a) { return !values_equal(v, arg0(a, "ne")); }
bool t_lt(Context&, const Value& v, const CallArgs& a) { return compare("<", v, arg0(a, "lt")); }
bool t_le(Context&, const Value& v, const CallArgs& a) { return compare("<=", v, arg0(a, "le")); }
bool t_gt(Context&, const Value& v, const CallArgs& a) { return compare(">", v, arg0(a, "gt")); }
bool t_ge(Context&, const Value& v, const CallArgs& a) { return compare(">=", v, arg0(a, "ge")); }
bool t_in(Context&, const Value& v, const CallArgs& a) { return contains(arg0(a, "in"), v); }
bool t_sameas(Context&, const Value& v, const CallArgs& a) {
  const Value& other = arg0(a, "sameas");  // identity: only singletons are comparable here
  return (v.is_none() && other.is_none()) ||
         (v.kind() == Kind::kBool && other.kind() == Kind::kBool && v.as_bool() == other.as_bool());
}
bool t_lower(Context&, const Value& v, const CallArgs&) {
  const std::string s = v.str();
  return ascii_lower(s) == s && ascii_upper(s) != s;
}
bool t_upper(Context&, const Value& v, const CallArgs&) {
  const std::string s = v.str();
  return ascii_upper(s) == s && ascii_lower(s) != s;
}
bool t_escaped(Context&, const Value&, const CallArgs&) { return false; }
bool t_filter(Context&, const Value& v, const CallArgs&) {
  return v.is_string() && find_filter(v.as_string());
}
bool t_test(Context&, const Value& v, const CallArgs&) {
  return v.is_string() && find_test(v.as_string());
}

struct TestEntry {
  const char* name;
  TestFn fn;
};
constexpr TestEntry kTests[] = {
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"lower", t_lower},
    {"lessthan", t_lt},
    {"lt", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_iterable},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

// ---- methods ----
using Method = Value (*)(const Value& self, const CallArgs& args);

std::optional<std::string> opt_str(const ArgReader& a, size_t i) {
  if (!a.has(i) || a.get(i).is_none()) return std::nullopt;
  if (!a.get(i).is_string()) fail("expected a string argument");
  return a.get(i).as_string();
}

Value m_strip(const Value& s, const CallArgs& args) {
  return Value::string(
      py_strip(s.as_string(), true, true, opt_str(ArgReader(args, "strip", {"chars"}), 0)));
}
Value m_lstrip(const Value& s, const CallArgs& args) {
  return Value::string(
      py_strip(s.as_string(), true, false, opt_str(ArgReader(args, "lstrip", {"chars"}), 0)));
}
Value m_rstrip(const Value& s, const CallArgs& args) {
  return Value::string(
      py_strip(s.as_string(), false, true, opt_str(ArgReader(args, "rstrip", {"chars"}), 0)));
}
Value m_split(const Value& s, const CallArgs& args) {
  const ArgReader a(args, "split", {"sep", "maxsplit"});
  const int64_t maxsplit = a.has(1) ? a.get(1).as_int() : -1;
  const std::optional<std::string> sep = opt_str(a, 0);
  if (sep && sep->empty()) fail("empty separator");
  ValueList parts;
  for (auto& p : py_split(s.as_string(), sep, maxsplit))
    parts.push_back(Value::string(std::move(p)));
  return Value::list(std::move(parts));
}
// startswith/endswith take a string or a tuple of strings.
bool affix_match(const Value& s, const CallArgs& args, const char* what, bool prefix) {
  const ArgReader a(args, what, {"affix"});
  const Value& affix = a.get(0);
  const ValueList options = affix.is_list() ? affix.as_list() : ValueList{affix};
  const std::string& text = s.as_string();
  for (const Value& o : options) {
    if (!o.is_string()) fail(fmt::format("{} arg must be str or a tuple of str", what));
    const std::string& x = o.as_string();
    if (x.size() <= text.size() &&
        text.compare(prefix ? 0 : text.size() - x.size(), x.size(), x) == 0)
      return true;
  }
  return false;
}
Value m_startswith(const Value& s, const CallArgs& a) {
  return Value::boolean(affix_match(s, a, "startswith", true));
}
Value m_endswith(const Value& s, const CallArgs& a) {
  return Value::boolean(affix_match(s, a, "endswith", false));
}
Value m_upper(const Value& s, const CallArgs&) { return Value::string(ascii_upper(s.as_string())); }
Value m_lower(const Value& s, const CallArgs&) { return Value::string(ascii_lower(s.as_string())); }
Value m_title(const Value& s, const CallArgs&) { return Value::string(py_title(s.as_string())); }
Value m_capitalize(const Value& s, const CallArgs&) {
  return Value::string(py_capitalize(s.as_string()));
}
Value m_replace(const Value& s, const CallArgs& args) {
  const ArgReader a(args, "replace", {"old", "new", "count"});
  if (!a.get(0).is_string() || !a.get(1).is_string()) fail("replace() arguments must be str");
  return Value::string(py_replace(s.as_string(), a.get(0).as_string(), a.get(1).as_string(),
                                  a.has(2) ? a.get(2).as_int() : -1));
}
Value m_find(const Value& s, const CallArgs& args) {
  const ArgReader a(args, "find", {"sub"});
  const size_t pos = s.as_string().find(a.get(0).str());
  if (pos == std::string::npos) return Value::integer(-1);
  return Value::integer(
      static_cast<int64_t>(utf8_length(std::string_view(s.as_string()).substr(0, pos))));
}
Value m_count(const Value& self, const CallArgs& args) {
  const ArgReader a(args, "count", {"x"});
  int64_t n = 0;
  if (self.is_list()) {
    for (const Value& v : self.as_list()) n += values_equal(v, a.get(0));
    return Value::integer(n);
  }
  const std::string sub = a.get(0).str();
  if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(self.as_string())) + 1);
  for (size_t pos = 0; (pos = self.as_string().find(sub, pos)) != std::string::npos;
       pos += sub.size())
    ++n;
  return Value::integer(n);
}
Value m_splitlines(const Value& s, const CallArgs&) {
  ValueList lines;
  for (auto& l : py_splitlines(s.as_string())) lines.push_back(Value::string(std::move(l)));
  return Value::list(std::move(lines));
}
Value m_join(const Value& s, const CallArgs& args) {
  const ArgReader a(args, "join", {"iterable"});
  std::string out;
  bool first = true;
  for (const Value& v : iterate(a.get(0))) {
    if (!v.is_string())
      fail(fmt::format("sequence item: expected str instance, {} found", v.type_name()));
    out += (first ? "" : s.as_string()) + v.as_string();
    first = false;
  }
  return Value::string(std::move(out));
}
Value m_isdigit(const Value& s, const CallArgs&) {
  const std::string& t = s.as_string();
  return Value::boolean(
      !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }));
}

Value m_get(const Value& d, const CallArgs& args) {
  const ArgReader a(args, "get", {"key", "default"});
  const Value* v = a.get(0).is_string() ? d.as_dict().find(a.get(0).as_string()) : nullptr;
  return v ? *v : a.has(1) ? a.get(1) : Value::none();
}
Value m_items(const Value& d, const CallArgs&) {
  ValueList pairs;
  for (const auto& [k, v] : d.as_dict().items())
    pairs.push_back(Value::list({Value::string(k), v}, true));
  return Value::list(std::move(pairs));
}
Value m_keys(const Value& d, const CallArgs&) { return Value::list(iterate(d)); }
Value m_values(const Value& d, const CallArgs&) {
  ValueList values;
  for (const auto& item : d.as_dict().items()) values.push_back(item.second);
  return Value::list(std::move(values));
}

struct MethodEntry {
  Kind kind;
  const char* name;
  Method fn;
};
constexpr MethodEntry kMethods[] = {
    {Kind::kString, "strip", m_strip},
    {Kind::kString, "lstrip", m_lstrip},
    {Kind::kString, "rstrip", m_rstrip},
    {Kind::kString, "split", m_split},
    {Kind::kString, "startswith", m_startswith},
    {Kind::kString, "endswith", m_endswith},
    {Kind::kString, "upper", m_upper},
    {Kind::kString, "lower", m_lower},
    {Kind::kString, "title", m_title},
    {Kind::kString, "capitalize", m_capitalize},
    {Kind::kString, "replace", m_replace},
    {Kind::kString, "find", m_find},
    {Kind::kString, "count", m_count},
    {Kind::kString, "splitlines", m_splitlines},
    {Kind::kString, "join", m_join},
    {Kind::kString, "isdigit", m_isdigit},
    {Kind::kDict, "get", m_get},
    {Kind::kDict, "items", m_items},
    {Kind::kDict, "keys", m_keys},
    {Kind::kDict, "values", m_values},
    {Kind::kList, "count", m_count},
};
// Python methods that exist but mutate their object, or are outside the subset.
constexpr const char* kRefusedMethods[] = {"append",  "pop",    "extend",     "insert", "remove",
                                           "clear",   "update", "setdefault", "sort",   "reverse",
                                           "popitem", "format", "format_map", "encode"};

const MethodEntry* find_method(const Value& obj, const std::string& name) {
  for (const MethodEntry& m : kMethods)
    if (m.kind == obj.kind() && name == m.name) return &m;
  return nullptr;
}

// ---- globals ----
Value g_range(Context&, const CallArgs& args) {
  const ArgReader a(args, "range", {"start", "stop", "step"});
  for (size_t i = 0; i < 3; ++i)
    if (a.has(i) && !a.get(i).is_int()) fail("range() arguments must be integers");
  if (!a.has(0)) fail("range expected at least 1 argument, got 0");
  const int64_t start = a.has(1) ? a.get(0).as_int() : 0;
  const int64_t stop = a.has(1) ? a.get(1).as_int() : a.get(0).as_int();
  const int64_t step = a.has(2) ? a.get(2).as_int() : 1;
  if (step == 0) fail("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (out.size() >= 100000)  // jinja2's sandbox MAX_RANGE
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // Python's ints do not wrap
  }
  return Value::list(std::move(out));
}

std::shared_ptr<Dict> dict_from_args(const CallArgs& args, const char* what) {
  auto d = std::make_shared<Dict>();
  if (args.positional.size() > 1)
    fail(fmt::format("{}() takes at most 1 positional argument", what));
  if (!args.positional.empty()) {
    if (!args.positional[0].is_dict())
      fail(fmt::format("{}() positional argument must be a dict", what));
    for (const auto& [k, v] : args.positional[0].as_dict().items()) d->set(k, v);
  }
  for (const auto& [k, v] : args.keyword) d->set(k, v);
  return d;
}
Value g_namespace(Context&, const CallArgs& args) {
  return Value::name_space(dict_from_args(args, "namespace"));
}
Value g_dict(Context&, const CallArgs& args) { return Value::dict(dict_from_args(args, "dict")); }

Value g_raise_exception(Context&, const CallArgs& args) {
  const ArgReader a(args, "raise_exception", {"message"});
  fail("raise_exception: " + a.get(0).str());
}

// datetime.now().strftime(format), in local time as Hugging Face's helper does.
Value g_strftime_now(Context&, const CallArgs& args) {
  const ArgReader a(args, "strftime_now", {"format"});
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[256];
  const size_t n = std::strftime(buf, sizeof(buf), a.get(0).str().c_str(), &local);
  return Value::string(std::string(buf, n));
}

}  // namespace

TestFn find_test(const std::string& name) {
  for (const TestEntry& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

const Value* find_global(const std::string& name) {
  static const std::unordered_map<std::string, Value> kGlobals = {
      {"range", Value::callable("range", g_range)},
      {"namespace", Value::callable("namespace", g_namespace)},
      {"dict", Value::callable("dict", g_dict)},
      {"raise_exception", Value::callable("raise_exception", g_raise_exception)},
      {"strftime_now", Value::callable("strftime_now", g_strftime_now)},
  };
  const auto it = kGlobals.find(name);
  return it == kGlobals.end() ? nullptr : &it->second;
}

bool has_method(const Value& obj, const std::string& name) {
  if (find_method(obj, name)) return true;
  if (!obj.is_string() && !obj.is_list() && !obj.is_dict()) return false;
  return std::find_if(std::begin(kRefusedMethods), std::end(kRefusedMethods),
                      [&](const char* m) { return name == m; }) != std::end(kRefusedMethods);
}

Value call_method(Context&, const Value& obj, const std::string& name, const CallArgs& args) {
  if (const MethodEntry* m = find_method(obj, name)) return m->fn(obj, args);
  fail(
      fmt::format("unsupported construct 'method {}.{}' (mutating methods are refused, as in "
                  "jinja2's ImmutableSandboxedEnvironment)",
                  obj.type_name(), name));
}

}  // namespace lmstack::tokenizer::jinja
