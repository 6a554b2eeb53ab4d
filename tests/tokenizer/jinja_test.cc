// Unit tests of the Jinja interpreter behind ChatTemplate: expressions, filters, tests,
// methods, statements, scoping, whitespace control and error reporting. Every expected
// string in the tables was checked against Python jinja2 3.1 with Hugging Face's settings
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, HF's tojson).
#include <gtest/gtest.h>

#include <string>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::tokenizer {
namespace {

std::string render(const std::string& source, const std::string& context = "{}") {
  return ChatTemplate::parse(source, "t").render(parse_json(context, "context"));
}

struct Case {
  const char* source;
  const char* context;
  const char* expected;
};

void run_cases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.source);
    try {
      EXPECT_EQ(render(c.source, c.context), c.expected);
    } catch (const Error& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

// Expects `source` to throw E whose message contains `needle`.
template <class E>
void expect_error(const std::string& source, const std::string& needle,
                  const std::string& context = "{}") {
  SCOPED_TRACE(source);
  try {
    render(source, context);
    ADD_FAILURE() << "no error, expected one containing: " << needle;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Jinja, LiteralsAndPrinting) {
  run_cases({
      {"{{ 1 }}|{{ -3 }}|{{ 1.0 }}|{{ 2.5e3 }}|{{ 1e-5 }}|{{ 1e16 }}|{{ 0.1 + 0.2 }}", "{}",
       "1|-3|1.0|2500.0|1e-05|1e+16|0.30000000000000004"},
      {"{{ true }}{{ False }}{{ none }}{{ None }}", "{}", "TrueFalseNoneNone"},
      {"{{ 'a\\nb\\t\\x41\\u00e9\\\\' }}", "{}", "a\nb\tA\xC3\xA9\\"},
      {"{{ \"it's\" }}{{ 'x' 'y' }}", "{}", "it'sxy"},
      {"{{ [1, 'a', none, true] }}{{ ('a',) }}{{ {'k': \"it's\"} }}", "{}",
       "[1, 'a', None, True]('a',){'k': \"it's\"}"},
      {"{{ x }}", "{\"x\": {\"b\": [1.5, null], \"a\": \"s\"}}", "{'a': 's', 'b': [1.5, None]}"},
      {"{{ 1_000 }}", "{}", "1000"},
  });
}

TEST(Jinja, Arithmetic) {
  run_cases({
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 10 / 4 }} {{ 10 / 5 }}", "{}",
       "3 -4 2 -2 2.5 2.0"},
      {"{{ 2 ** 10 }} {{ 2.0 * 3 }} {{ 7.5 % 2 }} {{ -(3) }} {{ 1 + true }}", "{}",
       "1024 6.0 1.5 -3 2"},
      {"{{ 'ab' * 2 }}{{ [1] + [2] }}{{ 'a' ~ 1 ~ none ~ x }}", "{}", "abab[1, 2]a1None"},
      {"{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }}", "{}", "3 9 64"},
  });
}

TEST(Jinja, ComparisonsAndLogic) {
  run_cases({
      {"{{ 1 < 2 < 3 }}{{ 3 > 2 > 5 }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}{{ [1, 2] == [1, 2] }}", "{}",
       "TrueFalseTrueTrueTrue"},
      {"{{ 1 in [1, 2] }}{{ 'ell' in 'hello' }}{{ 'k' in d }}{{ 'z' not in d }}",
       "{\"d\": {\"k\": 1}}", "TrueTrueTrueTrue"},
      {"{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ not [] }}", "{}", "x|y||True"},
      {"{{ 'a' if 1 > 2 else 'b' }}|{{ 'c' if false }}|", "{}", "b||"},
      {"{{ u == none }}{{ u is none }}{{ u is defined }}{{ u is undefined }}", "{}",
       "FalseFalseFalseTrue"},
  });
}

TEST(Jinja, AccessAndSlices) {
  const char* ctx = R"({"m": {"role": "user", "n": null}, "xs": [1, 2, 3], "s": "héllo"})";
  run_cases({
      {"{{ m.role }}{{ m['role'] }}{{ m.missing }}|{{ m.n }}|{{ m.n.x }}", ctx, "useruser|None|"},
      {"{{ xs[0] }}{{ xs[-1] }}{{ xs[5] }}|{{ xs[1:] }}{{ xs[::-1] }}{{ xs[:-1] }}{{ xs.1 }}", ctx,
       "13|[2, 3][3, 2, 1][1, 2]2"},
      {"{{ s[1] }}{{ s[1:3] }}{{ s|length }}{{ s[::-1] }}", ctx, "\xC3\xA9\xC3\xA9l5oll\xC3\xA9h"},
      {"{{ m.get('role') }}{{ m.get('zz', 'd') }}{{ m.get('zz') }}", ctx, "userdNone"},
      {"{{ m.keys()|list }}{{ m.values()|list }}{{ m.items()|list }}", ctx,
       "['n', 'role'][None, 'user'][('n', None), ('role', 'user')]"},
  });
}

TEST(Jinja, StringMethods) {
  run_cases({
      {"[{{ '  a b  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\\n a'.lstrip() }}][{{ 'a "
       "\\n'.rstrip() }}]",
       "{}", "[a b][a][a][a]"},
      {"{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}", "{}",
       "['a', 'b', '', 'c']['a', 'b']['a', 'b,c']"},
      {"{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.startswith('c') }}",
       "{}", "TrueTrueFalse"},
      {"{{ 'aBc'.upper() }}{{ 'aBc'.lower() }}{{ \"it's x-y\".title() }}{{ 'hELLO'.capitalize() }}",
       "{}", "ABCabcIt'S X-YHello"},
      {"{{ 'aaa'.replace('a', 'b', 2) }}{{ 'ab'.replace('', '-') }}{{ 'abcb'.find('b') }}", "{}",
       "bba-a-b-1"},
      {"{{ '-'.join(['a', 'b']) }}{{ 'a\\nb'.splitlines() }}{{ 'abab'.count('ab') }}", "{}",
       "a-b['a', 'b']2"},
  });
}

TEST(Jinja, Filters) {
  const char* ctx = R"({"ms": [{"role": "system", "c": 1}, {"role": "user", "c": 2},
                               {"role": "user", "c": 3}], "d": {"b": 1, "a": 2}})";
  run_cases({
      {"[{{ '  x  '|trim }}][{{ 'xyx'|trim('x') }}]{{ [1, 2]|length }}{{ 'ab'|count }}{{ u|length "
       "}}",
       ctx, "[x][y]220"},
      {"{{ 'aB'|upper }}{{ 'aB'|lower }}{{ \"hello it's-me\"|title }}{{ 'hELLO'|capitalize }}", ctx,
       "ABabHello It's-MeHello"},
      {"{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }}", ctx, "[2, 3]"},
      {"{{ ms|rejectattr('role', 'eq', 'user')|list|length }}{{ ms|map(attribute='c')|sum }}", ctx,
       "16"},
      {"{{ [1, 0, 2]|select|list }}{{ [1, 2, 3, 4]|reject('odd')|list }}", ctx, "[1, 2][2, 4]"},
      {"{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'c']|sort }}{{ ms|sort(attribute='c', "
       "reverse=true)|first }}",
       ctx, "[1, 2, 3]['A', 'b', 'c']{'c': 3, 'role': 'user'}"},
      {"{{ [1, 2, 1]|unique|list }}{{ [3, 1]|min }}{{ [3, 1]|max }}{{ [1, 2]|last }}{{ []|first }}",
       ctx, "[1, 2]132"},
      {"{{ u|default('d') }}{{ ''|default('d') }}{{ ''|default('d', true) }}{{ none|d('x') }}", ctx,
       "ddNone"},
      {"{{ d|items|list }}{{ d|list }}{{ 'ab'|list }}{{ [1, 'a']|join }}{{ [1, 2]|join(', ') }}",
       ctx, "[('a', 2), ('b', 1)]['a', 'b']['a', 'b']1a1, 2"},
      {"{{ '42'|int }}{{ '42.7'|int }}{{ 'x'|int }}{{ 'x'|int(-1) }}{{ 3.9|int }}{{ '2.5'|float }}",
       ctx, "42420-132.5"},
      {"{{ 2.5|round }}{{ 3.5|round }}{{ 2.567|round(2) }}{{ -3|abs }}{{ 12|string ~ 'x' }}", ctx,
       "2.04.02.573"
       "12x"},
      {"{{ 'a\\nb'|indent(2) }}|{{ 'a\\n\\nb\\n'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(1, "
       "blank=true) }}",
       ctx, "a\n  b|  a\n\n  b\n|a\n \n b"},
      {"{{ [1, 2]|reverse|list }}{{ 'abc'|reverse }}{{ '<a&\"'|e }}{{ 'x'|safe }}", ctx,
       "[2, 1]cba&lt;a&amp;&#34;x"},
  });
}

TEST(Jinja, ToJsonMatchesHuggingFace) {
  const char* ctx =
      R"({"x": {"b": [1, {}, []], "a": "é\n\"\u0001", "c": 1.5, "d": null, "e": true}})";
  run_cases({
      {"{{ x|tojson }}", ctx,
       "{\"a\": \"\xC3\xA9\\n\\\"\\u0001\", \"b\": [1, {}, []], \"c\": 1.5, \"d\": null, \"e\": "
       "true}"},
      {"{{ x.b|tojson(indent=2) }}", ctx, "[\n  1,\n  {},\n  []\n]"},
      {"{{ {'z': 1, 'y': 'é'}|tojson(ensure_ascii=true, sort_keys=true) }}", ctx,
       "{\"y\": \"\\u00e9\", \"z\": 1}"},
      {"{{ {'z': [1, 2]}|tojson(separators=(',', ':')) }}", ctx, "{\"z\":[1,2]}"},
      {"{{ '<a> & \\'b\\''|tojson }}{{ 'x' is string }}", ctx, "\"<a> & 'b'\"True"},
  });
}

TEST(Jinja, Tests) {
  run_cases({
      {"{{ u is iterable }}{{ u is sequence }}{{ u is mapping }}{{ 'a' is iterable }}{{ {} is "
       "mapping }}",
       "{}", "TrueTrueFalseTrueTrue"},
      {"{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ none is "
       "none }}",
       "{}", "TrueTrueFalseTrueTrue"},
      {"{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is gt(1) }}{{ 'a' is in('abc') "
       "}}",
       "{}", "TrueTrueTrueTrueTrue"},
      {"{{ false is false }}{{ 0 is false }}{{ x is not defined }}{{ 'AB' is upper }}", "{}",
       "TrueFalseTrueTrue"},
  });
}

TEST(Jinja, Loops) {
  run_cases({
      {"{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
       "{{ loop.last }}{{ loop.length }};{% endfor %}",
       "{\"xs\": [\"a\", \"b\"]}", "102TrueFalse2;211FalseTrue2;"},
      {"{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
       "{\"xs\": [1, 2, 3]}", "-2;1-3;2-;"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty"},
      {"{% for x in xs if x != 2 %}{{ x }}{{ loop.length }}{% endfor %}", "{\"xs\": [1, 2, 3]}",
       "1232"},
      {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
       "{\"d\": {\"b\": 2, \"a\": 1}}", "a=1;b=2;ab"},
      {"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}"
       "{% break %}{% endif %}{{ x }}{% endfor %}",
       "{}", "13"},
      {"{% for x in 'ab' %}{{ x }}{{ loop.cycle('o', 'e') }}{% endfor %}", "{}", "aobe"},
      {"{% for i in range(3) %}{{ i }}{% endfor %}{{ range(1, 6, 2)|list }}", "{}", "012[1, 3, 5]"},
  });
}

TEST(Jinja, ScopingAndNamespaces) {
  run_cases({
      {"{% set x = 5 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}",
       "{}", "5152|5"},
      {"{% if true %}{% set y = 1 %}{% endif %}{{ y }}", "{}", "1"},
      {"{% set ns = namespace(found=false, n=0) %}{% for i in [1, 2] %}{% set ns.found = true %}"
       "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.found }}{{ ns.n }}{{ ns.other }}",
       "{}", "True3"},
      {"{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}", "{}", "12(1, 2)"},
      {"{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]", "{}", "[x2]"},
      {"{% set messages = messages[1:] %}{{ messages|length }}", "{\"messages\": [1, 2, 3]}", "2"},
  });
}

TEST(Jinja, Macros) {
  run_cases({
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
       "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
       "{}", "Hi a! Hi b? Hi c."},
      {"{% set x = 5 %}{% macro m() %}{{ x }}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}"
       "{% set x = 6 %}{{ m() }}",
       "{}", "5363"},
      {"{% filter upper %}ab{{ 'c' }}{% endfilter %}", "{}", "ABC"},
  });
  // transformers' AssistantTracker extension adds {% generation %}; it renders its body.
  EXPECT_EQ(render("a{% generation %}{{ 1 }}{% endgeneration %}b"), "a1b");
}

TEST(Jinja, WhitespaceControl) {
  run_cases({
      {"  {% if true %}\n  a\n  {% endif %}\n  {{ 'b' }}  \n{# c #}\nd\n", "{}", "  a\n  b  \nd"},
      {"a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc"},
      {"a\n  {{- 'b' -}}\n  c", "{}", "abc"},
      {"{% for x in [1, 2] %}\n{{ x }}\n{% endfor %}\n", "{}", "1\n2\n"},
      {"x {% if true %} y {% endif %} z", "{}", "x  y  z"},
      {"  {%+ if true %}a{% endif +%}\nb", "{}", "  a\nb"},
      {"line\r\n{% if true %}\r\nwin\r\n{% endif %}\r\n", "{}", "line\nwin\n"},
      {"{#- c -#}  a", "{}", "a"},
      {"{{ {'a': {'b': 1}} }}", "{}", "{'a': {'b': 1}}"},
  });
}

TEST(Jinja, ParseErrorsNameLineAndColumn) {
  expect_error<FormatError>("ok\n  {% raw %}x{% endraw %}", "t:2:6: unsupported construct 'raw'");
  expect_error<FormatError>("{% include 'x' %}", "t:1:4: unsupported construct 'include'");
  expect_error<FormatError>("{{ x|wordwrap }}", "t:1:6: unsupported construct 'filter wordwrap'");
  expect_error<FormatError>("{{ x is prime }}", "t:1:9: unsupported construct 'test prime'");
  expect_error<FormatError>("{% for x in y recursive %}{% endfor %}", "recursive for loop");
  expect_error<FormatError>("{% macro m(*a) %}{% endmacro %}", "macro varargs");
  expect_error<FormatError>("{{ f(*xs) }}", "*args/**kwargs");
  expect_error<FormatError>("{{ x ", "t:1:1: unterminated tag '{{'");
  expect_error<FormatError>("{# x", "unterminated comment");
  expect_error<FormatError>("{{ 'abc }}", "unterminated string literal");
  expect_error<FormatError>("{% if x %}a", "unexpected end of template, expected 'endif'");
  expect_error<FormatError>("{% endfor %}", "t:1:4: unexpected 'endfor'");
  expect_error<FormatError>("{% break %}", "'break' outside of a for loop");
  expect_error<FormatError>("{{ 1 + }}", "t:1:8: unexpected '}}'");
  expect_error<FormatError>("{{ a ? b }}", "unexpected character '?'");
  expect_error<FormatError>("{{ (1 }}", "t:1:8: unexpected '}'");
  expect_error<FormatError>("{{ (1 2) }}", "t:1:7: expected ')', got '2'");
}

TEST(Jinja, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(500, '(') + "1" + std::string(500, ')');
  expect_error<FormatError>("{{ " + deep + " }}", "nesting deeper than 200 levels");
  expect_error<FormatError>("{{ " + std::string(500, '-') + "1 }}", "nesting deeper than 200");
  std::string ifs;
  for (int i = 0; i < 300; ++i) ifs += "{% if true %}";
  expect_error<FormatError>(ifs, "nesting deeper than 200 levels");
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}"), "1");
  EXPECT_EQ(render("{{ " + std::string(51, '-') + "1 }}"), "-1");
}

TEST(Jinja, RenderErrorsNameLineAndColumn) {
  expect_error<RequestError>("a\n{{ raise_exception('bad role') }}",
                             "t:2:19: raise_exception: bad role");
  expect_error<RequestError>("{{ x.y }}", "'x' is undefined");
  expect_error<RequestError>("{{ m.a.b }}", "'dict object' has no attribute 'a'", "{\"m\": {}}");
  expect_error<RequestError>("{{ 'a' + 1 }}",
                             "t:1:8: can only concatenate str (not \"int\") to str");
  expect_error<RequestError>("{{ 1 / 0 }}", "division by zero");
  expect_error<RequestError>("{{ 'a' < 1 }}",
                             "'<' not supported between instances of 'str' and 'int'");
  expect_error<RequestError>("{{ 'abc'.zfill(5) }}", "unsupported construct 'method str.zfill'");
  expect_error<RequestError>("{{ [1].append(2) }}", "unsupported construct 'method list.append'");
  expect_error<RequestError>("{{ 'x %s' % 1 }}", "unsupported construct 'string % formatting'");
  expect_error<RequestError>("{{ u|tojson }}", "Object of type Undefined is not JSON serializable");
  expect_error<RequestError>("{{ nope() }}", "'nope' is undefined");
  expect_error<RequestError>("{% set x.a = 1 %}", "only namespace() objects", "{\"x\": {}}");
  expect_error<RequestError>("{% for a, b in [[1]] %}{% endfor %}", "not enough values to unpack");
  expect_error<RequestError>("{{ range(200000)|length }}", "MAX_RANGE");
  expect_error<RequestError>("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "recursion deeper");
  expect_error<RequestError>("{{ 9223372036854775807 + 1 }}", "integer overflow");
  expect_error<RequestError>("x", "render context must be a JSON object", "[1]");
  expect_error<RequestError>("{{ 'a,b'.split(',', 'x') }}", "expected an integer, got 'str'");
  expect_error<RequestError>("{{ 'a'|replace('a', 1) }}{{ 'a'.replace('a', 1) }}", "must be str");
  expect_error<RequestError>("{{ 'a'|round }}", "round: expected a number, got 'str'");
}

}  // namespace
}  // namespace lmstack::tokenizer
