// Jinja filters for chat templates, each following jinja2's filters.py (and Hugging Face's
// own tojson, which is json.dumps with ensure_ascii=False and no HTML escaping). Filters not
// in kFilters are rejected at parse time as unsupported constructs.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "lmstack/tokenizer/jinja_context.h"
#include "lmstack/tokenizer/jinja_eval.h"
#include "lmstack/tokenizer/jinja_text.h"

namespace lmstack::tokenizer::jinja {

ArgReader::ArgReader(const CallArgs& args, const char* what, std::vector<std::string> params)
    : values_(params.size()) {
  if (args.positional.size() > params.size())
    fail(fmt::format("{}() takes at most {} argument(s) ({} given)", what, params.size(),
                     args.positional.size()));
  for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = args.positional[i];
  for (const auto& [key, v] : args.keyword) {
    const auto it = std::find(params.begin(), params.end(), key);
    if (it == params.end())
      fail(fmt::format("{}() got an unexpected keyword argument '{}'", what, key));
    values_[static_cast<size_t>(it - params.begin())] = v;
  }
}

namespace {

bool flag(const ArgReader& a, size_t i) { return a.has(i) && a.get(i).truthy(); }

std::optional<std::string> optional_string(const ArgReader& a, size_t i) {
  if (!a.has(i) || a.get(i).is_none()) return std::nullopt;
  return a.get(i).str();
}

Value f_tojson(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle style;
  style.ensure_ascii = flag(a, 0);
  if (a.has(1) && !a.get(1).is_none()) {
    if (!a.get(1).is_int()) fail("tojson: indent must be an integer");
    style.indent = static_cast<int>(std::clamp<int64_t>(a.get(1).as_int(), 0, 64));
  }
  if (a.has(2) && !a.get(2).is_none()) {
    const ValueList seps = iterate(a.get(2));
    if (seps.size() != 2) fail("tojson: separators must be a pair of strings");
    style.item_separator = seps[0].str();
    style.key_separator = seps[1].str();
  }
  style.sort_keys = flag(a, 3);
  return Value::string(dump_json(v, style));
}

Value f_trim(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "trim", {"chars"});
  return Value::string(py_strip(v.str(), true, true, optional_string(a, 0)));
}

Value f_length(Context&, const Value& v, const CallArgs& args) {
  ArgReader(args, "length", {});
  return Value::integer(length(v));
}

Value f_upper(Context&, const Value& v, const CallArgs&) {
  return Value::string(ascii_upper(v.str()));
}
Value f_lower(Context&, const Value& v, const CallArgs&) {
  return Value::string(ascii_lower(v.str()));
}
Value f_capitalize(Context&, const Value& v, const CallArgs&) {
  return Value::string(py_capitalize(v.str()));
}

// jinja2's title: words start after runs of whitespace, '-', '(', '{', '[' or '<'.
Value f_title(Context&, const Value& v, const CallArgs&) {
  std::string s = v.str();
  bool word_start = true;
  for (char& c : s) {
    const bool separator = std::isspace(static_cast<unsigned char>(c)) || std::strchr("-({[<", c);
    if (separator) {
      word_start = true;
      continue;
    }
    c = static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
    word_start = false;
  }
  return Value::string(s);
}

Value f_replace(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "replace", {"old", "new", "count"});
  const int64_t count = a.has(2) && !a.get(2).is_none() ? a.get(2).as_int() : -1;
  return Value::string(py_replace(v.str(), a.get(0).str(), a.get(1).str(), count));
}

Value f_first(Context&, const Value& v, const CallArgs&) {
  const ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Context&, const Value& v, const CallArgs&) {
  if (v.is_dict()) fail("'dict' object is not reversible");
  const ValueList items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_join(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "join", {"d", "attribute"});
  const std::string sep = a.has(0) ? a.get(0).str() : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    out += (first ? "" : sep) +
           (a.has(1) ? get_attribute_path(item, a.get(1).str()).str() : item.str());
    first = false;
    check_string_bytes(out.size());  // as it grows: a huge join took 3.9 GB (issue 13)
  }
  return Value::string(std::move(out));
}

Value f_default(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "default", {"default_value", "boolean"});
  const bool use_default = flag(a, 1) ? !v.truthy() : v.is_undefined();
  if (!use_default) return v;
  return a.has(0) ? a.get(0) : Value::string("");
}

Value f_list(Context&, const Value& v, const CallArgs&) { return Value::list(iterate(v)); }
Value f_string(Context&, const Value& v, const CallArgs&) { return Value::string(v.str()); }
Value f_safe(Context&, const Value& v, const CallArgs&) { return v; }

// Python float(str): optional whitespace, then a complete decimal literal, inf or nan.
std::optional<double> parse_float(const std::string& text) {
  const std::string s = py_replace(py_strip(text, true, true), "_", "", -1);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || s.find_first_of("xX") != std::string::npos)
    return std::nullopt;
  return d;
}

Value f_int(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "int", {"default", "base"});
  const Value fallback = a.has(0) ? a.get(0) : Value::integer(0);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::kFloat) {
    if (!std::isfinite(v.as_double())) return fallback;
    return Value::integer(static_cast<int64_t>(std::trunc(v.as_double())));
  }
  if (!v.is_string()) return fallback;
  const std::string s = py_replace(py_strip(v.as_string(), true, true), "_", "", -1);
  const int base = a.has(1) ? static_cast<int>(a.get(1).as_int()) : 10;
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, base);
  if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::integer(i);
  const auto d = parse_float(v.as_string());  // "42.23"|int is 42, as in jinja2
  if (d && std::isfinite(*d)) return Value::integer(static_cast<int64_t>(std::trunc(*d)));
  return fallback;
}

Value f_float(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "float", {"default"});
  const Value fallback = a.has(0) ? a.get(0) : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_double());
  if (!v.is_string()) return fallback;
  const auto d = parse_float(v.as_string());
  return d ? Value::number(*d) : fallback;
}

Value f_items(Context&, const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  ValueList pairs;
  for (const auto& [k, item] : v.as_dict().items())
    pairs.push_back(Value::list({Value::string(k), item}, /*is_tuple=*/true));
  return Value::list(std::move(pairs));
}

// select / reject / selectattr / rejectattr: keep items whose (attribute's) test passes.
Value select_items(Context& ctx, const Value& v, const CallArgs& args, bool by_attribute,
                   bool keep_when) {
  CallArgs rest = args;
  std::string attribute;
  if (by_attribute) {
    if (rest.positional.empty()) fail("selectattr/rejectattr need an attribute name");
    attribute = rest.positional.front().str();
    rest.positional.erase(rest.positional.begin());
  }
  TestFn test = nullptr;
  if (!rest.positional.empty()) {
    const std::string test_name = rest.positional.front().str();
    test = find_test(test_name);
    if (!test) fail(fmt::format("unsupported construct 'test {}'", test_name));
    rest.positional.erase(rest.positional.begin());
  }
  ValueList kept;
  for (const Value& item : iterate(v)) {
    const Value subject = by_attribute ? get_attribute_path(item, attribute) : item;
    const bool passed = test ? test(ctx, subject, rest) : subject.truthy();
    if (passed == keep_when) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}
Value f_select(Context& c, const Value& v, const CallArgs& a) {
  return select_items(c, v, a, false, true);
}
Value f_reject(Context& c, const Value& v, const CallArgs& a) {
  return select_items(c, v, a, false, false);
}
Value f_selectattr(Context& c, const Value& v, const CallArgs& a) {
  return select_items(c, v, a, true, true);
}
Value f_rejectattr(Context& c, const Value& v, const CallArgs& a) {
  return select_items(c, v, a, true, false);
}

// map(attribute='x', default=d) or map('filter', args...).
Value f_map(Context& ctx, const Value& v, const CallArgs& args) {
  ValueList out;
  if (args.positional.empty()) {
    const ArgReader a(args, "map", {"attribute", "default"});
    if (!a.has(0)) fail("map() needs a filter name or attribute=");
    for (const Value& item : iterate(v)) {
      Value x = get_attribute_path(item, a.get(0).str());
      out.push_back(x.is_undefined() && a.has(1) ? a.get(1) : x);
    }
    return Value::list(std::move(out));
  }
  const std::string name = args.positional.front().str();
  const FilterFn filter = find_filter(name);
  if (!filter) fail(fmt::format("unsupported construct 'filter {}'", name));
  CallArgs rest = args;
  rest.positional.erase(rest.positional.begin());
  for (const Value& item : iterate(v)) out.push_back(filter(ctx, item, rest));
  return Value::list(std::move(out));
}

Value f_indent(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "indent", {"width", "first", "blank"});
  const std::string pad =
      !a.has(0) ? "    "
      : a.get(0).is_string()
          ? a.get(0).as_string()
          : std::string(
                static_cast<size_t>(std::clamp<int64_t>(a.get(0).as_int(), 0, kMaxStringBytes + 1)),
                ' ');
  check_string_bytes(pad.size());
  const std::vector<std::string> lines = py_splitlines(v.str() + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    const bool indent_line = i > 0 && (flag(a, 2) || !lines[i].empty());
    out += (indent_line ? pad : "") + lines[i];
  }
  return Value::string(flag(a, 1) ? pad + out : out);
}

Value f_abs(Context&, const Value& v, const CallArgs&) {
  v.require_defined();
  if (v.is_int()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  if (v.is_number()) return Value::number(std::fabs(v.as_double()));
  fail(fmt::format("bad operand type for abs(): '{}'", v.type_name()));
}

Value f_round(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "round", {"precision", "method"});
  if (!v.is_number()) fail(fmt::format("round: expected a number, got '{}'", v.type_name()));
  const double scale = std::pow(10.0, a.has(0) ? static_cast<double>(a.get(0).as_int()) : 0.0);
  const std::string method = a.has(1) ? a.get(1).str() : "common";
  const double x = v.as_double() * scale;
  double r = 0;
  if (method == "common")
    r = std::nearbyint(x);  // Python's round(): half to even
  else if (method == "ceil")
    r = std::ceil(x);
  else if (method == "floor")
    r = std::floor(x);
  else
    fail("round: method must be 'common', 'ceil' or 'floor'");
  return Value::number(r / scale);
}

Value f_reverse(Context&, const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = decode_utf8(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(encode_utf8(cps));
  }
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// The sort key of sort/unique/min/max: the attribute if asked, lower-cased strings unless
// case_sensitive.
Value sort_key(const Value& item, const ArgReader& a, size_t case_index, size_t attr_index) {
  Value key = a.has(attr_index) ? get_attribute_path(item, a.get(attr_index).str()) : item;
  if (key.is_string() && !flag(a, case_index)) return Value::string(ascii_lower(key.as_string()));
  return key;
}

Value f_sort(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "sort", {"reverse", "case_sensitive", "attribute"});
  ValueList items = iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const int c = compare_values(sort_key(x, a, 1, 2), sort_key(y, a, 1, 2), "<");
    return flag(a, 0) ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

Value f_unique(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "unique", {"case_sensitive", "attribute"});
  ValueList out, seen;
  for (const Value& item : iterate(v)) {
    const Value key = sort_key(item, a, 0, 1);
    if (std::none_of(seen.begin(), seen.end(),
                     [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value extreme(const Value& v, const CallArgs& args, const char* what, int sign) {
  const ArgReader a(args, what, {"case_sensitive", "attribute"});
  const ValueList items = iterate(v);
  if (items.empty())
    return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i)
    if (compare_values(sort_key(items[i], a, 0, 1), sort_key(items[best], a, 0, 1), "<") * sign > 0)
      best = i;
  return items[best];
}
Value f_min(Context&, const Value& v, const CallArgs& args) { return extreme(v, args, "min", -1); }
Value f_max(Context&, const Value& v, const CallArgs& args) { return extreme(v, args, "max", 1); }

Value f_sum(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "sum", {"attribute", "start"});
  Value total = a.has(1) ? a.get(1) : Value::integer(0);
  for (const Value& item : iterate(v))
    total = binary_arithmetic(BinaryOp::kAdd, total,
                              a.has(0) ? get_attribute_path(item, a.get(0).str()) : item);
  return total;
}

Value f_escape(Context&, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value f_attr(Context&, const Value& v, const CallArgs& args) {
  const ArgReader a(args, "attr", {"name"});
  return get_attr(v, a.get(0).str());
}

Value f_wordcount(Context&, const Value& v, const CallArgs&) {
  return Value::integer(static_cast<int64_t>(py_split(v.str(), std::nullopt, -1).size()));
}

struct FilterEntry {
  const char* name;
  FilterFn fn;
};
constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_capitalize},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(const std::string& name) {
  for (const FilterEntry& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

}  // namespace lmstack::tokenizer::jinja
