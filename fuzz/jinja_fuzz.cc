// Fuzz target: a chat template (Jinja source) parsed and rendered with a fixed conversation
// (system, user, assistant with a tool call, tool result) and one tool, the way `chat` and
// `serve` render them. Parse errors are FormatError, render errors RequestError.
#include "fuzz_common.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/chat_template.h"

namespace {

const lmstack::Json& context() {
  static const lmstack::Json j = lmstack::Json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "What is the weather in Paris? 天气"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "c1",
        "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "c1"},
      {"role": "assistant", "content": "It is 21 °C.<think>ok</think>"},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather",
      "description": "Weather of a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "enable_thinking": false
  })");
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmstack::fuzz::run_one([&] {
    const auto t = lmstack::tokenizer::ChatTemplate::parse(
        std::string(lmstack::fuzz::as_text(data, size)), "template.jinja");
    t.render(context());
  });
  return 0;
}
