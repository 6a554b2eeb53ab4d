// OpenAI response bodies and SSE chunks from engine events (see openai_format.h). Formats
// follow the OpenAI API reference for completions, chat completions and their streaming
// "chunk" objects.
#include "lmstack/serve/openai_format.h"

#include <mutex>
#include <random>

#include <fmt/format.h>

namespace lmstack::serve {
namespace {

std::string sse(const Json& j) { return "data: " + dump_json(j) + "\n\n"; }

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// OpenAI's {"id", "type": "function", "function": {"name", "arguments"}}; ids are random, as
// a client sends them back in the next request's messages and they must not collide there.
Json tool_call_json(const ToolCall& call) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t hi = 0, lo = 0;
  {
    std::lock_guard lock(mu);
    hi = rng();
    lo = rng();
  }
  return Json{{"id", fmt::format("call_{:016x}{:08x}", hi, lo & 0xffffffffu)},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// OpenAI knows "stop" and "length"; a request whose client left is reported as "abort".
std::string api_finish_reason(const std::string& reason) {
  return reason == "cancelled" ? "abort" : reason;
}

}  // namespace

ResponseFormatter::ResponseFormatter(const ApiRequest& request,
                                     const tokenizer::Tokenizer& tokenizer, std::string model_id,
                                     std::string id, int64_t created)
    : request_(request),
      tokenizer_(tokenizer),
      model_id_(std::move(model_id)),
      id_(std::move(id)),
      created_(created),
      chat_(request.endpoint == Endpoint::kChat),
      choices_(static_cast<size_t>(request.engine.n)) {
  for (Choice& c : choices_) {
    if (chat_ && request.tool_format != ToolCallFormat::kNone)
      c.parser = std::make_shared<ToolCallParser>(request.tool_format);
    c.logprobs = chat_ ? Json::array()
                       : Json{{"tokens", Json::array()},
                              {"token_logprobs", Json::array()},
                              {"top_logprobs", Json::array()},
                              {"text_offset", Json::array()}};
  }
}

std::string ResponseFormatter::token_text(int32_t id) const {
  try {
    return tokenizer_.token_bytes(id);
  } catch (const Error&) {
    return "";
  }
}

Json ResponseFormatter::chat_logprob_entry(const model::GeneratedToken& t) const {
  const std::string text = token_text(t.token);
  Json top = Json::array();
  for (const model::TokenLogprob& alt : t.sample.top) {
    const std::string alt_text = token_text(alt.token);
    top.push_back({{"token", alt_text}, {"logprob", alt.logprob}, {"bytes", bytes_of(alt_text)}});
  }
  return Json{{"token", text},
              {"logprob", t.sample.logprob},
              {"bytes", bytes_of(text)},
              {"top_logprobs", top}};
}

void ResponseFormatter::add_completion_logprobs(Choice& c, const model::GeneratedToken& t) const {
  Json top = Json::object();
  for (const model::TokenLogprob& alt : t.sample.top) top[token_text(alt.token)] = alt.logprob;
  c.logprobs["tokens"].push_back(token_text(t.token));
  c.logprobs["token_logprobs"].push_back(t.sample.logprob);
  c.logprobs["top_logprobs"].push_back(top);
  c.logprobs["text_offset"].push_back(c.text.size());
}

Json ResponseFormatter::usage_json() const {
  return Json{{"prompt_tokens", usage_.prompt_tokens},
              {"completion_tokens", usage_.completion_tokens},
              {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", usage_.cached_tokens}}}};
}

Json ResponseFormatter::chunk(Json choices) const {
  Json j = {{"id", id_},
            {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_id_},
            {"choices", std::move(choices)}};
  if (request_.include_usage) j["usage"] = nullptr;
  return j;
}

Json ResponseFormatter::delta_choice(int index, const std::string& text, const Json& logprobs,
                                     const Json& finish_reason) const {
  if (chat_) {
    Json delta =
        text.empty() && !finish_reason.is_null() ? Json::object() : Json{{"content", text}};
    return Json{{"index", index},
                {"delta", delta},
                {"logprobs", logprobs},
                {"finish_reason", finish_reason}};
  }
  return Json{
      {"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
}

std::string ResponseFormatter::stream_begin() const {
  if (!chat_) return "";
  std::string out;
  for (int i = 0; i < request_.engine.n; ++i)
    out += sse(chunk(Json::array({Json{{"index", i},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}})));
  return out;
}

std::string ResponseFormatter::stream_event(const StreamEvent& e) {
  add(e);
  switch (e.kind) {
    case StreamEvent::Kind::kToken: {
      Json lp = nullptr;
      if (request_.logprobs && e.token.token >= 0) {
        if (chat_) {
          lp = Json{{"content", Json::array({chat_logprob_entry(e.token)})}};
        } else {
          Choice tmp;
          tmp.logprobs = {{"tokens", Json::array()},
                          {"token_logprobs", Json::array()},
                          {"top_logprobs", Json::array()},
                          {"text_offset", Json::array()}};
          add_completion_logprobs(tmp, e.token);
          lp = tmp.logprobs;
        }
      }
      // Every generated token gets a chunk, even one whose text is still held back (part of
      // a UTF-8 character or of a possible stop string), so clients can time each token.
      if (e.token.token < 0 && e.token.text.empty()) return "";
      Choice& c = choices_[static_cast<size_t>(e.choice)];
      if (c.parser) {
        const ToolCallParser::Delta d = c.parser->push(e.token.text);
        if (!d.calls.empty()) return tool_delta(c, e.choice, d);
        return sse(chunk(Json::array({delta_choice(e.choice, d.content, lp, nullptr)})));
      }
      return sse(chunk(Json::array({delta_choice(e.choice, e.token.text, lp, nullptr)})));
    }
    case StreamEvent::Kind::kFinish: {
      Choice& c = choices_[static_cast<size_t>(e.choice)];
      std::string out;
      if (c.parser) {
        const ToolCallParser::Delta d = c.parser->finish();
        if (!d.content.empty() || !d.calls.empty()) out = tool_delta(c, e.choice, d);
      }
      std::string reason = api_finish_reason(e.finish_reason);
      if (c.num_calls > 0 && reason == "stop") reason = "tool_calls";
      return out + sse(chunk(Json::array({delta_choice(e.choice, "", nullptr, reason)})));
    }
    case StreamEvent::Kind::kDone: {
      std::string out;
      if (request_.include_usage) {
        Json j = chunk(Json::array());
        j["usage"] = usage_json();
        out += sse(j);
      }
      return out + "data: [DONE]\n\n";
    }
    case StreamEvent::Kind::kError:
      return sse(Json::parse(error_json(e.error, "internal_error", "", 500))) + "data: [DONE]\n\n";
  }
  return "";
}

void ResponseFormatter::add(const StreamEvent& e) {
  Choice& c = choices_[static_cast<size_t>(std::max(0, e.choice))];
  switch (e.kind) {
    case StreamEvent::Kind::kToken:
      if (request_.logprobs && e.token.token >= 0) {
        if (chat_)
          c.logprobs.push_back(chat_logprob_entry(e.token));
        else
          add_completion_logprobs(c, e.token);
      }
      c.text += e.token.text;
      break;
    case StreamEvent::Kind::kFinish:
      c.finish_reason = api_finish_reason(e.finish_reason);
      break;
    case StreamEvent::Kind::kDone:
      usage_ = e.usage;
      finished_ = true;
      break;
    case StreamEvent::Kind::kError:
      error_ = e.error.empty() ? "internal error" : e.error;
      finished_ = true;
      break;
  }
}

// A chunk with the content and the calls a parser let out: each call whole, at the next index.
std::string ResponseFormatter::tool_delta(Choice& c, int index,
                                          const ToolCallParser::Delta& d) const {
  Json delta = Json::object();
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.calls.empty()) {
    delta["tool_calls"] = Json::array();
    for (const ToolCall& call : d.calls) {
      Json j = tool_call_json(call);
      j["index"] = c.num_calls++;
      delta["tool_calls"].push_back(std::move(j));
    }
  }
  return sse(chunk(Json::array({Json{
      {"index", index}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", nullptr}}})));
}

// The chat message of a finished choice; with tool-call parsing on, content is the text
// around the calls (null when there is none) and the calls are in tool_calls.
Json ResponseFormatter::message(const Choice& c) const {
  if (request_.tool_format == ToolCallFormat::kNone)
    return Json{{"role", "assistant"}, {"content", c.text}};
  const ParsedReply r = parse_tool_calls(request_.tool_format, c.text);
  Json m = {{"role", "assistant"}, {"content", r.content ? Json(*r.content) : Json(nullptr)}};
  if (!r.calls.empty()) {
    m["tool_calls"] = Json::array();
    for (const ToolCall& call : r.calls) m["tool_calls"].push_back(tool_call_json(call));
  }
  return m;
}

Json ResponseFormatter::response() const {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    const Json lp =
        request_.logprobs ? (chat_ ? Json{{"content", c.logprobs}} : c.logprobs) : Json(nullptr);
    Json choice = {{"index", i}, {"logprobs", lp}, {"finish_reason", c.finish_reason}};
    if (chat_) {
      choice["message"] = message(c);
      if (choice["message"].contains("tool_calls") && c.finish_reason == "stop")
        choice["finish_reason"] = "tool_calls";
    } else
      choice["text"] = c.text;
    choices.push_back(std::move(choice));
  }
  return Json{{"id", id_},           {"object", chat_ ? "chat.completion" : "text_completion"},
              {"created", created_}, {"model", model_id_},
              {"choices", choices},  {"usage", usage_json()}};
}

}  // namespace lmstack::serve
