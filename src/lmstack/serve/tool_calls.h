// Tool calls in a model's output, in the three formats open chat models are trained on (the
// names are vLLM's --tool-call-parser names):
//   llama3_json  Llama 3.1/3.2: the whole reply is `{"name": f, "parameters": {...}}`, maybe
//                after <|python_tag|>, several joined by ';'
//   mistral      Mistral v0.3: text, then `[TOOL_CALLS] [{"name": f, "arguments": {...}}, ...]`
//   hermes       Qwen2.5/Qwen3 (and Hermes): `<tool_call>\n{"name": f, "arguments": {...}}\n
//                </tool_call>`, any number, text around them
// ToolCallParser reads the text incrementally, so a stream shows ordinary text as it comes
// and each call whole once its text is complete; the non-streamed reply is the same parser
// fed everything at once. Text that looks like a call but does not parse stays content.
// Also here: the grammar that forces a call (tool_choice "required" or a named function).
//
// Thread safety: a parser belongs to one choice of one request.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/serve/json_grammar.h"

namespace lmstack::serve {

enum class ToolCallFormat { kNone, kLlama3Json, kMistral, kHermes };

// "llama3_json", "mistral", "hermes", "none" → the format; nullopt for other names.
std::optional<ToolCallFormat> tool_call_format_named(std::string_view name);
const char* tool_call_format_name(ToolCallFormat format);
// The format a chat template teaches, recognised by its markers; kNone when none is found.
ToolCallFormat detect_tool_call_format(std::string_view template_text);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as compact text, keys in the model's order
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format) : format_(format) {}

  struct Delta {
    std::string content;          // ordinary text to show now
    std::vector<ToolCall> calls;  // calls completed by this text
  };
  // Feeds generated text; returns what became certain. Text that may begin a call (or
  // whitespace that may precede one) is held back until it is clear.
  Delta push(std::string_view text);
  // The end of the reply: whatever was held back, as content or calls.
  Delta finish();

 private:
  Delta advance(bool at_end);
  void hermes(Delta& out, bool at_end);
  void marker_then_rest(Delta& out, bool at_end, std::string_view marker);
  void llama(Delta& out, bool at_end);
  void emit_text(Delta& out, size_t end, bool keep_trailing_space);
  void enter_call(Delta& out, size_t at, std::string_view marker);

  ToolCallFormat format_;
  std::string buf_;          // text not yet given out
  std::string space_;        // whitespace before the call being read
  bool in_call_ = false;     // hermes: after <tool_call>; mistral/llama: in the call region
  bool decided_ = false;     // llama: the reply is known to be (or not be) calls
  bool after_call_ = false;  // a call has been given out
};

// The content and calls of a whole reply (content nullopt when it is empty and there are
// calls, as OpenAI sends `content: null` next to tool_calls).
struct ParsedReply {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text);

// A grammar whose only outputs are one call in `format` to one of `tools` (an OpenAI tools
// array), or to the tool named `only` when it is not empty. Throws RequestError naming the
// field (tools[i].function.parameters...) for a schema json_grammar.h does not support.
JsonGrammar tool_call_grammar(ToolCallFormat format, const nlohmann::ordered_json& tools,
                              const std::string& only);

}  // namespace lmstack::serve
