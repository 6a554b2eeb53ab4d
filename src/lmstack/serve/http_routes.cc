// Routes of the OpenAI-compatible API (see http_routes.h). Unknown URLs are answered as
// OpenAI answers them ("Invalid URL (GET /v1/nope)", invalid_request_error); a known path
// asked with another method gets 405 and the Allow header RFC 9110 section 15.5.6 requires.
#include "lmstack/serve/http_routes.h"

#include <cctype>
#include <chrono>

#include <fmt/format.h>

#include "lmstack/core/log.h"
#include "lmstack/serve/http_server.h"

namespace lmstack::serve {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpReply json_reply(const Json& j) {
  HttpReply r;
  r.body = dump_json(j);
  return r;
}

enum class Method { kGet, kPost };

struct Route {
  const char* path;
  Method method;
  bool open;  // served without the API key
};

// Every path the server knows ("/v1/models/" also takes an id after it).
constexpr Route kRoutes[] = {
    {"/", Method::kGet, true},
    {"/health", Method::kGet, true},
    {"/metrics", Method::kGet, false},
    {"/v1/models", Method::kGet, false},
    {"/v1/models/", Method::kGet, false},
    {"/tokenize", Method::kPost, false},
    {"/detokenize", Method::kPost, false},
    {"/debug/prefix", Method::kPost, false},
    {"/v1/completions", Method::kPost, false},
    {"/v1/chat/completions", Method::kPost, false},
    {"/internal/prefill/completions", Method::kPost, false},  // the prefill role (disagg.h)
    {"/internal/prefill/chat", Method::kPost, false},
};

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  if (path.size() > 11 && path.rfind("/v1/models/", 0) == 0) return &kRoutes[4];
  return nullptr;
}

// RequestError messages start with the field they are about ("top_p must be ...").
std::string field_of(const std::string& what) { return what.substr(0, what.find_first_of(" :")); }

}  // namespace

HttpReply error_reply(int status, const std::string& message, const std::string& type,
                      const std::string& param) {
  HttpReply r;
  r.status = status;
  r.body = error_json(message, type, param, status);
  return r;
}

bool bearer_matches(const std::string* authorization, const std::string& key) {
  if (!authorization || authorization->size() < 7) return false;
  const std::string& a = *authorization;
  static constexpr std::string_view kScheme = "bearer";
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != kScheme[i]) return false;
  size_t token = kScheme.size();
  if (a[token] != ' ') return false;
  while (token < a.size() && a[token] == ' ') ++token;
  return a.compare(token, std::string::npos, key) == 0;
}

HttpReply Router::handle(const HttpRequest& request) {
  try {
    return dispatch(request);
  } catch (const ApiError& e) {
    return error_reply(e.status(), e.what(), e.type(), e.param());
  } catch (const RequestError& e) {
    return error_reply(400, e.what(), "invalid_request_error", field_of(e.what()));
  } catch (const std::exception& e) {
    log_error("{} {} failed: {}", request.method, request.path, e.what());
    return error_reply(500, e.what(), "internal_error");
  }
}

HttpReply Router::dispatch(const HttpRequest& req) {
  const Route* route = find_route(req.path);
  if (!route)
    return error_reply(404, fmt::format("Invalid URL ({} {})", req.method, req.path),
                       "invalid_request_error");
  if (!route->open && !api_key_.empty() && !bearer_matches(req.header("authorization"), api_key_))
    return error_reply(401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
                       "authentication_error");
  const bool get = route->method == Method::kGet;
  const char* allow = get ? "GET, HEAD" : "POST";
  if (req.method == "OPTIONS") {
    HttpReply r;
    r.status = 204;
    r.content_type.clear();
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  if (get ? (req.method != "GET" && req.method != "HEAD") : req.method != "POST") {
    HttpReply r = error_reply(
        405, fmt::format("{} is not allowed on {}; use {}", req.method, req.path, allow),
        "invalid_request_error");
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  const std::string& p = req.path;
  if (p == "/") {
    HttpReply r;
    r.content_type = "text/html; charset=utf-8";
    r.body = web_chat_page();
    return r;
  }
  if (p == "/health") return HttpReply{200, "", "", {}, nullptr};
  if (p == "/metrics") {
    HttpReply r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = api_.engine().metrics().render_prometheus();
    return r;
  }
  if (p == "/v1/models") return json_reply(api_.models());
  if (route == &kRoutes[4]) return model(p.substr(11));
  if (p == "/tokenize") return json_reply(api_.tokenize(req.body));
  if (p == "/detokenize") return json_reply(api_.detokenize(req.body));
  if (p == "/debug/prefix") return json_reply(api_.debug_prefix(req.body));
  if (p.rfind("/internal/prefill/", 0) == 0) {
    if (!disagg_ || disagg_->role() != ServeRole::kPrefill)
      return error_reply(
          404,
          fmt::format("Invalid URL ({} {}): not a prefill server (serve --role prefill)",
                      req.method, req.path),
          "invalid_request_error");
    return disagg_->prefill(req.body, p == "/internal/prefill/chat");
  }
  return generate(req, p == "/v1/chat/completions");
}

// GET /v1/models/{id}: the model object, or OpenAI's 404 for an id that is not served.
HttpReply Router::model(const std::string& id) const {
  const Json list = api_.models();
  for (const Json& m : list["data"])
    if (m["id"] == id) return json_reply(m);
  return error_reply(404, fmt::format("The model '{}' does not exist", id), "invalid_request_error",
                     "model");
}

HttpReply Router::generate(const HttpRequest& req, bool chat) {
  auto g = std::make_shared<Generation>();
  g->request = chat ? api_.parse_chat(req.body) : api_.parse_completion(req.body);
  if (disagg_ && disagg_->role() == ServeRole::kDecode) disagg_->import(req, chat, g->request);
  std::optional<std::shared_ptr<RequestStream>> stream = api_.engine().submit(g->request.engine);
  if (!stream)
    return error_reply(429, "the server's queue is full; retry later", "rate_limit_exceeded");
  g->stream = *stream;
  g->formatter = std::make_unique<ResponseFormatter>(
      g->request, api_.tokenizer(), api_.model_id(),
      fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", g->stream->id()), unix_now());
  HttpReply r;
  r.generation = std::move(g);
  return r;
}

}  // namespace lmstack::serve
