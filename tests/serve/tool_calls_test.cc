// Tool-call parsing on the exact text the real chat templates render for assistant tool calls
// (tests/data/tokenizer/chat_templates: Qwen2.5 and Qwen3 <tool_call> blocks, Llama 3.1's
// {"name", "parameters"}), and on Mistral v0.3's [TOOL_CALLS] format: several calls, argument
// key order kept, malformed call text kept as content, streamed pieces of every size giving
// the same reply, and the forcing grammar's outputs parsing back into calls.
#include "lmstack/serve/tool_calls.h"

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/tokenizer/chat_template.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

std::string template_text(const std::string& name) {
  return read_file(
      lmstack::test::source_path("tests/data/tokenizer/chat_templates/" + name + ".jinja"));
}

// Two calls whose arguments are deliberately not in sorted key order.
const OJson kCalls = OJson::parse(R"([
  {"id": "c1", "type": "function", "function": {"name": "get_weather",
   "arguments": {"unit": "celsius", "city": "Paris"}}},
  {"id": "c2", "type": "function", "function": {"name": "add",
   "arguments": {"z": 1, "a": [2, {"y": null, "b": "é"}]}}}])");

// The assistant turn a template renders for `calls` (text between `begin` and `end`).
std::string rendered_turn(const std::string& name, const OJson& calls, const std::string& content,
                          const std::string& begin, const std::string& end) {
  const auto tmpl = tokenizer::ChatTemplate::parse(template_text(name), name);
  OJson messages = OJson::array();
  messages.push_back({{"role", "user"}, {"content", "Weather in Paris, and 1+2?"}});
  messages.push_back({{"role", "assistant"}, {"content", content}, {"tool_calls", calls}});
  const std::string text = tokenizer::render_chat(tmpl, messages, nullptr, false, "<s>", "</s>");
  const size_t from = text.rfind(begin);
  EXPECT_NE(from, std::string::npos) << text;
  const size_t to = text.find(end, from + begin.size());
  return text.substr(from + begin.size(), to - from - begin.size());
}

void expect_calls(const ParsedReply& r, const OJson& calls) {
  ASSERT_EQ(r.calls.size(), calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    EXPECT_EQ(r.calls[k].name, calls[k]["function"]["name"].get<std::string>());
    EXPECT_EQ(r.calls[k].arguments, calls[k]["function"]["arguments"].dump());  // key order
  }
}

// Feeding `text` in pieces of `step` bytes gives the same content and calls as all at once.
void expect_stream_equal(ToolCallFormat format, const std::string& text) {
  const ParsedReply whole = parse_tool_calls(format, text);
  for (size_t step = 1; step <= text.size(); ++step) {
    ToolCallParser p(format);
    std::string content;
    std::vector<ToolCall> calls;
    auto take = [&](ToolCallParser::Delta d) {
      content += d.content;
      for (auto& c : d.calls) calls.push_back(std::move(c));
    };
    for (size_t at = 0; at < text.size(); at += step) take(p.push(text.substr(at, step)));
    take(p.finish());
    EXPECT_EQ(content, whole.content.value_or("")) << "step " << step;
    ASSERT_EQ(calls.size(), whole.calls.size()) << "step " << step;
    for (size_t k = 0; k < calls.size(); ++k) {
      EXPECT_EQ(calls[k].name, whole.calls[k].name);
      EXPECT_EQ(calls[k].arguments, whole.calls[k].arguments);
    }
  }
}

TEST(ToolCallsTest, HermesCallsAsQwenTemplatesRenderThem) {
  for (const std::string name : {"qwen2.5-instruct", "qwen3"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(detect_tool_call_format(template_text(name)), ToolCallFormat::kHermes);
    const std::string turn =
        rendered_turn(name, kCalls, "Let me check.", "<|im_start|>assistant\n", "<|im_end|>");
    ASSERT_NE(turn.find("<tool_call>\n{\"name\": \"add\""), std::string::npos) << turn;
    // Qwen3 renders an empty think block before the reply; reasoning stays content.
    const std::string think = name == "qwen3" ? "<think>\n\n</think>\n\n" : "";
    const ParsedReply r = parse_tool_calls(ToolCallFormat::kHermes, turn);
    expect_calls(r, kCalls);
    EXPECT_EQ(r.content, think + "Let me check.") << turn;
    expect_stream_equal(ToolCallFormat::kHermes, turn);
    const std::string only_calls =
        rendered_turn(name, kCalls, "", "<|im_start|>assistant\n", "<|im_end|>");
    const ParsedReply calls_only = parse_tool_calls(ToolCallFormat::kHermes, only_calls);
    expect_calls(calls_only, kCalls);
    if (think.empty())
      EXPECT_FALSE(calls_only.content.has_value()) << only_calls;
    else
      EXPECT_EQ(calls_only.content, "<think>\n\n</think>");
  }
}

TEST(ToolCallsTest, Llama31JsonAsItsTemplateRendersIt) {
  const std::string name = "llama-3.1-instruct";
  EXPECT_EQ(detect_tool_call_format(template_text(name)), ToolCallFormat::kLlama3Json);
  const OJson one = OJson::array({kCalls[0]});
  const std::string turn = rendered_turn(
      name, one, "", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>");
  EXPECT_EQ(turn, R"({"name": "get_weather", "parameters": {"unit": "celsius", "city": "Paris"}})");
  ParsedReply r = parse_tool_calls(ToolCallFormat::kLlama3Json, turn);
  expect_calls(r, one);
  EXPECT_FALSE(r.content.has_value());
  // With the tag Llama 3.1 may start with, and two calls joined by ';' (vLLM's format).
  const std::string two =
      "<|python_tag|>" + turn +
      R"(; {"name": "add", "parameters": {"z": 1, "a": [2, {"y": null, "b": "é"}]}})";
  expect_calls(parse_tool_calls(ToolCallFormat::kLlama3Json, two), kCalls);
  expect_stream_equal(ToolCallFormat::kLlama3Json, two);
  const ParsedReply text = parse_tool_calls(ToolCallFormat::kLlama3Json, "  Paris is sunny.");
  EXPECT_EQ(text.content, "  Paris is sunny.");
  EXPECT_TRUE(text.calls.empty());
  expect_stream_equal(ToolCallFormat::kLlama3Json, "  Paris is sunny.");
}

TEST(ToolCallsTest, MistralV03CallList) {
  const std::string text =
      R"(Checking. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"unit": "celsius", "city": "Paris"}}, {"name": "add", "arguments": {"z": 1, "a": [2, {"y": null, "b": "é"}]}, "id": "abcdefghi"}])";
  const ParsedReply r = parse_tool_calls(ToolCallFormat::kMistral, text);
  expect_calls(r, kCalls);
  EXPECT_EQ(r.content, "Checking.");
  expect_stream_equal(ToolCallFormat::kMistral, text);
  EXPECT_FALSE(parse_tool_calls(ToolCallFormat::kMistral, text.substr(10)).content.has_value());
}

TEST(ToolCallsTest, MalformedCallTextStaysContent) {
  const struct {
    ToolCallFormat format;
    std::string text;
  } cases[] = {
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": get_weather}\n</tool_call>"},
      {ToolCallFormat::kHermes, "<tool_call>\n{\"arguments\": {}}\n</tool_call>"},
      {ToolCallFormat::kHermes, "Sure <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\""},
      {ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>"},
      {ToolCallFormat::kLlama3Json, "{\"name\": \"f\", \"parameters\": {\"a\": 1}"},
      {ToolCallFormat::kLlama3Json, "{\"title\": \"not a call\"}"},
      {ToolCallFormat::kLlama3Json, "<|python_tag|>print(1)"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": "},
      {ToolCallFormat::kMistral, "[TOOL_CALLS] not json"},
      {ToolCallFormat::kHermes, std::string(300, '[') + "<tool_call>" + std::string(300, '[')},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 60));
    const ParsedReply r = parse_tool_calls(c.format, c.text);
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, c.text);
    expect_stream_equal(c.format, c.text.substr(0, 120));
  }
  // A good call next to a bad one: the good one is a call, the bad one's text is content.
  const ParsedReply mixed = parse_tool_calls(
      ToolCallFormat::kHermes,
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\nnope\n"
      "</tool_call>");
  ASSERT_EQ(mixed.calls.size(), 1u);
  EXPECT_EQ(mixed.calls[0].arguments, "{}");
  EXPECT_EQ(mixed.content, "\n<tool_call>\nnope\n</tool_call>");
}

TEST(ToolCallsTest, ForcingGrammarOutputsParseBack) {
  const OJson tools = OJson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
     "required": ["city"]}}},
    {"type": "function", "function": {"name": "get"}}])");
  const struct {
    ToolCallFormat format;
    std::string text;
  } cases[] = {
      {ToolCallFormat::kHermes,
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\",\"days\":3}}\n"
       "</tool_call>"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS] [{\"name\": \"get\", \"arguments\": {\"x\":[1]}}]"},
      {ToolCallFormat::kLlama3Json,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Oslo\"}}"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    auto g = std::make_shared<const JsonGrammar>(tool_call_grammar(c.format, tools, ""));
    JsonMatcher m(g);
    ASSERT_TRUE(m.feed(c.text));
    EXPECT_TRUE(m.is_complete());
    EXPECT_EQ(parse_tool_calls(c.format, c.text).calls.size(), 1u);
  }
  auto only =
      std::make_shared<const JsonGrammar>(tool_call_grammar(ToolCallFormat::kHermes, tools, "get"));
  JsonMatcher m(only);
  EXPECT_FALSE(m.feed("<tool_call>\n{\"name\": \"get_weather\""));
  try {
    tool_call_grammar(ToolCallFormat::kHermes,
                      OJson::parse(R"([{"function": {"name": "f", "parameters":
                                         {"type": "object", "oneOf": []}}}])"),
                      "");
    ADD_FAILURE() << "accepted oneOf";
  } catch (const RequestError& e) {
    EXPECT_STREQ(e.what(),
                 "tools[0].function.parameters.oneOf: this schema keyword is not supported");
  }
}

}  // namespace
}  // namespace lmstack::serve
