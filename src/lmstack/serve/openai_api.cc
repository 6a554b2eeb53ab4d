// Request parsing and the small endpoints of the OpenAI-compatible API (see openai_api.h).
#include "lmstack/serve/openai_api.h"

#include <random>

#include <fmt/format.h>

namespace lmstack::serve {
namespace {

// ChatML, for models whose tokenizer has no chat template (init-model's tiny models).
constexpr const char* kDefaultChatTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

ApiError bad_field(const std::string& field, const std::string& message) {
  return ApiError(400, "invalid_request_error", field, message);
}

// The first word of a RequestError's message names the field ("top_p must be ...").
ApiError from_request_error(const RequestError& e) {
  const std::string what = e.what();
  const size_t end = what.find_first_of(" :");
  return bad_field(what.substr(0, end), what);
}

std::optional<double> number_field(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number())
    throw bad_field(key, fmt::format("'{}' must be a number, got {}", key, j[key].type_name()));
  return j[key].get<double>();
}

std::optional<int64_t> int_field(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_number_integer())
    throw bad_field(key, fmt::format("'{}' must be an integer, got {}", key, j[key].type_name()));
  return j[key].get<int64_t>();
}

std::optional<bool> bool_field(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  if (!j[key].is_boolean())
    throw bad_field(key, fmt::format("'{}' must be a boolean, got {}", key, j[key].type_name()));
  return j[key].get<bool>();
}

std::vector<std::string> stop_field(const Json& j) {
  if (!j.contains("stop") || j["stop"].is_null()) return {};
  const Json& s = j["stop"];
  if (s.is_string()) {
    if (s.get<std::string>().empty())
      throw bad_field("stop", "'stop' must not be an empty string (it would match everywhere)");
    return {s.get<std::string>()};
  }
  if (!s.is_array() || s.size() > 16)
    throw bad_field("stop", "'stop' must be a string or an array of at most 16 strings");
  std::vector<std::string> out;
  for (const Json& x : s) {
    if (!x.is_string() || x.get<std::string>().empty())
      throw bad_field("stop", "'stop' entries must be non-empty strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// Fields of the OpenAI API that lmstack does not implement: a request that sets one to
// anything but its default is refused (400 naming it) instead of being answered as if the
// field were absent. `null` and the default value are accepted.
void reject_unsupported(const Json& j, bool chat) {
  auto refuse = [](const char* field) {
    throw bad_field(field, fmt::format("'{}' is not supported by this server", field));
  };
  auto set = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (set("logit_bias") && !(j["logit_bias"].is_object() && j["logit_bias"].empty()))
    refuse("logit_bias");
  if (chat) return;
  if (set("echo") && j["echo"] != false) refuse("echo");
  if (set("suffix") && j["suffix"] != "") refuse("suffix");
  if (set("best_of") && j["best_of"] != 1 && j["best_of"] != j.value("n", Json(1)))
    refuse("best_of");
}

uint64_t random_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  return rng();
}

int clamp_int(int64_t v, const char* field) {
  if (v < -(int64_t{1} << 30) || v > (int64_t{1} << 30))
    throw bad_field(field, fmt::format("'{}' is out of range: {}", field, v));
  return static_cast<int>(v);
}

}  // namespace

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string error_json(const std::string& message, const std::string& type,
                       const std::string& param, int status) {
  Json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? Json(nullptr) : Json(param)},
            {"code", status}};
  return dump_json(Json{{"error", e}});
}

OpenAiApi::OpenAiApi(Engine& engine, tokenizer::Tokenizer tokenizer, std::string model_id,
                     const std::string& chat_template)
    : engine_(engine), tokenizer_(std::move(tokenizer)), model_id_(std::move(model_id)) {
  using tokenizer::ChatTemplate;
  if (!chat_template.empty()) {
    template_ = ChatTemplate::parse(chat_template, "--chat-template");
    tool_format_ = detect_tool_call_format(chat_template);
    return;
  }
  const auto& named = tokenizer::chat_templates(tokenizer_);
  if (named.empty()) {
    const std::string& own = tokenizer_.chat_template();
    template_ = ChatTemplate::parse(own.empty() ? std::string(kDefaultChatTemplate) : own);
    tool_format_ = detect_tool_call_format(own);
    return;
  }
  if (auto it = named.find("default"); it != named.end()) {
    template_ = ChatTemplate::parse(it->second, "chat_template 'default'");
    tool_format_ = detect_tool_call_format(it->second);
  }
  if (auto it = named.find("tool_use"); it != named.end()) {
    tool_template_ = ChatTemplate::parse(it->second, "chat_template 'tool_use'");
    tool_format_ = detect_tool_call_format(it->second);
  }
}

DetokenizerFactory OpenAiApi::detokenizer_factory(const tokenizer::Tokenizer& tokenizer) {
  return [tokenizer] {
    auto decoder =
        std::make_shared<tokenizer::Tokenizer::IncrementalDecoder>(tokenizer.incremental_decoder());
    // A model's vocabulary may be padded past the tokenizer's: such ids print nothing.
    const int tokenizer_vocab = tokenizer.vocab_size();
    return std::function<std::string(int32_t)>([decoder, tokenizer_vocab](int32_t id) {
      if (id < 0 || id >= tokenizer_vocab) return std::string();
      try {
        return decoder->push(id);
      } catch (const RequestError&) {
        return std::string();  // an unused id inside the range
      }
    });
  };
}

Json OpenAiApi::parse_body(const std::string& body) const {
  Json j;
  try {
    j = parse_json(body, "the body");  // depth-limited: a deep body crashed serve (issue 13)
  } catch (const FormatError& e) {
    throw bad_field("", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) throw bad_field("", "the body must be a JSON object");
  return j;
}

void OpenAiApi::check_model(const Json& j) const {
  if (!j.contains("model") || !j["model"].is_string())
    throw bad_field("model", "'model' is required and must be a string");
  const std::string m = j["model"].get<std::string>();
  if (m != model_id_)
    throw ApiError(
        404, "invalid_request_error", "model",
        fmt::format("The model '{}' does not exist; this server serves '{}'", m, model_id_));
}

void OpenAiApi::parse_sampling(const Json& j, ApiRequest& r, int default_max_tokens) const {
  model::SamplingParams& p = r.engine.params;
  p.temperature = static_cast<float>(number_field(j, "temperature").value_or(1.0));
  p.top_p = static_cast<float>(number_field(j, "top_p").value_or(1.0));
  const int top_k = clamp_int(int_field(j, "top_k").value_or(0), "top_k");
  p.top_k = top_k == -1 ? 0 : top_k;  // vLLM spells "off" as -1
  p.min_p = static_cast<float>(number_field(j, "min_p").value_or(0.0));
  p.presence_penalty = static_cast<float>(number_field(j, "presence_penalty").value_or(0.0));
  p.frequency_penalty = static_cast<float>(number_field(j, "frequency_penalty").value_or(0.0));
  p.repetition_penalty = static_cast<float>(number_field(j, "repetition_penalty").value_or(1.0));
  const auto seed = int_field(j, "seed");
  p.seed = seed ? static_cast<uint64_t>(*seed) : random_seed();
  p.stop = stop_field(j);
  p.ignore_eos = bool_field(j, "ignore_eos").value_or(false);
  std::optional<int64_t> max_tokens = int_field(j, "max_completion_tokens");
  const char* max_name = "max_completion_tokens";
  if (!max_tokens) {
    max_tokens = int_field(j, "max_tokens");
    max_name = "max_tokens";
  }
  if (max_tokens && *max_tokens < 1)
    throw bad_field(max_name,
                    fmt::format("'{}' must be at least 1, got {}", max_name, *max_tokens));
  p.max_tokens = max_tokens ? clamp_int(*max_tokens, max_name) : std::max(1, default_max_tokens);
  r.engine.n = clamp_int(int_field(j, "n").value_or(1), "n");
  r.stream = bool_field(j, "stream").value_or(false);
  if (j.contains("stream_options") && !j["stream_options"].is_null()) {
    if (!j["stream_options"].is_object())
      throw bad_field("stream_options", "'stream_options' must be an object");
    r.include_usage = bool_field(j["stream_options"], "include_usage").value_or(false);
  }
  p.logprobs = r.top_logprobs;
  try {
    p.validate();
  } catch (const RequestError& e) {
    throw from_request_error(e);
  }
}

std::vector<int32_t> OpenAiApi::prompt_tokens(const Json& j) const {
  if (!j.contains("prompt")) throw bad_field("prompt", "'prompt' is required");
  Json prompt = j["prompt"];
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
  if (prompt.is_string()) {
    std::vector<int32_t> ids;
    if (tokenizer_.add_bos_token() && tokenizer_.bos_id()) ids.push_back(*tokenizer_.bos_id());
    tokenizer_.encode_append(prompt.get<std::string>(), tokenizer::SpecialMode::kAllow, ids);
    return ids;
  }
  if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    std::vector<int32_t> ids;
    for (const Json& t : prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
          t.get<int64_t>() >= tokenizer_.vocab_size())
        throw bad_field("prompt", "'prompt' token ids must be integers in the vocabulary");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return ids;
  }
  throw bad_field("prompt", "'prompt' must be a string, one string in an array, or token ids");
}

namespace {

// The prompt must leave room for at least one generated token.
void check_prompt_length(size_t prompt_tokens, int context, const char* field) {
  if (prompt_tokens == 0) throw bad_field(field, fmt::format("'{}' has no tokens", field));
  if (static_cast<int64_t>(prompt_tokens) >= context)
    throw bad_field(field, fmt::format("this model's maximum context length is {} tokens; the "
                                       "'{}' has {} tokens",
                                       context, field, prompt_tokens));
}

}  // namespace

ApiRequest OpenAiApi::parse_completion(const std::string& body) const {
  const Json j = parse_body(body);
  check_model(j);
  reject_unsupported(j, false);
  ApiRequest r;
  r.endpoint = Endpoint::kCompletions;
  r.engine.prompt = prompt_tokens(j);
  check_prompt_length(r.engine.prompt.size(), engine_.max_context(), "prompt");
  if (const auto lp = int_field(j, "logprobs")) {
    if (*lp < 0 || *lp > 20) throw bad_field("logprobs", "'logprobs' must be in [0, 20]");
    r.logprobs = true;
    r.top_logprobs = static_cast<int>(*lp);
  }
  parse_sampling(j, r, 16);  // OpenAI's default max_tokens for completions
  return r;
}

ApiRequest OpenAiApi::parse_chat(const std::string& body) const {
  const Json j = parse_body(body);
  check_model(j);
  reject_unsupported(j, true);
  ApiRequest r;
  r.endpoint = Endpoint::kChat;
  r.engine.prompt = chat_tokens(body);
  check_prompt_length(r.engine.prompt.size(), engine_.max_context(), "messages");
  r.logprobs = bool_field(j, "logprobs").value_or(false);
  if (const auto top = int_field(j, "top_logprobs")) {
    if (*top < 0 || *top > 20) throw bad_field("top_logprobs", "'top_logprobs' must be in [0, 20]");
    if (!r.logprobs) throw bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.top_logprobs = static_cast<int>(*top);
  }
  // Without max_tokens a chat reply may use the rest of the context (or of the KV pool).
  const int64_t room =
      std::min<int64_t>(engine_.max_context(),
                        engine_.kv_cache().num_blocks() * engine_.kv_cache().block_size()) -
      static_cast<int64_t>(r.engine.prompt.size());
  parse_sampling(j, r, static_cast<int>(std::max<int64_t>(room, 1)));
  parse_structured(body, r);
  return r;
}

Json OpenAiApi::models() const {
  Json m = {{"id", model_id_},
            {"object", "model"},
            {"created", 0},
            {"owned_by", "lmstack"},
            {"max_model_len", engine_.max_context()}};
  return Json{{"object", "list"}, {"data", Json::array({m})}};
}

Json OpenAiApi::tokenize(const std::string& body) const {
  const Json j = parse_body(body);
  std::vector<int32_t> ids;
  if (j.contains("messages"))
    ids = chat_tokens(body);
  else if (j.contains("prompt") && j["prompt"].is_string())
    ids = tokenizer_.encode(j["prompt"].get<std::string>(), tokenizer::SpecialMode::kAllow);
  else
    throw bad_field("prompt", "'prompt' (a string) or 'messages' is required");
  return Json{{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.max_context()}};
}

Json OpenAiApi::detokenize(const std::string& body) const {
  const Json j = parse_body(body);
  if (!j.contains("tokens") || !j["tokens"].is_array())
    throw bad_field("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  for (const Json& t : j["tokens"]) {
    if (!t.is_number_integer()) throw bad_field("tokens", "'tokens' must hold integers");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  try {
    return Json{{"prompt", tokenizer_.decode_text(ids)}};
  } catch (const RequestError& e) {
    throw bad_field("tokens", e.what());
  }
}

Json OpenAiApi::debug_prefix(const std::string& body) {
  const Json j = parse_body(body);
  std::vector<int32_t> ids;
  if (j.contains("messages"))
    ids = chat_tokens(body);
  else
    ids = prompt_tokens(j);
  const PrefixMatch m = engine_.explain_prefix(ids);
  return Json{{"prompt_tokens", ids.size()},
              {"cached_tokens", m.num_tokens},
              {"cached_blocks", m.blocks.size()},
              {"explanation", m.explanation}};
}

}  // namespace lmstack::serve
