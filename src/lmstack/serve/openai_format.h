// ResponseFormatter: turns a request's engine events into the OpenAI API's answers, either
// one JSON body (text_completion / chat.completion with usage) or Server-Sent Events in the
// exact chunk format of the OpenAI streaming API: chat's first chunk per choice carries
// {"role": "assistant"}, then content deltas, then a chunk with finish_reason, then (with
// stream_options.include_usage) a chunk with empty choices and the usage, then
// "data: [DONE]". With tool-call parsing on (ApiRequest::tool_format), calls found in the text
// become message.tool_calls / delta.tool_calls and are not shown as content; a choice that
// called a tool finishes with "tool_calls". No sockets here, so every byte is unit-testable.
//
// Thread safety: one formatter per request, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/serve/openai_api.h"
#include "lmstack/serve/request_stream.h"
#include "lmstack/serve/tool_calls.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::serve {

class ResponseFormatter {
 public:
  // `id` like "cmpl-7" / "chatcmpl-7"; `created` in Unix seconds. The tokenizer must outlive
  // the formatter.
  ResponseFormatter(const ApiRequest& request, const tokenizer::Tokenizer& tokenizer,
                    std::string model_id, std::string id, int64_t created);

  // Streaming: what to send before any event (chat: one role delta per choice), then the SSE
  // text for each event (possibly empty); after kDone/kError the stream is complete and ends
  // with "data: [DONE]\n\n".
  std::string stream_begin() const;
  std::string stream_event(const StreamEvent& event);
  // Non-streaming: feed every event, then response() once finished().
  void add(const StreamEvent& event);
  bool finished() const { return finished_; }
  const std::string& error() const { return error_; }
  Json response() const;

 private:
  struct Choice {
    std::string text;
    std::string finish_reason;
    Json logprobs;  // chat: array of content entries; completions: the four parallel arrays
    std::shared_ptr<ToolCallParser> parser;  // streaming with tool-call parsing on
    int num_calls = 0;                       // calls streamed so far
  };
  Json chunk(Json choices) const;
  Json usage_json() const;
  Json chat_logprob_entry(const model::GeneratedToken& token) const;
  void add_completion_logprobs(Choice& c, const model::GeneratedToken& token) const;
  Json delta_choice(int index, const std::string& text, const Json& logprobs,
                    const Json& finish_reason) const;
  std::string token_text(int32_t id) const;
  std::string tool_delta(Choice& c, int index, const ToolCallParser::Delta& d) const;
  Json message(const Choice& c) const;

  const ApiRequest& request_;
  const tokenizer::Tokenizer& tokenizer_;
  std::string model_id_, id_;
  int64_t created_;
  bool chat_;
  std::vector<Choice> choices_;
  RequestUsage usage_;
  bool finished_ = false;
  std::string error_;
};

}  // namespace lmstack::serve
