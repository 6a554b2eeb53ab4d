// The prompt of a /v1/chat/completions body: messages (and tools) rendered by the model's chat
// template as transformers' apply_chat_template renders them. The body is read as
// nlohmann::ordered_json, so tool schemas and tool-call arguments reach `tojson` in the
// client's key order (Python's json.loads keeps it; a sorted map would reorder them).
// Tool-call arguments arrive as a JSON string in OpenAI's format; like vLLM
// (chat_utils._postprocess_messages) they are parsed into an object first, as tool-use
// templates expect (`tool_call.arguments | tojson`). chat_template_kwargs become template
// variables, as apply_chat_template(**kwargs) makes them.
#include <fmt/format.h>

#include "lmstack/serve/openai_api.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

ApiError bad_messages(const std::string& message) {
  return ApiError(400, "invalid_request_error", "messages", message);
}

// [{"type": "text", "text": ...}, ...] -> the concatenated text.
std::string content_text(const OJson& content) {
  std::string text;
  for (const OJson& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw bad_messages("only text content parts are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

// tool_calls[k].function.arguments: a JSON string becomes the object it spells; empty -> {}.
void parse_tool_call_arguments(OJson& message, size_t index) {
  if (!message.contains("tool_calls") || !message["tool_calls"].is_array()) return;
  OJson& calls = message["tool_calls"];
  for (size_t k = 0; k < calls.size(); ++k) {
    if (!calls[k].is_object() || !calls[k].contains("function") ||
        !calls[k]["function"].is_object())
      throw bad_messages(
          fmt::format("messages[{}].tool_calls[{}] needs a 'function' object", index, k));
    OJson& fn = calls[k]["function"];
    OJson& args = fn["arguments"];
    if (args.is_null() || (args.is_string() && args.get<std::string>().empty())) {
      args = OJson::object();
    } else if (args.is_string()) {
      try {
        args = OJson::parse(args.get<std::string>());
      } catch (const OJson::exception& e) {
        throw bad_messages(
            fmt::format("messages[{}].tool_calls[{}].function.arguments is not valid JSON: {}",
                        index, k, e.what()));
      }
    }
  }
}

// The roles of OpenAI's chat API ("function" is its deprecated form of "tool").
void check_role(const std::string& role, size_t index) {
  for (const char* known : {"system", "developer", "user", "assistant", "tool", "function"})
    if (role == known) return;
  const std::string field = fmt::format("messages[{}].role", index);
  throw ApiError(400, "invalid_request_error", field,
                 fmt::format("{}: '{:.40}' is not one of 'system', 'developer', 'user', "
                             "'assistant', 'tool', 'function'",
                             field, role));
}

OJson template_messages(const OJson& j) {
  if (!j.contains("messages") || !j["messages"].is_array() || j["messages"].empty())
    throw bad_messages("'messages' must be a non-empty array");
  OJson messages = OJson::array();
  for (size_t i = 0; i < j["messages"].size(); ++i) {
    OJson m = j["messages"][i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad_messages("each message needs a string 'role'");
    check_role(m["role"].get<std::string>(), i);
    const OJson content = m.contains("content") ? m["content"] : OJson(nullptr);
    if (content.is_array())
      m["content"] = content_text(content);
    else if (!content.is_string() && !content.is_null())
      throw bad_messages("a message's 'content' must be a string or an array of parts");
    parse_tool_call_arguments(m, i);
    messages.push_back(std::move(m));
  }
  return messages;
}

// chat_template_kwargs (vLLM's extension: extra template variables, e.g. Qwen3's
// enable_thinking, overriding add_generation_prompt too) and the top-level
// add_generation_prompt, as the variables render_chat adds.
OJson template_variables(const OJson& j) {
  OJson vars = OJson::object();
  if (j.contains("add_generation_prompt") && !j["add_generation_prompt"].is_null()) {
    if (!j["add_generation_prompt"].is_boolean())
      throw ApiError(400, "invalid_request_error", "add_generation_prompt",
                     "'add_generation_prompt' must be a boolean");
    vars["add_generation_prompt"] = j["add_generation_prompt"];
  }
  if (!j.contains("chat_template_kwargs") || j["chat_template_kwargs"].is_null()) return vars;
  const OJson& kwargs = j["chat_template_kwargs"];
  if (!kwargs.is_object())
    throw ApiError(400, "invalid_request_error", "chat_template_kwargs",
                   "'chat_template_kwargs' must be an object");
  for (const auto& [key, value] : kwargs.items()) {
    // These come from their own fields, which are validated; a kwarg would bypass that.
    if (key == "messages" || key == "tools" || key == "documents")
      throw ApiError(400, "invalid_request_error", "chat_template_kwargs." + key,
                     fmt::format("chat_template_kwargs.{}: set it through the request's own "
                                 "field, not as a template variable",
                                 key));
    vars[key] = value;
  }
  return vars;
}

}  // namespace

const tokenizer::ChatTemplate& OpenAiApi::chat_template(bool with_tools) const {
  if (with_tools && tool_template_) return *tool_template_;
  if (template_) return *template_;
  try {
    tokenizer::chat_template_for(tokenizer_,
                                 with_tools);  // throws, naming the templates the model has
  } catch (const ConfigError& e) {
    throw ApiError(400, "invalid_request_error", with_tools ? "tools" : "messages", e.what());
  }
  throw ApiError(400, "invalid_request_error", "messages", "the model has no chat template");
}

std::vector<int32_t> OpenAiApi::chat_tokens(const std::string& body) const {
  const OJson j = OJson::parse(body);  // parse_body() has already checked it is an object
  const OJson messages = template_messages(j);
  OJson tools = j.contains("tools") ? j["tools"] : OJson(nullptr);
  if (!tools.is_null() && !tools.is_array())
    throw ApiError(400, "invalid_request_error", "tools", "'tools' must be an array");
  // tool_choice "none": the model is not shown the tools (and no calls are parsed).
  if (j.contains("tool_choice") && j["tool_choice"] == "none") tools = nullptr;
  const OJson variables = template_variables(j);
  // transformers picks "tool_use" whenever tools is not None, even an empty list.
  const tokenizer::ChatTemplate& tmpl = chat_template(!tools.is_null());
  std::string text;
  try {
    text = tokenizer::render_chat(tmpl, messages, tools, true, tokenizer_.bos_token(),
                                  tokenizer_.eos_token(), variables);
  } catch (const RequestError& e) {
    throw bad_messages(fmt::format("the chat template rejected them: {}", e.what()));
  }
  return tokenizer_.encode(text, tokenizer::SpecialMode::kAllow);
}

}  // namespace lmstack::serve
