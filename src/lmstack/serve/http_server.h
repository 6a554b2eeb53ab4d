// HttpServer: the OpenAI-compatible API over HTTP/1.1 (cpp-httplib): /v1/models,
// /v1/completions, /v1/chat/completions (JSON or Server-Sent Events), /tokenize, /detokenize,
// /health, /metrics (Prometheus), /debug/prefix, and the web chat page at /. Each handler is
// one of the three catch points of STYLE.md: a bad request gets a 4xx OpenAI error JSON, a
// full queue 429, and every other client keeps being served. A client that disconnects
// cancels its request, whose blocks the engine frees at its next step: a streaming one is
// noticed when a write fails, a waiting non-streaming one by polling its socket between
// events (at most 100 ms apart).
//
// Thread safety: handlers run on the server's thread pool; they share only the engine
// (thread-safe submit) and the const API. stop() may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "lmstack/serve/openai_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace lmstack::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (see bind())
  std::string api_key;             // when set, /v1/* and the tools need "Authorization: Bearer KEY"
  int num_threads = 256;           // concurrent connections served (a stream holds one)
  double request_timeout_s = 600;  // a non-streaming request gives up after this
};

class HttpServer {
 public:
  // The API (and its engine) must outlive the server; the engine must be start()ed.
  HttpServer(OpenAiApi& api, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket; returns the port. Throws IoError when the address is unavailable.
  int bind();
  // Serves until stop(); bind() first.
  void listen();
  void stop();

 private:
  void add_routes();
  // /v1/completions and /v1/chat/completions: submit, then stream SSE or wait for the end.
  void generate(const httplib::Request& req, bool chat, httplib::Response& res);

  OpenAiApi& api_;
  HttpServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

// The web chat page served at "/" (plain HTML + JS, no external resources).
const std::string& web_chat_page();

}  // namespace lmstack::serve
