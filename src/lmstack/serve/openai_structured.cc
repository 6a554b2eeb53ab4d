// tool_choice, tools and response_format of /v1/chat/completions (see openai_api.h):
//   tool_choice "none"           the template gets no tools (openai_chat.cc), nothing parsed
//   "auto" (default with tools)  calls in the reply are parsed in the server's format
//   "required" / {"type": "function", "function": {"name"}}
//                                sampling is constrained to one call in that format (to the
//                                named tool), so the reply is always a parseable call
//   response_format json_object / json_schema
//                                sampling is constrained to JSON (json_grammar.h)
// Each refusal names its field, and the server keeps serving.
#include <fmt/format.h>

#include "lmstack/serve/openai_api.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

ApiError bad(const std::string& field, const std::string& message) {
  return ApiError(400, "invalid_request_error", field, message);
}

// Every tool must be {"type": "function", "function": {"name": string, ...}}.
void check_tools(const OJson& tools) {
  for (size_t i = 0; i < tools.size(); ++i) {
    const OJson& t = tools[i];
    const std::string field = fmt::format("tools[{}]", i);
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
        !t["function"].is_object() || !t["function"].contains("name") ||
        !t["function"]["name"].is_string())
      throw bad(field, field + " must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
}

struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kNamed } mode = Mode::kAuto;
  std::string name;
};

ToolChoice tool_choice(const OJson& j, bool has_tools) {
  ToolChoice c;
  if (!j.contains("tool_choice") || j["tool_choice"].is_null()) {
    c.mode = has_tools ? ToolChoice::Mode::kAuto : ToolChoice::Mode::kNone;
    return c;
  }
  const OJson& v = j["tool_choice"];
  if (v == "none")
    c.mode = ToolChoice::Mode::kNone;
  else if (v == "auto")
    c.mode = ToolChoice::Mode::kAuto;
  else if (v == "required")
    c.mode = ToolChoice::Mode::kRequired;
  else if (v.is_object() && v.value("type", "") == "function" && v.contains("function") &&
           v["function"].is_object() && v["function"].contains("name") &&
           v["function"]["name"].is_string()) {
    c.mode = ToolChoice::Mode::kNamed;
    c.name = v["function"]["name"].get<std::string>();
  } else {
    throw bad("tool_choice",
              "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
              "\"function\", \"function\": {\"name\": ...}}");
  }
  if (!has_tools && (c.mode == ToolChoice::Mode::kRequired || c.mode == ToolChoice::Mode::kNamed))
    throw bad("tool_choice", "'tool_choice' asks for a tool call but 'tools' is empty");
  return c;
}

// The grammar of response_format, or nullopt for text.
std::optional<JsonGrammar> response_grammar(const OJson& j) {
  if (!j.contains("response_format") || j["response_format"].is_null()) return std::nullopt;
  const OJson& f = j["response_format"];
  const std::string type = f.is_object() ? f.value("type", "") : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return JsonGrammar::any_object();
  if (type != "json_schema")
    throw bad("response_format",
              "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  if (!f.contains("json_schema") || !f["json_schema"].is_object() ||
      !f["json_schema"].contains("schema"))
    throw bad("response_format.json_schema.schema",
              "'response_format.json_schema.schema' is required for type json_schema");
  try {
    return JsonGrammar::from_schema(f["json_schema"]["schema"],
                                    "response_format.json_schema.schema");
  } catch (const RequestError& e) {
    const std::string what = e.what();
    throw bad(what.substr(0, what.find(':')), what);
  }
}

}  // namespace

std::shared_ptr<const TokenTrie> OpenAiApi::token_trie() const {
  std::call_once(trie_once_, [this] { trie_ = std::make_shared<const TokenTrie>(tokenizer_); });
  return trie_;
}

void OpenAiApi::constrain(ApiRequest& r, JsonGrammar grammar, const char* field) const {
  const std::vector<int32_t>& eos = engine_.options().eos_ids;
  if (eos.empty())
    throw bad(field,
              fmt::format("'{}' needs an end-of-sequence token and the model has none", field));
  if (r.engine.params.ignore_eos)
    throw bad("ignore_eos", fmt::format("'ignore_eos' cannot be combined with '{}': the "
                                        "constrained reply ends with EOS",
                                        field));
  auto shared = std::make_shared<const JsonGrammar>(std::move(grammar));
  r.engine.make_constraint = [trie = token_trie(), shared, eos] {
    return std::make_unique<GrammarConstraint>(trie, shared, eos);
  };
}

void OpenAiApi::parse_structured(const std::string& body, ApiRequest& r) const {
  const OJson j = OJson::parse(body);
  const OJson tools = j.contains("tools") && j["tools"].is_array() ? j["tools"] : OJson::array();
  check_tools(tools);
  const ToolChoice choice = tool_choice(j, !tools.empty());
  std::optional<JsonGrammar> grammar = response_grammar(j);
  const bool forced =
      choice.mode == ToolChoice::Mode::kRequired || choice.mode == ToolChoice::Mode::kNamed;
  if (choice.mode != ToolChoice::Mode::kNone && !tools.empty()) r.tool_format = tool_format_;
  if (forced && tool_format_ == ToolCallFormat::kNone)
    throw bad("tool_choice",
              "'tool_choice' forces a call, but the model's chat template shows no tool-call "
              "format this server knows; start serve with --tool-call-parser "
              "llama3_json|mistral|hermes");
  if (forced && grammar)
    throw bad("response_format",
              "'response_format' cannot be combined with a forced "
              "'tool_choice' (both constrain the reply)");
  if (choice.mode == ToolChoice::Mode::kNamed) {
    bool found = false;
    for (const OJson& t : tools) found = found || t["function"]["name"] == choice.name;
    if (!found)
      throw bad("tool_choice",
                fmt::format("'tool_choice' names '{}', which is not in 'tools'", choice.name));
  }
  if (forced) {
    try {
      grammar = tool_call_grammar(tool_format_, tools, choice.name);
    } catch (const RequestError& e) {
      const std::string what = e.what();
      throw bad(what.substr(0, what.find(':')), what);
    }
  }
  if (grammar) constrain(r, std::move(*grammar), forced ? "tool_choice" : "response_format");
}

}  // namespace lmstack::serve
