// Engine events, deadlines and the shutdown drain of HttpServer (see http_server.h): the
// I/O thread forwards a generation's events as SSE (or collects them into one answer),
// answers 408 at read deadlines, and on stop() ends what is in flight cleanly.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lmstack/serve/http_server_impl.h"

namespace lmstack::serve {
namespace {

using namespace http_internal;

// An SSE error event and the end marker: how a stream ends when the server stops it.
std::string shutdown_events() {
  return "data: " +
         error_json("the server is shutting down; the reply was cut short", "server_error", "",
                    503) +
         "\n\ndata: [DONE]\n\n";
}

}  // namespace

void HttpServer::Impl::start_generation(Connection& c, std::shared_ptr<Generation> gen) {
  c.gen = std::move(gen);
  c.streaming = c.gen->request.stream;
  c.state = Connection::State::kGenerating;
  generating.insert(c.id);
  if (!c.streaming) {
    c.gen_deadline = Clock::now() + to_duration(options.request_timeout_s);
    return;
  }
  // HTTP/1.0 has no chunked coding: the stream's end is the connection's close.
  c.chunked = c.minor_version >= 1;
  if (!c.chunked) c.keep_alive = false;
  std::vector<std::pair<std::string, std::string>> headers = {{"Content-Type", "text/event-stream"},
                                                              {"Cache-Control", "no-cache"}};
  headers.emplace_back(c.chunked ? "Transfer-Encoding" : "Connection",
                       c.chunked ? "chunked" : "close");
  c.out += http_head(200, c.minor_version, headers);
  const std::string begin = c.gen->formatter->stream_begin();
  c.out += c.chunked ? http_chunk(begin) : begin;
  flush(c);
}

// Forwards (streaming) or collects (waiting) what the engine produced meanwhile.
void HttpServer::Impl::pump(Connection& c) {
  Generation& g = *c.gen;
  for (int i = 0; i < 256 && c.pending() < kMaxPendingOut; ++i) {
    std::optional<StreamEvent> e = g.stream->next(std::chrono::milliseconds(0));
    if (!e) break;
    const bool last = e->kind == StreamEvent::Kind::kDone || e->kind == StreamEvent::Kind::kError;
    if (c.streaming) {
      const std::string text = g.formatter->stream_event(*e);
      c.out += c.chunked ? http_chunk(text) : text;
      if (last) {
        if (c.chunked) c.out += "0\r\n\r\n";
        end_generation(c);
        return after_answer(c);
      }
      continue;
    }
    g.formatter->add(*e);
    if (!g.formatter->finished()) continue;
    end_generation(c);
    if (!g.formatter->error().empty())
      return respond(c, error_reply(500, g.formatter->error(), "internal_error"));
    HttpReply r;
    r.body = dump_json(g.formatter->response());
    return respond(c, r);
  }
  if (!c.streaming && Clock::now() > c.gen_deadline) {
    g.stream->cancel();
    end_generation(c);
    return respond(
        c, error_reply(504, "the request took longer than the server's timeout", "timeout"));
  }
  flush(c);
}

void HttpServer::Impl::end_generation(Connection& c) {
  generating.erase(c.id);
  c.state = Connection::State::kReading;
}

// Read deadlines (408 when part of a request came, else a quiet close), lingering closes,
// and the drain's grace and flush limits.
void HttpServer::Impl::check_deadlines() {
  const Clock::time_point now = Clock::now();
  if (accept_paused && listener >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag;
    epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &ev);
    accept_paused = false;
  }
  if (draining && !cut && now >= grace_end) {
    cut = true;
    for (const uint64_t tag : std::vector<uint64_t>(generating.begin(), generating.end()))
      cut_short(*conns.at(tag));
  }
  std::vector<Connection*> expired;
  for (auto& [tag, c] : conns) {
    const bool timed =
        c->state == Connection::State::kReading || c->state == Connection::State::kLingering;
    if ((timed && now >= c->deadline) || (draining && now >= flush_end)) expired.push_back(c.get());
  }
  for (Connection* c : expired) {
    if (c->state == Connection::State::kReading && c->got_bytes &&
        !(draining && now >= flush_end)) {
      c->keep_alive = false;
      respond(*c, error_reply(408, "the request did not arrive within the server's read timeout",
                              "invalid_request_error"));
    } else {
      close_connection(*c);
    }
  }
}

void HttpServer::Impl::begin_drain() {
  draining = true;
  grace_end = Clock::now() + to_duration(options.shutdown_grace_s);
  flush_end = grace_end + std::chrono::seconds(2);
  epoll_ctl(epoll, EPOLL_CTL_DEL, listener, nullptr);
  ::close(listener);
  listener = -1;
  std::vector<Connection*> idle;
  for (auto& [tag, c] : conns)
    if (c->state == Connection::State::kReading && !c->got_bytes) idle.push_back(c.get());
  for (Connection* c : idle) close_connection(*c);
  if (options.shutdown_grace_s <= 0) check_deadlines();
}

// Ends a generation the drain did not wait for: a stream gets an error event and [DONE],
// a waiting request a 503.
void HttpServer::Impl::cut_short(Connection& c) {
  c.gen->stream->cancel();
  c.keep_alive = false;
  const bool streaming = c.streaming, chunked = c.chunked;
  end_generation(c);
  if (!streaming)
    return respond(c, error_reply(503, "the server is shutting down", "server_error"));
  const std::string text = shutdown_events();
  c.out += chunked ? http_chunk(text) + "0\r\n\r\n" : text;
  after_answer(c);
}

// Every connection is idle or only lingering: nothing more to answer.
bool HttpServer::Impl::drained() const {
  for (const auto& [tag, c] : conns) {
    const bool idle = c->state == Connection::State::kReading && !c->got_bytes;
    if (!idle && c->state != Connection::State::kLingering) return false;
  }
  return true;
}

}  // namespace lmstack::serve
