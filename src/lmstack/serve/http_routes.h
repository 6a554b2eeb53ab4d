// The HTTP routes of the OpenAI-compatible API, apart from the sockets (http_server.h runs
// them on its worker pool): authentication, the route table (unknown path: 404, known path
// with another method: 405 with Allow, both as OpenAI error JSON), and each endpoint's
// answer. A generation endpoint answers with the engine request it submitted (a Generation),
// which the server then streams or waits for; every other answer is complete.
//
// Thread safety: handle() may run on many worker threads at once (it uses the const API and
// the thread-safe Engine::submit).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmstack/serve/disagg.h"
#include "lmstack/serve/http_request.h"
#include "lmstack/serve/openai_api.h"
#include "lmstack/serve/openai_format.h"

namespace lmstack::serve {

// A submitted engine request and the formatter of its answer.
struct Generation {
  ApiRequest request;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<ResponseFormatter> formatter;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beyond the standard ones
  std::shared_ptr<Generation> generation;                    // set: body follows from it
};

// An OpenAI error answer: {"error": {"message", "type", "param", "code"}}.
HttpReply error_reply(int status, const std::string& message, const std::string& type,
                      const std::string& param = "");

// Whether an Authorization value carries `key` as a Bearer token. The scheme is matched
// case-insensitively (RFC 7235 section 2.1: "bearer" and "BEARER" are "Bearer").
bool bearer_matches(const std::string* authorization, const std::string& key);

class Router {
 public:
  // The API must outlive the router. `api_key` empty: no authentication. `disagg` (may be
  // null, else outlives the router): the prefill role serves /internal/prefill/*, the decode
  // role fetches each generation's prompt KV before submitting it (disagg.h).
  Router(OpenAiApi& api, std::string api_key, Disaggregation* disagg = nullptr)
      : api_(api), api_key_(std::move(api_key)), disagg_(disagg) {}
  // The answer to one request; never throws (errors become OpenAI error answers).
  HttpReply handle(const HttpRequest& request);

 private:
  HttpReply dispatch(const HttpRequest& request);
  HttpReply model(const std::string& id) const;
  HttpReply generate(const HttpRequest& request, bool chat);

  OpenAiApi& api_;
  std::string api_key_;
  Disaggregation* disagg_;
};

}  // namespace lmstack::serve
