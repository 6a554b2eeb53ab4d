// JsonGrammar / JsonMatcher on hand-written byte strings: for each schema feature, texts that
// must be accepted whole (complete), prefixes that must stay open, and texts that must be
// refused at some byte; plus schemas that must be refused naming the path.
#include "lmstack/serve/json_grammar.h"

#include <gtest/gtest.h>

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

std::shared_ptr<const JsonGrammar> schema(const char* text) {
  return std::make_shared<JsonGrammar>(JsonGrammar::from_schema(OJson::parse(text), "schema"));
}

// "complete": fed whole and is a complete value; "open": fed whole, not complete; "refused".
std::string outcome(const std::shared_ptr<const JsonGrammar>& g, std::string_view text) {
  JsonMatcher m(g);
  if (!m.feed(text)) return "refused";
  return m.is_complete() ? "complete" : "open";
}

TEST(JsonGrammarTest, AnyObject) {
  const auto g = std::make_shared<JsonGrammar>(JsonGrammar::any_object());
  EXPECT_EQ(outcome(g, "{}"), "complete");
  EXPECT_EQ(outcome(g, R"({"a":[1,-2.5e+3,true,null,{"b":"x"}],"c":{}})"), "complete");
  EXPECT_EQ(outcome(g, R"({"a":[1,)"), "open");
  EXPECT_EQ(outcome(g, "[]"), "refused");           // json_object: the root is an object
  EXPECT_EQ(outcome(g, "{} "), "refused");          // nothing after the value
  EXPECT_EQ(outcome(g, R"({"a": 1})"), "refused");  // compact: no whitespace
  EXPECT_EQ(outcome(g, R"({"a":01})"), "refused");
  EXPECT_EQ(outcome(g, R"({"a":1.)"), "open");
  EXPECT_EQ(outcome(g, R"({"a":1.})"), "refused");
  EXPECT_EQ(outcome(g, R"({"a":tru})"), "refused");
  EXPECT_EQ(outcome(g, R"({"a",1})"), "refused");
}

TEST(JsonGrammarTest, StringsEscapesAndUtf8) {
  const auto g = schema(R"({"type": "string"})");
  EXPECT_EQ(outcome(g, R"("a\"b\\c\/\n\u00e9\uD7FF")"), "complete");
  EXPECT_EQ(outcome(g, "\"caf\xC3\xA9 \xF0\x9F\x98\x80\""), "complete");
  EXPECT_EQ(outcome(g, "\"\xC3"), "open");
  EXPECT_EQ(outcome(g, "\"\xC0\xAF\""), "refused");          // overlong
  EXPECT_EQ(outcome(g, "\"\xED\xA0\x80\""), "refused");      // UTF-16 surrogate as UTF-8
  EXPECT_EQ(outcome(g, "\"\xF4\x90\x80\x80\""), "refused");  // past U+10FFFF
  EXPECT_EQ(outcome(g, R"("\uD800")"), "refused");           // lone surrogate escape
  EXPECT_EQ(outcome(g, R"("\x")"), "refused");
  EXPECT_EQ(outcome(g, "\"a\nb\""), "refused");  // raw control character
  const auto bounded = schema(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_EQ(outcome(bounded, R"("a")"), "refused");
  EXPECT_EQ(outcome(bounded, R"("a\n")"), "complete");
  EXPECT_EQ(outcome(bounded, "\"\xC3\xA9\xC3\xA9\xC3\xA9\""), "complete");  // characters
  EXPECT_EQ(outcome(bounded, R"("abcd")"), "refused");
}

TEST(JsonGrammarTest, NumbersAndIntegers) {
  const auto num = schema(R"({"type": "number"})");
  for (const char* ok : {"0", "-0", "12", "-3.25", "1e5", "1E-7", "0.5e+12"})
    EXPECT_EQ(outcome(num, ok), "complete") << ok;
  for (const char* open : {"-", "1.", "1e", "1e+"}) EXPECT_EQ(outcome(num, open), "open") << open;
  for (const char* bad : {"01", "+1", ".5", "1.e3", "--1", "1e123", "12345678901234567"})
    EXPECT_EQ(outcome(num, bad), "refused") << bad;
  const auto integer = schema(R"({"type": "integer"})");
  EXPECT_EQ(outcome(integer, "-42"), "complete");
  EXPECT_EQ(outcome(integer, "4.2"), "refused");
  EXPECT_EQ(outcome(integer, "4e2"), "refused");
}

TEST(JsonGrammarTest, ObjectPropertiesInOrderRequiredEnforced) {
  const auto g = schema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "ok": {"type": "boolean"}},
      "required": ["name", "ok"]})");
  EXPECT_EQ(outcome(g, R"({"name":"x","age":3,"ok":true})"), "complete");
  EXPECT_EQ(outcome(g, R"({"name":"x","ok":false})"), "complete");  // optional left out
  EXPECT_EQ(outcome(g, R"({"name":"x"})"), "refused");              // 'ok' is required
  EXPECT_EQ(outcome(g, R"({"age":3})"), "refused");                 // 'name' comes first
  EXPECT_EQ(outcome(g, R"({"ok":true,"name":"x"})"), "refused");    // schema order
  EXPECT_EQ(outcome(g, R"({"name":"x","other":1})"), "refused");    // no additional keys
  EXPECT_EQ(outcome(g, R"({"name":"x","ok":true,"age":1})"), "refused");
  EXPECT_EQ(outcome(g, R"({})"), "refused");
  EXPECT_EQ(outcome(g, R"({"na)"), "open");
}

TEST(JsonGrammarTest, ArraysEnumsConstNullAndNesting) {
  const auto g = schema(R"({"type": "object", "properties": {
      "tags": {"type": "array", "items": {"enum": ["a", "b", 1, 12, null]}, "minItems": 1,
               "maxItems": 2},
      "inner": {"properties": {"v": {"const": {"k": [true]}}, "n": {"type": "null"}},
                "required": ["v"]}}})");
  EXPECT_EQ(outcome(g, R"({"tags":["a",12],"inner":{"v":{"k":[true]},"n":null}})"), "complete");
  EXPECT_EQ(outcome(g, R"({"tags":[1]})"), "complete");           // 1 ends when ']' follows
  EXPECT_EQ(outcome(g, R"({"tags":[]})"), "refused");             // minItems
  EXPECT_EQ(outcome(g, R"({"tags":["a","b","a"]})"), "refused");  // maxItems
  EXPECT_EQ(outcome(g, R"({"tags":["c"]})"), "refused");
  EXPECT_EQ(outcome(g, R"({"tags":[123]})"), "refused");
  EXPECT_EQ(outcome(g, R"({"inner":{"v":{"k":[false]}}})"), "refused");
  EXPECT_EQ(outcome(g, R"({"inner":{}})"), "refused");
  EXPECT_EQ(outcome(g, "{}"), "complete");
  const auto root_enum = schema(R"({"enum": [1, 12]})");
  EXPECT_EQ(outcome(root_enum, "1"), "complete");  // may end, or go on to 12
  EXPECT_EQ(outcome(root_enum, "12"), "complete");
  EXPECT_EQ(outcome(root_enum, "13"), "refused");
}

TEST(JsonGrammarTest, RawWrappersAndAlternatives) {
  JsonGrammar g;
  const auto seq = [&](const std::string& name) {
    return g.add_seq({g.add_raw_literal("<c>{\"name\":\"" + name + "\",\"a\":"),
                      g.add_schema(OJson::parse(R"({"properties": {"x": {"type": "integer"}},
                                                   "required": ["x"]})"),
                                   "tools"),
                      g.add_raw_literal("}</c>")});
  };
  g.set_root(g.add_alt({seq("f"), seq("fg")}));
  const auto shared = std::make_shared<const JsonGrammar>(std::move(g));
  EXPECT_EQ(outcome(shared, R"(<c>{"name":"fg","a":{"x":5}}</c>)"), "complete");
  EXPECT_EQ(outcome(shared, R"(<c>{"name":"f","a":{"x":-1}}</c>)"), "complete");
  EXPECT_EQ(outcome(shared, R"(<c>{"name":"h")"), "refused");
  EXPECT_EQ(outcome(shared, R"(<c>{"name":"f","a":{"x":5}})"), "open");
  JsonMatcher m(shared);
  EXPECT_TRUE(m.in_raw_literal());
  ASSERT_TRUE(m.feed(R"(<c>{"name":"f","a":)"));
  EXPECT_FALSE(m.in_raw_literal());
  ASSERT_TRUE(m.feed(R"({"x":5})"));
  EXPECT_TRUE(m.in_raw_literal());
}

TEST(JsonGrammarTest, UnsupportedSchemasAreRefusedNamingThePath) {
  const auto refused = [](const char* text) -> std::string {
    try {
      JsonGrammar::from_schema(OJson::parse(text), "s");
      return "accepted";
    } catch (const RequestError& e) {
      return e.what();
    }
  };
  EXPECT_EQ(refused(R"({"properties": {"a": {"type": "string", "pattern": "x+"}}})"),
            "s.properties.a.pattern: this schema keyword is not supported");
  EXPECT_EQ(refused(R"({"anyOf": [{"type": "string"}]})"),
            "s.anyOf: this schema keyword is not supported");
  EXPECT_EQ(refused(R"({"type": ["string", "null"]})"),
            "s.type: must be one type name (lists are not)");
  EXPECT_EQ(refused(R"({"type": "strin"})"), "s.type: 'strin' is not a JSON-schema type");
  EXPECT_EQ(refused(R"({"properties": {"a": {}}, "required": ["b"]})"),
            "s.required: names \"b\", which is not in properties");
  EXPECT_EQ(refused(R"({"properties": {"a": {}}, "additionalProperties": true})"),
            "s.additionalProperties: only false is supported with properties (true only "
            "without them)");
  EXPECT_EQ(refused(R"({"items": {"type": "array", "minItems": -1}})"),
            "s.items.minItems: must be a non-negative integer");
  EXPECT_EQ(refused("3"), "s: a schema must be an object");
  EXPECT_EQ(refused(R"({"title": "t", "description": "d", "type": "integer"})"), "accepted");
}

}  // namespace
}  // namespace lmstack::serve
