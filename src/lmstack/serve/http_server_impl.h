// Internals of HttpServer (http_server.h), shared by http_server.cc (sockets, reading,
// answering) and http_server_stream.cc (engine events, deadlines, the drain). Everything
// here belongs to the I/O thread except the queues guarded by Impl::mu.
#pragma once

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lmstack/serve/http_request.h"
#include "lmstack/serve/http_routes.h"
#include "lmstack/serve/http_server.h"

namespace lmstack::serve::http_internal {

using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kListenerTag = 0, kWakeTag = 1;
inline constexpr size_t kReadChunk = 64 << 10;
inline constexpr size_t kMaxPendingOut = 1 << 20;   // a stream pauses while this much is unsent
inline constexpr size_t kMaxLingerBytes = 4 << 20;  // discarded after an error answer, then close
inline constexpr auto kLinger = std::chrono::seconds(2);
inline constexpr size_t kTrimAfterBody = 1 << 20;

inline Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One client connection. States: kReading a request → kWorking (a worker runs its route) →
// kGenerating (engine events are forwarded or collected) → kReading again (keep-alive) or
// kClosing (send what is left) → kLingering (discard input briefly so the client can read
// the answer before the close, RFC 9112 section 9.6), then closed.
struct Connection {
  enum class State { kReading, kWorking, kGenerating, kClosing, kLingering };
  Connection(int socket, uint64_t tag, HttpLimits limits) : fd(socket), id(tag), reader(limits) {}
  int fd;
  uint64_t id;
  State state = State::kReading;
  std::string in, out;
  size_t out_sent = 0;
  RequestReader reader;
  Clock::time_point deadline;  // kReading: the request by then; kLingering: close by then
  bool got_bytes = false, continue_sent = false;
  bool keep_alive = true, head_only = false;
  int minor_version = 1;
  uint32_t events = 0;
  size_t lingered = 0;
  std::shared_ptr<Generation> gen;
  bool streaming = false, chunked = false;
  Clock::time_point gen_deadline;
  size_t pending() const { return out.size() - out_sent; }
};

}  // namespace lmstack::serve::http_internal

namespace lmstack::serve {

struct HttpServer::Impl {
  using Clock = http_internal::Clock;
  using Connection = http_internal::Connection;

  // The wake descriptor exists before listen() so that stop() from another thread never
  // races with its creation.
  Impl(OpenAiApi& api, HttpServerOptions o)
      : options(std::move(o)),
        router(api, options.api_key, options.disagg),
        epoll(epoll_create1(EPOLL_CLOEXEC)),
        wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Impl();

  // Loop (I/O thread).
  void run();
  void accept_all();
  void on_event(uint64_t tag, uint32_t events);
  void read_input(Connection& c);
  void process_input(Connection& c);
  void dispatch(Connection& c);
  void on_reply(Connection& c, HttpReply reply);
  void respond(Connection& c, const HttpReply& reply);
  void start_generation(Connection& c, std::shared_ptr<Generation> gen);
  void pump(Connection& c);
  void end_generation(Connection& c);
  void flush(Connection& c);
  void after_answer(Connection& c);
  void update_events(Connection& c);
  void close_connection(Connection& c);
  void check_deadlines();
  void begin_drain();
  void cut_short(Connection& c);
  bool drained() const;
  void take_replies();
  // Workers.
  void work();

  HttpServerOptions options;
  Router router;
  int listener = -1, epoll = -1, wake = -1;
  uint64_t next_tag = 2;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns;
  std::set<uint64_t> generating;  // connections in kGenerating
  std::atomic<bool> stop_requested{false};
  bool draining = false, cut = false;
  bool accept_paused = false;  // the listener is out of epoll after EMFILE
  Clock::time_point next_fd_warning;
  Clock::time_point grace_end, flush_end;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<uint64_t, HttpRequest>> jobs;   // GUARDED_BY(mu)
  std::deque<std::pair<uint64_t, HttpReply>> replies;  // GUARDED_BY(mu)
  bool workers_stop = false;                           // GUARDED_BY(mu)
  std::vector<std::thread> workers;
};

}  // namespace lmstack::serve
