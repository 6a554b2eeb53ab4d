// Tool-call parsing and forcing (see tool_calls.h). The call texts are the ones the chat
// templates in tests/data/tokenizer/chat_templates/ render for assistant tool_calls
// (qwen2.5-instruct / qwen3: <tool_call>, llama-3.1-instruct: {"name", "parameters"}) and
// Mistral v0.3's `[TOOL_CALLS] [...]`; vLLM's hermes, llama3_json and mistral parsers read them.
#include "lmstack/serve/tool_calls.h"

#include <algorithm>

#include <fmt/format.h>

#include "lmstack/core/error.h"
#include "lmstack/core/json_depth.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]", kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// Depth-limited like every body (issue 13): a deeply nested "call" is text, not a crash.
std::optional<OJson> parse_ordered(std::string_view text) {
  try {
    check_json_depth(text, "a tool call");
    return OJson::parse(text);
  } catch (const FormatError&) {
    return std::nullopt;
  } catch (const OJson::exception&) {
    return std::nullopt;
  }
}

// {"name": str, "arguments"/"parameters": object (or a string holding one)} → the call.
std::optional<ToolCall> call_of(const OJson& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  OJson args = j.contains("arguments")    ? j["arguments"]
               : j.contains("parameters") ? j["parameters"]
                                          : OJson::object();
  if (args.is_string()) {
    std::optional<OJson> inner = parse_ordered(args.get<std::string>());
    if (!inner) return std::nullopt;
    args = std::move(*inner);
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{j["name"].get<std::string>(),
                  args.dump(-1, ' ', false, OJson::error_handler_t::replace)};
}

// Where the JSON value starting at text[0] ends (one past it), or npos when it does not end.
size_t json_value_end(std::string_view text) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// `text` as llama3_json calls: objects joined by ';' (vLLM's llama3_json parser).
std::optional<std::vector<ToolCall>> llama_calls(std::string_view text) {
  text = trim(text);
  if (text.substr(0, kPythonTag.size()) == kPythonTag) text = trim(text.substr(kPythonTag.size()));
  std::vector<ToolCall> calls;
  while (!text.empty()) {
    const size_t end = text.front() == '{' ? json_value_end(text) : std::string_view::npos;
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<OJson> j = parse_ordered(text.substr(0, end));
    std::optional<ToolCall> call = j ? call_of(*j) : std::nullopt;
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    text = trim(text.substr(end));
    if (!text.empty() && text.front() == ';') text = trim(text.substr(1));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// Mistral's `[{...}, ...]` after [TOOL_CALLS] (a lone object is accepted too).
std::optional<std::vector<ToolCall>> mistral_calls(std::string_view text) {
  std::optional<OJson> j = parse_ordered(trim(text));
  if (!j) return std::nullopt;
  if (j->is_object()) *j = OJson::array({*j});
  if (!j->is_array() || j->empty()) return std::nullopt;
  std::vector<ToolCall> calls;
  for (const OJson& c : *j) {
    std::optional<ToolCall> call = call_of(c);
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
  }
  return calls;
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(std::string_view name) {
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "none") return ToolCallFormat::kNone;
  return std::nullopt;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ToolCallFormat detect_tool_call_format(std::string_view t) {
  if (t.find(kHermesOpen) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (t.find(kMistralMarker) != std::string_view::npos) return ToolCallFormat::kMistral;
  if (t.find("\"parameters\": ") != std::string_view::npos &&
      t.find("{\"name\": ") != std::string_view::npos)
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

// Gives out buf_[0, end) as content, except trailing whitespace that may precede a call.
void ToolCallParser::emit_text(Delta& out, size_t end, bool keep_trailing_space) {
  size_t cut = end;
  if (!keep_trailing_space)
    while (cut > 0 && is_space(buf_[cut - 1])) --cut;
  out.content.append(buf_, 0, cut);
  buf_.erase(0, cut);
}

// Moves the whitespace before a marker at buf_[at] into space_ and drops the marker: the
// whitespace goes away if a call follows, and back into the content if none does.
void ToolCallParser::enter_call(Delta& out, size_t at, std::string_view marker) {
  emit_text(out, at, false);
  const size_t marker_at = buf_.find(marker);
  space_ = buf_.substr(0, marker_at);
  buf_.erase(0, marker_at + marker.size());
  in_call_ = true;
}

void ToolCallParser::hermes(Delta& out, bool at_end) {
  while (true) {
    if (!in_call_) {
      const size_t open = buf_.find(kHermesOpen);
      if (open == std::string::npos) {
        if (at_end) {  // whitespace after the last call is not content
          if (!(after_call_ && trim(buf_).empty())) out.content += buf_;
          buf_.clear();
          return;
        }
        emit_text(out, buf_.size() - partial_marker(buf_, kHermesOpen), false);
        return;
      }
      enter_call(out, open, kHermesOpen);
    }
    const size_t close = buf_.find(kHermesClose);
    if (close == std::string::npos) {
      if (at_end) {  // cut off inside a call: its text is content
        out.content += space_ + std::string(kHermesOpen) + buf_;
        buf_.clear();
      }
      return;
    }
    std::optional<OJson> j = parse_ordered(trim(std::string_view(buf_).substr(0, close)));
    std::optional<ToolCall> call = j ? call_of(*j) : std::nullopt;
    if (call) {
      out.calls.push_back(std::move(*call));
      after_call_ = true;
    } else {
      out.content +=
          space_ + std::string(kHermesOpen) + buf_.substr(0, close + kHermesClose.size());
    }
    buf_.erase(0, close + kHermesClose.size());
    in_call_ = false;
  }
}

// Mistral: content until the marker, then everything to the end is the calls.
void ToolCallParser::marker_then_rest(Delta& out, bool at_end, std::string_view marker) {
  if (!in_call_) {
    const size_t at = buf_.find(marker);
    if (at == std::string::npos) {
      emit_text(out, at_end ? buf_.size() : buf_.size() - partial_marker(buf_, marker), at_end);
      return;
    }
    enter_call(out, at, marker);
  }
  if (!at_end) return;
  if (std::optional<std::vector<ToolCall>> calls = mistral_calls(buf_)) {
    out.calls = std::move(*calls);
  } else {
    out.content += space_ + std::string(marker) + buf_;
  }
  buf_.clear();
}

// Llama 3.1: a reply that starts with '{' or <|python_tag|> is held whole and parsed at the
// end; any other reply is plain text.
void ToolCallParser::llama(Delta& out, bool at_end) {
  if (!decided_) {
    const std::string_view rest = trim(buf_);
    const bool maybe_tag = kPythonTag.substr(0, std::min(rest.size(), kPythonTag.size())) ==
                           rest.substr(0, std::min(rest.size(), kPythonTag.size()));
    if (rest.empty() || (rest.size() < kPythonTag.size() && maybe_tag && !at_end)) {
      if (!at_end) return;
    } else {
      decided_ = true;
      in_call_ = rest.front() == '{' || (maybe_tag && rest.size() >= kPythonTag.size());
    }
  }
  if (!in_call_) {
    out.content += buf_;
    buf_.clear();
    return;
  }
  if (!at_end) return;
  if (std::optional<std::vector<ToolCall>> calls = llama_calls(buf_))
    out.calls = std::move(*calls);
  else
    out.content += buf_;
  buf_.clear();
}

ToolCallParser::Delta ToolCallParser::push(std::string_view text) {
  buf_.append(text);
  return advance(false);
}

ToolCallParser::Delta ToolCallParser::finish() { return advance(true); }

// Emits what the buffer now allows; at the end, everything (no more text is coming).
ToolCallParser::Delta ToolCallParser::advance(bool at_end) {
  Delta out;
  switch (format_) {
    case ToolCallFormat::kHermes:
      hermes(out, at_end);
      break;
    case ToolCallFormat::kMistral:
      marker_then_rest(out, at_end, kMistralMarker);
      break;
    case ToolCallFormat::kLlama3Json:
      llama(out, at_end);
      break;
    case ToolCallFormat::kNone:
      out.content = std::move(buf_);
      buf_.clear();
  }
  return out;
}

ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text) {
  ToolCallParser parser(format);
  ToolCallParser::Delta a = parser.push(text);
  ToolCallParser::Delta b = parser.finish();
  ParsedReply r;
  std::string content = a.content + b.content;
  r.calls = std::move(a.calls);
  r.calls.insert(r.calls.end(), b.calls.begin(), b.calls.end());
  if (!content.empty() || r.calls.empty()) r.content = std::move(content);
  return r;
}

JsonGrammar tool_call_grammar(ToolCallFormat format, const OJson& tools, const std::string& only) {
  JsonGrammar g;
  std::vector<int> alternatives;
  for (size_t i = 0; i < tools.size(); ++i) {
    const OJson& fn = tools[i]["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const std::string quoted = OJson(name).dump();
    std::string open, close;
    if (format == ToolCallFormat::kHermes) {
      open = "<tool_call>\n{\"name\": " + quoted + ", \"arguments\": ";
      close = "}\n</tool_call>";
    } else if (format == ToolCallFormat::kMistral) {
      open = "[TOOL_CALLS] [{\"name\": " + quoted + ", \"arguments\": ";
      close = "}]";
    } else {
      open = "{\"name\": " + quoted + ", \"parameters\": ";
      close = "}";
    }
    const OJson params = fn.contains("parameters") ? fn["parameters"] : OJson{{"type", "object"}};
    const int args = g.add_schema(params, fmt::format("tools[{}].function.parameters", i));
    alternatives.push_back(g.add_seq({g.add_raw_literal(open), args, g.add_raw_literal(close)}));
  }
  LMSTACK_CHECK(!alternatives.empty(), "no tool named '{}' (the caller checks)", only);
  if (alternatives.size() > JsonGrammar::kMaxChoices)
    throw_error<RequestError>("tools: at most {} tools can be forced at once",
                              JsonGrammar::kMaxChoices);
  g.set_root(alternatives.size() == 1 ? alternatives[0] : g.add_alt(std::move(alternatives)));
  return g;
}

}  // namespace lmstack::serve
