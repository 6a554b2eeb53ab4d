// HttpServer: the OpenAI-compatible API over HTTP/1.1 (http_routes.h has the endpoints). One
// I/O thread multiplexes every connection with epoll, so an open connection costs a few KiB
// and no thread: slow or idle clients cannot starve the others. Request heads and bodies are
// read incrementally under HttpLimits (431 / 413 answered as soon as a limit is passed) and
// under one deadline for the whole head and body (408). A complete request goes to a small
// worker pool (JSON parsing, tokenization, chat templates, Engine::submit); the I/O thread
// then streams the engine's events as Server-Sent Events (chunked for HTTP/1.1, until close
// for HTTP/1.0) or waits for them and answers once. A client that disconnects cancels its
// request, whose blocks the engine frees at its next step.
//
// stop() drains: the listener closes, idle connections close, requests in flight get
// shutdown_grace_s to finish, then each open stream ends with an error event and
// "data: [DONE]" and each waiting request gets 503; listen() returns once answers are sent.
//
// Thread safety: listen() runs the I/O loop on its caller's thread; stop() may be called
// from any thread (and from a signal-waiting thread) once listen() runs or before it.
#pragma once

#include <memory>
#include <string>

#include "lmstack/serve/disagg.h"
#include "lmstack/serve/http_request.h"
#include "lmstack/serve/openai_api.h"

namespace lmstack::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (see bind())
  std::string api_key;             // when set, /v1/* and the tools need "Authorization: Bearer KEY"
  int num_workers = 2;             // threads that parse, tokenize and submit requests
  double request_timeout_s = 600;  // a non-streaming request gives up after this (504)
  double read_timeout_s = 30;      // head + body must arrive within this after the connection
                                   // opens or the previous answer is sent (else 408, or close)
  int max_connections = 4096;      // accepted at once; more are closed at accept
  double shutdown_grace_s = 5;     // stop(): time requests in flight get to finish
  HttpLimits limits;
  Disaggregation* disagg = nullptr;  // prefill or decode role (disagg.h); outlives the server
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
  // Serves until stop() has drained; bind() first.
  void listen();
  // Begins the drain described above; returns at once.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The web chat page served at "/" (plain HTML + JS, no external resources).
const std::string& web_chat_page();

}  // namespace lmstack::serve
