// The OpenAI-compatible API without the transport: turns request bodies of /v1/completions,
// /v1/chat/completions, /tokenize, /detokenize and /debug/prefix into engine requests or
// answers, and names the field at fault in every 4xx (ApiError → OpenAI's error JSON).
// Response and stream formatting live in openai_format.h; sockets in http_server.h. Field
// semantics follow the OpenAI API reference, plus vLLM's extensions (top_k, min_p,
// repetition_penalty, ignore_eos).
//
// Thread safety: const methods may run on many HTTP threads at once.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/serve/engine.h"
#include "lmstack/serve/token_mask.h"
#include "lmstack/serve/tool_calls.h"
#include "lmstack/tokenizer/chat_template.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::serve {

// A request the API refuses: HTTP status, OpenAI error type and the offending parameter.
class ApiError : public RequestError {
 public:
  ApiError(int status, std::string type, std::string param, const std::string& message)
      : RequestError(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string type_, param_;
};

// {"error": {"message", "type", "param", "code"}}, as OpenAI answers errors.
std::string error_json(const std::string& message, const std::string& type,
                       const std::string& param, int status);
// Json::dump that replaces invalid UTF-8 instead of throwing (token pieces may split a char).
std::string dump_json(const Json& j);

enum class Endpoint { kCompletions, kChat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  EngineRequest engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // report logprobs (completions: logprobs >= 0 given)
  int top_logprobs = 0;        // alternatives per token
  // Chat with tools and tool_choice other than "none": calls are parsed from the reply.
  ToolCallFormat tool_format = ToolCallFormat::kNone;
};

class OpenAiApi {
 public:
  // `chat_template` empty: the tokenizer's (its "tool_use" template for requests with tools,
  // when it names one, as transformers picks them), else a ChatML default.
  OpenAiApi(Engine& engine, tokenizer::Tokenizer tokenizer, std::string model_id,
            const std::string& chat_template = "");

  const std::string& model_id() const { return model_id_; }
  Engine& engine() { return engine_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }

  // Parse and validate a body; throw ApiError (400 naming the field, 404 unknown model).
  ApiRequest parse_completion(const std::string& body) const;
  ApiRequest parse_chat(const std::string& body) const;

  Json models() const;
  Json tokenize(const std::string& body) const;    // {"prompt"} or {"messages"} → tokens
  Json detokenize(const std::string& body) const;  // {"tokens"} → {"prompt"}
  Json debug_prefix(const std::string& body);      // why a prompt hits the cache or not

  // The tool-call format replies are parsed in (--tool-call-parser); by default the one the
  // model's chat template teaches (detect_tool_call_format), else none.
  void set_tool_call_format(ToolCallFormat format) { tool_format_ = format; }
  ToolCallFormat tool_call_format() const { return tool_format_; }
  // A fresh incremental detokenizer per choice, for EngineOptions::make_detokenizer.
  static DetokenizerFactory detokenizer_factory(const tokenizer::Tokenizer& tokenizer);

 private:
  Json parse_body(const std::string& body) const;
  void check_model(const Json& j) const;
  void parse_sampling(const Json& j, ApiRequest& r, int default_max_tokens) const;
  std::vector<int32_t> prompt_tokens(const Json& j) const;
  // The prompt of a chat body (openai_chat.cc), read in the client's key order.
  std::vector<int32_t> chat_tokens(const std::string& body) const;
  const tokenizer::ChatTemplate& chat_template(bool with_tools) const;
  // tool_choice, tools and response_format of a chat body (openai_structured.cc): which
  // format replies are parsed in, and the grammar that constrains sampling, if any.
  void parse_structured(const std::string& body, ApiRequest& r) const;
  void constrain(ApiRequest& r, JsonGrammar grammar, const char* field) const;
  std::shared_ptr<const TokenTrie> token_trie() const;

  Engine& engine_;
  tokenizer::Tokenizer tokenizer_;
  std::string model_id_;
  // For requests without tools, and with tools when the model names a "tool_use" template.
  std::optional<tokenizer::ChatTemplate> template_, tool_template_;
  ToolCallFormat tool_format_ = ToolCallFormat::kNone;
  mutable std::once_flag trie_once_;
  mutable std::shared_ptr<const TokenTrie> trie_;  // built at the first constrained request
};

}  // namespace lmstack::serve
