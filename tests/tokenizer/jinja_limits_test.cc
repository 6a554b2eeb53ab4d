// The Jinja interpreter's limits (docs/reliability.md): each template below crashed, hung or
// took gigabytes before (issue 13) and now fails with an error naming the limit and the
// template line. The real templates in tests/data still render to
// their goldens (chat_template_test.cc).
#include <gtest/gtest.h>

#include <string>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::tokenizer {
namespace {

std::string render(const std::string& source) {
  return ChatTemplate::parse(source, "t").render(parse_json("{}", "context"));
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Expects `source` to fail with E whose message contains each needle.
template <class E>
void expect_limit(const std::string& source, std::initializer_list<std::string> needles) {
  try {
    render(source);
    ADD_FAILURE() << "no error: " << source.substr(0, 80);
  } catch (const E& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(JinjaLimits, LongChainsAreRefusedAtParse) {
  const char* kNesting = "nests deeper than 200 levels (kMaxNesting)";
  expect_limit<FormatError>("{{ 'a'" + repeat(" ~ 'a'", 5000) + " }}", {"t:1:", kNesting});
  expect_limit<FormatError>("{{ x" + repeat(" and x", 5000) + " }}", {kNesting});
  expect_limit<FormatError>("{{ 1" + repeat(" + 1", 5000) + " }}", {kNesting});
  expect_limit<FormatError>("{{ 'a'" + repeat("|trim", 5000) + " }}", {kNesting});
  expect_limit<FormatError>("{{ x" + repeat(".a", 5000) + " }}", {kNesting});
  expect_limit<FormatError>("{{ x" + repeat("()", 5000) + " }}", {kNesting});
  expect_limit<FormatError>("\n{{ 1" + repeat(" if x else 1", 5000) + " }}",
                            {"t:2:", "nesting deeper than 200 levels"});
  expect_limit<FormatError>("{{ " + repeat("[", 5000) + repeat("]", 5000) + "|tojson }}",
                            {"nesting deeper than 200 levels"});
  // Real templates stay far below: 150 links render.
  EXPECT_EQ(render("{{ ''" + repeat(" ~ 'a'", 150) + " }}"), std::string(150, 'a'));
}

TEST(JinjaLimits, ValuesBuiltDeepAtRenderTime) {
  expect_limit<RequestError>(
      "{% set ns = namespace(x=[]) %}\n{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}{{ ns.x|tojson }}",
      {"t:2:", "a value nests deeper than 512 levels (kMaxValueDepth)"});
  expect_limit<RequestError>(
      "{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}"
      "{% endfor %}{{ ns.x }}",
      {"kMaxValueDepth"});
}

TEST(JinjaLimits, ANamespaceCannotContainItself) {
  expect_limit<RequestError>("{% set ns = namespace(a=1) %}\n{% set ns.a = ns %}{{ ns }}",
                             {"t:2:", "it would contain itself"});
  expect_limit<RequestError>("{% set ns = namespace(a=1) %}{% set ns.a = [1, {'k': ns}] %}",
                             {"a namespace may not hold a namespace"});
  expect_limit<RequestError>("{% set a = namespace() %}{% set b = namespace(x=a) %}",
                             {"a namespace cannot hold another namespace"});
}

TEST(JinjaLimits, LoopsAreBounded) {
  expect_limit<RequestError>(
      "{% for i in range(100000) %}\n{% for j in range(100000) %}{% endfor %}{% endfor %}",
      {"t:2:", "more than 200000 loop iterations and macro calls (kMaxSteps)"});
  expect_limit<RequestError>("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
                             {"recursion deeper than 64"});
}

TEST(JinjaLimits, RepetitionIsSizedBeforeItRuns) {
  EXPECT_EQ(render("{{ '' * 1000000000000000000 }}|{{ [] * 1000000000000000000 }}"), "|[]");
  expect_limit<RequestError>("{{ 'ab' * 1000000000000000000 }}",
                             {"repetition result too large (2 x 1000000000000000000 bytes"});
  expect_limit<RequestError>("{{ [1, 2] * 4611686018427387904 }}", {"repetition result too large"});
}

TEST(JinjaLimits, StringsAndWorkAreBounded) {
  expect_limit<RequestError>("{{ (['x' * 60000000] * 60)|join }}", {"kMaxStringBytes"});
  expect_limit<RequestError>("{{ 'x' * 60000000 ~ 'y' * 10000000 }}", {"kMaxStringBytes"});
  expect_limit<RequestError>("{{ ''|indent(1000000000000) }}", {"kMaxStringBytes"});
  expect_limit<RequestError>("{% for i in range(1000) %}{% set s = 'x' * 60000000 %}{% endfor %}",
                             {"more than 4294967296 bytes of strings and lists (kMaxWorkBytes)"});
  expect_limit<RequestError>("{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}",
                             {"rendered output exceeds 67108864 bytes"});
}

TEST(JinjaLimits, SliceAndRangeStepsDoNotWrap) {
  EXPECT_EQ(render("{{ [1, 2, 3][1::9223372036854775807] }}"), "[2]");
  EXPECT_EQ(render("{{ 'abc'[::-9223372036854775807] }}"), "c");
  EXPECT_EQ(render("{{ range(5, 9223372036854775807, 9223372036854775800)|list }}"),
            "[5, 9223372036854775805]");
}

}  // namespace
}  // namespace lmstack::tokenizer
