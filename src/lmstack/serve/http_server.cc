// HTTP transport of the OpenAI-compatible API (see http_server.h).
#include "lmstack/serve/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <filesystem>

#include "lmstack/core/log.h"
#include "lmstack/serve/openai_format.h"

namespace lmstack::serve {
namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& type, const std::string& param) {
  res.status = status;
  res.set_content(error_json(message, type, param, status), "application/json");
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs a handler body, turning exceptions into the OpenAI error answer (catch point 2).
template <class F>
void guarded(httplib::Response& res, F&& body) {
  try {
    body();
  } catch (const ApiError& e) {
    send_error(res, e.status(), e.what(), e.type(), e.param());
  } catch (const RequestError& e) {
    const std::string what = e.what();
    send_error(res, 400, what, "invalid_request_error", what.substr(0, what.find_first_of(" :")));
  } catch (const std::exception& e) {
    log_error("request failed: {}", e.what());
    send_error(res, 500, e.what(), "internal_error", "");
  }
}

// One streaming response: the engine's events become SSE chunks as they arrive.
struct StreamState {
  ApiRequest request;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<ResponseFormatter> formatter;
  bool begun = false;
  bool done = false;
};

bool write_text(httplib::DataSink& sink, const std::string& text) {
  return text.empty() || sink.write(text.data(), text.size());
}

// Called by httplib until it returns false or sink.done(); each call forwards what the
// engine produced meanwhile. A failed write means the client left: cancel the request.
bool pump_stream(StreamState& s, httplib::DataSink& sink) {
  if (!s.begun) {
    s.begun = true;
    if (!write_text(sink, s.formatter->stream_begin())) return false;
  }
  for (int i = 0; i < 64; ++i) {  // bounded: at most 64 events per call
    std::optional<StreamEvent> e = s.stream->next(i == 0 ? kPoll : std::chrono::milliseconds(0));
    if (!e) break;
    const bool last = e->kind == StreamEvent::Kind::kDone || e->kind == StreamEvent::Kind::kError;
    if (!write_text(sink, s.formatter->stream_event(*e))) return false;
    if (last) {
      s.done = true;
      sink.done();
      return true;
    }
  }
  return sink.is_writable();
}

// "address:port" of a socket address (IPv4 or IPv6), "" for other families.
std::string endpoint_text(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, ntohs(v4.sin_port));
  }
  if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    return fmt::format("{}:{}", text, ntohs(v6.sin6_port));
  }
  return "";
}

// The socket a request arrived on, found among this process's descriptors by its two
// endpoints (cpp-httplib 0.11 does not hand it to handlers; a TCP connection is unique by
// them); -1 when not found. The descriptor stays open while the handler runs.
int connection_socket(const httplib::Request& req) {
  const std::string local = fmt::format("{}:{}", req.local_addr, req.local_port);
  const std::string remote = fmt::format("{}:{}", req.remote_addr, req.remote_port);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    sockaddr_storage mine{}, peer{};
    socklen_t mine_len = sizeof(mine), peer_len = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &mine_len) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    if (endpoint_text(mine) == local && endpoint_text(peer) == remote) return fd;
  }
  return -1;
}

// Whether the client closed (or reset) the connection: the socket reports hang-up or end of
// input. A client that only shuts down its sending side counts as gone too.
bool client_left(int socket) {
  pollfd p = {socket, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return true;
  char byte;
  return recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace

HttpServer::HttpServer(OpenAiApi& api, HttpServerOptions options)
    : api_(api), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  const int threads = options_.num_threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(64u << 20);
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const int port = options_.port == 0
                       ? server_->bind_to_any_port(options_.host)
                       : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    throw_error<IoError>("cannot listen on {}:{} (in use, or not an address of this machine)",
                         options_.host, options_.port);
  return port;
}

void HttpServer::listen() { server_->listen_after_bind(); }

void HttpServer::stop() {
  if (server_) server_->stop();
}

void HttpServer::add_routes() {
  httplib::Server& s = *server_;
  const std::string key = options_.api_key;
  // Authentication first: everything but the page and /health needs the key when set.
  s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.path == "/" || req.path == "/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
               "authentication_error", "");
    return httplib::Server::HandlerResponse::Handled;
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web_chat_page(), "text/html; charset=utf-8");
  });
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(api_.engine().metrics().render_prometheus(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json(api_.models()), "application/json");
  });
  auto json_route = [this](auto method) {
    return [this, method](const httplib::Request& req, httplib::Response& res) {
      guarded(res,
              [&] { res.set_content(dump_json((api_.*method)(req.body)), "application/json"); });
    };
  };
  s.Post("/tokenize", json_route(&OpenAiApi::tokenize));
  s.Post("/detokenize", json_route(&OpenAiApi::detokenize));
  s.Post("/debug/prefix", json_route(&OpenAiApi::debug_prefix));
  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { generate(req, false, res); });
  });
  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { generate(req, true, res); });
  });
}

void HttpServer::generate(const httplib::Request& req, bool chat, httplib::Response& res) {
  auto state = std::make_shared<StreamState>();
  state->request = chat ? api_.parse_chat(req.body) : api_.parse_completion(req.body);
  std::optional<std::shared_ptr<RequestStream>> stream =
      api_.engine().submit(state->request.engine);
  if (!stream) {
    send_error(res, 429, "the server's queue is full; retry later", "rate_limit_exceeded", "");
    return;
  }
  state->stream = *stream;
  state->formatter = std::make_unique<ResponseFormatter>(
      state->request, api_.tokenizer(), api_.model_id(),
      fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", state->stream->id()), unix_now());
  if (state->request.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state](size_t, httplib::DataSink& sink) { return pump_stream(*state, sink); },
        [state](bool) {
          if (!state->done) state->stream->cancel();  // the client left early
        });
    return;
  }
  // Not streaming: wait, checking between events that the client is still there.
  const int socket = connection_socket(req);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.request_timeout_s);
  auto next_check = std::chrono::steady_clock::now() + kPoll;
  while (!state->formatter->finished()) {
    if (std::optional<StreamEvent> e = state->stream->next(kPoll)) state->formatter->add(*e);
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) continue;
    next_check = now + kPoll;
    if (socket >= 0 && client_left(socket)) {
      state->stream->cancel();
      res.status = 499;  // nginx's "client closed request"; nobody reads it
      return;
    }
    if (now > deadline) {
      state->stream->cancel();
      send_error(res, 504, "the request took longer than the server's timeout", "timeout", "");
      return;
    }
  }
  if (!state->formatter->error().empty()) {
    send_error(res, 500, state->formatter->error(), "internal_error", "");
    return;
  }
  res.set_content(dump_json(state->formatter->response()), "application/json");
}

}  // namespace lmstack::serve
