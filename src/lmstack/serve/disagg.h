// Prefill/decode disaggregation over HTTP (docs/disaggregation.md). A decode server answers
// the OpenAI API itself, but before it submits a request it asks a prefill server for the
// prompt's KV: POST /internal/prefill/{completions,chat} with the client's body, answered
// with the KV transfer message (kv_transfer.h), which the decode engine imports. The prefill
// server parses the body exactly as the decode server does (same tokenizer, chat template,
// sampling fields), runs the prompt, samples the first token and sends everything back over
// that TCP connection; its blocks return to its pool once the message is built.
//
// A failed transfer (connection refused or reset, a 5xx, a corrupt or truncated message) is
// tried again up to DisaggOptions::kv_retries times; then the client gets 502 naming the
// prefill server and the last error. A 4xx from the prefill server is the client's fault
// and is passed through. Either way the decode server holds no block for the request.
//
// Thread safety: prefill() and import() run on many HTTP worker threads at once.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "lmstack/serve/http_request.h"
#include "lmstack/serve/openai_api.h"

namespace lmstack::serve {

struct HttpReply;

enum class ServeRole { kColocated, kPrefill, kDecode };

struct DisaggOptions {
  ServeRole role = ServeRole::kColocated;
  // Decode role: the prefill server ("http://host:port") when the request names none in its
  // X-Lmstack-Prefill header (which the router sets).
  std::string prefill_url;
  int kv_retries = 2;         // attempts after the first
  double kv_timeout_s = 120;  // per attempt: connect, prefill and read the message
  // Prefill role, fault injection for tests (`serve --inject-kv-fault`): the first
  // fault_count messages are sent with one payload byte flipped ("corrupt"), cut in half
  // ("truncate") or not at all, the connection closed ("drop").
  std::string fault_kind;
  int fault_count = 0;
};

class Disaggregation {
 public:
  // The API must outlive this.
  Disaggregation(OpenAiApi& api, DisaggOptions options);
  ServeRole role() const { return options_.role; }

  // Prefill role: the answer to POST /internal/prefill/{completions,chat} (`chat`), the KV
  // message as application/octet-stream. Throws ApiError for a body the API refuses.
  HttpReply prefill(const std::string& body, bool chat);

  // Decode role: fetches `r`'s prompt KV from the prefill server and attaches it as
  // r.engine.kv_import. `request` supplies the body, X-Lmstack-Prefill and Authorization.
  // Throws ApiError: 400 for n > 1, the prefill server's own 4xx, 502 after the last retry.
  void import(const HttpRequest& request, bool chat, ApiRequest& r);

 private:
  std::string prefill_url(const HttpRequest& request) const;
  // One attempt; the message on success, else the error in `error` (and `client_error` set
  // when the prefill server refused the request itself, which no retry would change).
  std::optional<KvHandoff> fetch(const std::string& url, const HttpRequest& request, bool chat,
                                 std::string& error, std::optional<ApiError>& client_error);
  void inject_fault(std::string& message);

  OpenAiApi& api_;
  DisaggOptions options_;
  std::atomic<int> faults_left_;
};

}  // namespace lmstack::serve
