// JSON schema → grammar nodes (see json_grammar.h). The matcher over the nodes is in
// json_matcher.cc. Every refusal names the schema path, so a client sees which part of its
// schema this server cannot enforce instead of getting unconstrained output.
#include <algorithm>

#include <fmt/format.h>

#include "lmstack/core/error.h"
#include "lmstack/serve/json_grammar.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;
using Kind = JsonGrammar::Kind;

JsonGrammar::Node node_of(Kind kind) {
  JsonGrammar::Node n;
  n.kind = kind;
  return n;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw_error<RequestError>("{}: {}", path, why);
}

bool is_annotation(const std::string& key) {
  for (const char* k :
       {"title", "description", "default", "examples", "$schema", "$id", "format", "$comment"})
    if (key == k) return true;
  return false;
}

bool is_supported(const std::string& key) {
  for (const char* k : {"type", "properties", "required", "additionalProperties", "items",
                        "minItems", "maxItems", "minLength", "maxLength", "enum", "const"})
    if (key == k) return true;
  return is_annotation(key);
}

int64_t count_field(const OJson& s, const char* key, int64_t fallback, const std::string& path) {
  if (!s.contains(key)) return fallback;
  const OJson& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    refuse(path + "." + key, "must be a non-negative integer");
  return v.get<int64_t>();
}

std::string dump_compact(const OJson& v) {
  return v.dump(-1, ' ', false, OJson::error_handler_t::strict);
}

}  // namespace

JsonGrammar::JsonGrammar() {
  add(node_of(Kind::kAny));
  add(node_of(Kind::kFreeObject));
  Node array = node_of(Kind::kArray);
  array.items = kAnyNode;
  add(array);
  add(node_of(Kind::kString));
  add(node_of(Kind::kNumber));
  Node words = node_of(Kind::kLiteral);
  words.literals = {"true", "false", "null"};
  add(words);
}

int JsonGrammar::add(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

JsonGrammar JsonGrammar::any_object() {
  JsonGrammar g;
  g.root_ = kFreeObjectNode;
  return g;
}

JsonGrammar JsonGrammar::from_schema(const OJson& schema, const std::string& root_path) {
  JsonGrammar g;
  g.root_ = g.add_schema(schema, root_path);
  return g;
}

int JsonGrammar::add_schema(const OJson& schema, const std::string& path) {
  return compile(schema, path, 0);
}

int JsonGrammar::add_raw_literal(std::string text) {
  Node n = node_of(Kind::kLiteral);
  n.literals = {std::move(text)};
  n.raw = true;
  return add(std::move(n));
}

int JsonGrammar::add_seq(std::vector<int> children) {
  LMSTACK_CHECK(!children.empty(), "an empty sequence");
  Node n = node_of(Kind::kSeq);
  n.children = std::move(children);
  return add(std::move(n));
}

int JsonGrammar::add_alt(std::vector<int> seqs) {
  LMSTACK_CHECK(!seqs.empty() && seqs.size() <= kMaxChoices, "alternatives: {}", seqs.size());
  // The matcher picks an alternative once its first literal is matched whole, so no first
  // literal may be a prefix of another.
  for (int a : seqs)
    for (int b : seqs) {
      const std::string& la = node(node(a).children[0]).literals[0];
      const std::string& lb = node(node(b).children[0]).literals[0];
      LMSTACK_CHECK(a == b || lb.compare(0, la.size(), la) != 0, "'{}' is a prefix of '{}'", la,
                    lb);
    }
  Node n = node_of(Kind::kAlt);
  n.children = std::move(seqs);
  return add(std::move(n));
}

int JsonGrammar::compile(const OJson& s, const std::string& path, int depth) {
  // Leaves the matcher's last frames for keys and tool-call wrappers.
  if (depth > kMaxSchemaDepth)
    refuse(path, fmt::format("nests deeper than {} levels", kMaxSchemaDepth));
  if (s.is_boolean() && s.get<bool>()) return kAnyNode;
  if (!s.is_object()) refuse(path, "a schema must be an object");
  for (const auto& [key, value] : s.items())
    if (!is_supported(key)) refuse(path + "." + key, "this schema keyword is not supported");
  if (s.contains("enum") || s.contains("const")) {
    Node n = node_of(Kind::kLiteral);
    if (s.contains("const")) n.literals.push_back(dump_compact(s["const"]));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty() || s["enum"].size() > kMaxChoices)
        refuse(path + ".enum", fmt::format("must be an array of 1 to {} values", kMaxChoices));
      for (const OJson& v : s["enum"]) n.literals.push_back(dump_compact(v));
    }
    return add(std::move(n));
  }
  std::string type;
  if (s.contains("type")) {
    if (!s["type"].is_string()) refuse(path + ".type", "must be one type name (lists are not)");
    type = s["type"].get<std::string>();
  } else if (s.contains("properties")) {
    type = "object";
  } else if (s.contains("items")) {
    type = "array";
  } else {
    return kAnyNode;
  }
  if (type == "object") return compile_object(s, path, depth);
  if (type == "array") return compile_array(s, path, depth);
  if (type == "number") return kNumberNode;
  if (type == "integer") return add(node_of(Kind::kInteger));
  if (type == "string") {
    Node n = node_of(Kind::kString);
    n.min_count = count_field(s, "minLength", 0, path);
    n.max_count = count_field(s, "maxLength", INT32_MAX, path);
    if (n.min_count > n.max_count) refuse(path + ".minLength", "is above maxLength");
    return add(std::move(n));
  }
  Node n = node_of(Kind::kLiteral);
  if (type == "boolean")
    n.literals = {"true", "false"};
  else if (type == "null")
    n.literals = {"null"};
  else
    refuse(path + ".type", fmt::format("'{}' is not a JSON-schema type", type));
  return add(std::move(n));
}

int JsonGrammar::compile_object(const OJson& s, const std::string& path, int depth) {
  const bool has_props = s.contains("properties");
  if (s.contains("additionalProperties")) {
    const OJson& a = s["additionalProperties"];
    const bool open = !(a.is_boolean() && !a.get<bool>());
    if (open && (has_props || !(a.is_boolean() || (a.is_object() && a.empty()))))
      refuse(path + ".additionalProperties",
             "only false is supported with properties (true only without them)");
  }
  if (!has_props && !s.contains("required")) return kFreeObjectNode;
  if (has_props && (!s["properties"].is_object() || s["properties"].size() > kMaxChoices))
    refuse(path + ".properties",
           fmt::format("must be an object of at most {} properties", kMaxChoices));
  Node n = node_of(Kind::kObject);
  if (has_props)
    for (const auto& [name, sub] : s["properties"].items()) {
      Prop p;
      p.key = dump_compact(OJson(name)) + ":";
      p.node = compile(sub, path + ".properties." + name, depth + 1);
      n.props.push_back(std::move(p));
    }
  if (s.contains("required")) {
    if (!s["required"].is_array()) refuse(path + ".required", "must be an array of names");
    for (const OJson& r : s["required"]) {
      const std::string key = r.is_string() ? dump_compact(r) + ":" : "";
      auto it =
          std::find_if(n.props.begin(), n.props.end(), [&](const Prop& p) { return p.key == key; });
      if (it == n.props.end())
        refuse(path + ".required", fmt::format("names {}, which is not in properties", r.dump()));
      it->required = true;
    }
  }
  return add(std::move(n));
}

int JsonGrammar::compile_array(const OJson& s, const std::string& path, int depth) {
  Node n = node_of(Kind::kArray);
  n.items = s.contains("items") ? compile(s["items"], path + ".items", depth + 1) : kAnyNode;
  n.min_count = count_field(s, "minItems", 0, path);
  n.max_count = count_field(s, "maxItems", INT32_MAX, path);
  if (n.min_count > n.max_count) refuse(path + ".minItems", "is above maxItems");
  return add(std::move(n));
}

}  // namespace lmstack::serve
