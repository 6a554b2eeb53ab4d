// Prefill/decode disaggregation over HTTP (see disagg.h): the prefill endpoint and the
// decode side's fetch with bounded retries. The client is cpp-httplib's (one connection per
// attempt, so a reset connection never poisons the next try).
#include "lmstack/serve/disagg.h"

#include <httplib.h>

#include <chrono>

#include <fmt/format.h>

#include "lmstack/core/log.h"
#include "lmstack/core/timer.h"
#include "lmstack/serve/http_routes.h"

namespace lmstack::serve {
namespace {

constexpr auto kPrefillWait = std::chrono::milliseconds(100);  // the wait between deadline checks
// A prefill longer than this is abandoned (the decode side's --kv-timeout is the tighter bound).
constexpr auto kPrefillDeadline = std::chrono::seconds(600);

// The OpenAI error a prefill server answered, rebuilt so the client sees the same answer.
ApiError passed_through(int status, const std::string& body) {
  try {
    const Json j = Json::parse(body);
    const Json& e = j.at("error");
    return ApiError(
        status, e.value("type", "invalid_request_error"),
        e.contains("param") && e["param"].is_string() ? e["param"].get<std::string>() : "",
        e.value("message", body));
  } catch (const std::exception&) {
    return ApiError(status, "invalid_request_error", "", body);
  }
}

}  // namespace

Disaggregation::Disaggregation(OpenAiApi& api, DisaggOptions options)
    : api_(api), options_(std::move(options)), faults_left_(options_.fault_count) {}

HttpReply Disaggregation::prefill(const std::string& body, bool chat) {
  const Timer timer;
  ApiRequest r = chat ? api_.parse_chat(body) : api_.parse_completion(body);
  if (r.engine.n != 1)
    throw ApiError(400, "invalid_request_error", "n", "'n' must be 1 with disaggregated serving");
  auto handoff = std::make_shared<KvHandoff>();
  r.engine.kv_export = handoff;
  r.engine.params.max_tokens = 1;  // this server samples one token; the pool need only hold it
  std::optional<std::shared_ptr<RequestStream>> stream = api_.engine().submit(r.engine);
  if (!stream)
    return error_reply(429, "the prefill server's queue is full; retry later",
                       "rate_limit_exceeded");
  const auto deadline = std::chrono::steady_clock::now() + kPrefillDeadline;
  while (true) {
    std::optional<StreamEvent> e = (*stream)->next(kPrefillWait);
    if (std::chrono::steady_clock::now() > deadline) {
      (*stream)->cancel();
      return error_reply(504, "the prefill did not finish in time", "internal_error");
    }
    if (!e) continue;
    if (e->kind == StreamEvent::Kind::kError) return error_reply(500, e->error, "internal_error");
    if (e->kind == StreamEvent::Kind::kDone) break;
  }
  HttpReply reply;
  reply.content_type = "application/octet-stream";
  reply.body = encode_kv_message(*handoff);
  KvTransferStats stats;
  stats.num_transfers = 1;
  stats.bytes = static_cast<int64_t>(reply.body.size());
  stats.seconds = timer.seconds();
  api_.engine().metrics().add_kv_transfer(stats);
  inject_fault(reply.body);
  if (reply.body.empty()) return error_reply(503, "injected KV transfer fault", "internal_error");
  return reply;
}

// --inject-kv-fault: damage the first fault_count messages (tests of the decode side).
void Disaggregation::inject_fault(std::string& message) {
  if (options_.fault_kind.empty() || faults_left_.fetch_sub(1) <= 0) return;
  if (options_.fault_kind == "corrupt")
    message[message.size() / 2] = static_cast<char>(message[message.size() / 2] ^ 0x40);
  else if (options_.fault_kind == "truncate")
    message.resize(message.size() / 2);
  else
    message.clear();  // "error": answered 503
  log_warn("injected KV transfer fault: {}", options_.fault_kind);
}

std::string Disaggregation::prefill_url(const HttpRequest& request) const {
  const std::string* header = request.header("x-lmstack-prefill");
  const std::string url = header ? *header : options_.prefill_url;
  if (url.empty())
    throw ApiError(500, "internal_error", "",
                   "this decode server has no prefill server (--prefill URL, or the "
                   "X-Lmstack-Prefill header a router sets)");
  return url;
}

std::optional<KvHandoff> Disaggregation::fetch(const std::string& url, const HttpRequest& request,
                                               bool chat, std::string& error,
                                               std::optional<ApiError>& client_error) {
  httplib::Client client(url);
  const auto timeout = std::chrono::duration<double>(options_.kv_timeout_s);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
  httplib::Headers headers;
  if (const std::string* auth = request.header("authorization"))
    headers.emplace("Authorization", *auth);
  const char* path = chat ? "/internal/prefill/chat" : "/internal/prefill/completions";
  const httplib::Result res = client.Post(path, headers, request.body, "application/json");
  if (!res) {
    error = fmt::format("{}: {}", url, httplib::to_string(res.error()));
    return std::nullopt;
  }
  if (res->status >= 400 && res->status < 500) {
    client_error = passed_through(res->status, res->body);
    return std::nullopt;
  }
  if (res->status != 200) {
    error = fmt::format("{} answered {}: {}", url, res->status, res->body);
    return std::nullopt;
  }
  try {
    return decode_kv_message(res->body, api_.engine().kv_layout());
  } catch (const FormatError& e) {
    error = fmt::format("{} ({} bytes from {})", e.what(), res->body.size(), url);
    return std::nullopt;
  }
}

void Disaggregation::import(const HttpRequest& request, bool chat, ApiRequest& r) {
  if (r.engine.n != 1)
    throw ApiError(400, "invalid_request_error", "n", "'n' must be 1 with disaggregated serving");
  const std::string url = prefill_url(request);
  const Timer timer;
  std::string error;
  KvTransferStats stats;
  for (int attempt = 0; attempt <= options_.kv_retries; ++attempt) {
    if (attempt > 0) ++stats.num_retried;
    std::optional<ApiError> client_error;
    std::optional<KvHandoff> h = fetch(url, request, chat, error, client_error);
    if (client_error) {
      api_.engine().metrics().add_kv_transfer(stats);
      throw *client_error;
    }
    if (!h) {
      log_warn("KV transfer attempt {} of {} failed: {}", attempt + 1, options_.kv_retries + 1,
               error);
      continue;
    }
    stats.num_transfers = 1;
    stats.bytes =
        static_cast<int64_t>(kv_message_bytes(h->layout, h->prompt.size(), h->first.top.size()));
    stats.seconds = timer.seconds();
    api_.engine().metrics().add_kv_transfer(stats);
    r.engine.params.seed = h->seed;  // a seedless request: the seed the prefill server drew
    r.engine.kv_import = std::make_shared<const KvHandoff>(std::move(*h));
    return;
  }
  stats.num_failed = 1;
  api_.engine().metrics().add_kv_transfer(stats);
  throw ApiError(502, "kv_transfer_error", "",
                 fmt::format("the KV transfer from the prefill server failed after {} attempts: {}",
                             options_.kv_retries + 1, error));
}

}  // namespace lmstack::serve
