// The event-driven HTTP/1.1 transport of the OpenAI-compatible API (see http_server.h): one
// epoll loop (level-triggered) owns every socket; worker threads run the routes; engine
// events are polled from the loop (every 2 ms while any request is generating), since a
// RequestStream has no descriptor to wait on.
#include "lmstack/serve/http_server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "lmstack/core/log.h"
#include "lmstack/serve/http_routes.h"

namespace lmstack::serve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kListenerTag = 0, kWakeTag = 1;
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxPendingOut = 1 << 20;   // a stream pauses while this much is unsent
constexpr size_t kMaxLingerBytes = 4 << 20;  // discarded after an error answer, then close
constexpr auto kLinger = std::chrono::seconds(2);
constexpr size_t kTrimAfterBody = 1 << 20;

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// An SSE error event and the end marker: how a stream ends when the server stops it.
std::string shutdown_events() {
  return "data: " +
         error_json("the server is shutting down; the reply was cut short", "server_error", "",
                    503) +
         "\n\ndata: [DONE]\n\n";
}

}  // namespace

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

struct HttpServer::Impl {
  // The wake descriptor exists before listen() so that stop() from another thread never
  // races with its creation.
  Impl(OpenAiApi& api, HttpServerOptions o)
      : options(std::move(o)),
        router(api, options.api_key),
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

HttpServer::Impl::~Impl() {
  {
    std::lock_guard lock(mu);
    workers_stop = true;
  }
  cv.notify_all();
  for (std::thread& t : workers) t.join();
  for (auto& [tag, c] : conns) {
    if (c->gen) c->gen->stream->cancel();
    ::close(c->fd);
  }
  for (int fd : {listener, epoll, wake})
    if (fd >= 0) ::close(fd);
}

HttpServer::HttpServer(OpenAiApi& api, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(api, std::move(options))) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  Impl& s = *impl_;
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string port = std::to_string(s.options.port);
  if (getaddrinfo(s.options.host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
    throw_error<IoError>("cannot listen on {}:{} (not an address of this machine)", s.options.host,
                         s.options.port);
  s.listener = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(s.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool ok = s.listener >= 0 && ::bind(s.listener, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::listen(s.listener, 1024) == 0;
  freeaddrinfo(found);
  if (!ok)
    throw_error<IoError>("cannot listen on {}:{}: {}", s.options.host, s.options.port,
                         std::strerror(errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(s.listener, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(addr).sin6_port
                                          : reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

void HttpServer::listen() { impl_->run(); }

void HttpServer::stop() {
  impl_->stop_requested.store(true);
  if (impl_->wake >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(impl_->wake, &one, sizeof(one));
  }
}

void HttpServer::Impl::run() {
  if (epoll < 0 || wake < 0) throw_error<IoError>("epoll/eventfd: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerTag;
  epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &ev);
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll, EPOLL_CTL_ADD, wake, &ev);
  for (int i = 0; i < std::max(1, options.num_workers); ++i)
    workers.emplace_back([this] { work(); });
  Clock::time_point next_check = Clock::now();
  epoll_event events[256];
  while (true) {
    if (stop_requested.load() && !draining) begin_drain();
    if (draining && drained()) break;
    const int timeout = !generating.empty() ? 2 : (draining ? 20 : 200);
    const int n = epoll_wait(epoll, events, 256, timeout);
    for (int i = 0; i < n; ++i) on_event(events[i].data.u64, events[i].events);
    take_replies();
    for (auto it = generating.begin(); it != generating.end();) {
      Connection& c = *conns.at(*it++);  // pump may remove c from `generating`
      pump(c);
    }
    if (Clock::now() >= next_check) {
      check_deadlines();
      next_check = Clock::now() + std::chrono::milliseconds(100);
    }
  }
}

void HttpServer::Impl::accept_all() {
  while (true) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors the listener stays readable: stop watching it for a moment
      // instead of spinning on a level-triggered event (check_deadlines() resumes it).
      if ((errno == EMFILE || errno == ENFILE) && !accept_paused) {
        if (Clock::now() >= next_fd_warning) {
          log_warn("accept: out of file descriptors ({} connections open)", conns.size());
          next_fd_warning = Clock::now() + std::chrono::seconds(10);
        }
        epoll_ctl(epoll, EPOLL_CTL_DEL, listener, nullptr);
        accept_paused = true;
      }
      return;
    }
    if (static_cast<int>(conns.size()) >= options.max_connections) {
      ::close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>(fd, next_tag++, options.limits);
    c->deadline = Clock::now() + to_duration(options.read_timeout_s);
    Connection& ref = *c;
    conns.emplace(ref.id, std::move(c));
    update_events(ref);
  }
}

void HttpServer::Impl::on_event(uint64_t tag, uint32_t events) {
  if (tag == kListenerTag) return accept_all();
  if (tag == kWakeTag) {
    uint64_t count;
    [[maybe_unused]] const ssize_t n = read(wake, &count, sizeof(count));
    return;
  }
  auto it = conns.find(tag);
  if (it == conns.end()) return;
  Connection& c = *it->second;
  const bool reading =
      c.state == Connection::State::kReading || c.state == Connection::State::kLingering;
  if (reading && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) return read_input(c);
  if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) return close_connection(c);  // left
  if ((events & EPOLLOUT) != 0) flush(c);
}

void HttpServer::Impl::read_input(Connection& c) {
  char buffer[kReadChunk];
  for (size_t total = 0; total < 4 * kReadChunk;) {  // bounded, so one client cannot hog
    const ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
    if (n == 0) return close_connection(c);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return close_connection(c);
    }
    total += static_cast<size_t>(n);
    if (c.state == Connection::State::kLingering) {
      c.lingered += static_cast<size_t>(n);
      if (c.lingered > kMaxLingerBytes) return close_connection(c);
      continue;
    }
    c.in.append(buffer, static_cast<size_t>(n));
    c.got_bytes = true;
    const uint64_t id = c.id;
    process_input(c);
    if (conns.count(id) == 0 || c.state != Connection::State::kReading) return;
  }
}

// Reads as much of one request as `in` holds; a whole one goes to the workers.
void HttpServer::Impl::process_input(Connection& c) {
  if (c.state != Connection::State::kReading || c.in.empty()) return;
  const RequestReader::Result r = c.reader.feed(c.in);
  if (r == RequestReader::Result::kError) {
    c.keep_alive = false;
    c.minor_version = 1;
    respond(
        c, error_reply(c.reader.error().status, c.reader.error().message, "invalid_request_error"));
    return;
  }
  if (r == RequestReader::Result::kNeedMore) {
    if (c.reader.awaiting_body() && c.reader.expects_continue() && !c.continue_sent) {
      c.continue_sent = true;
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      flush(c);
    }
    return;
  }
  dispatch(c);
}

void HttpServer::Impl::dispatch(Connection& c) {
  HttpRequest& req = c.reader.request();
  c.minor_version = req.minor_version;
  c.keep_alive = req.keep_alive() && !draining;
  c.head_only = req.method == "HEAD";
  if (draining) {
    respond(c, error_reply(503, "the server is shutting down", "server_error"));
    return;
  }
  c.state = Connection::State::kWorking;
  update_events(c);
  {
    std::lock_guard lock(mu);
    jobs.emplace_back(c.id, std::move(req));
  }
  cv.notify_one();
}

void HttpServer::Impl::work() {
  while (true) {
    std::pair<uint64_t, HttpRequest> job;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return workers_stop || !jobs.empty(); });
      if (jobs.empty()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    HttpReply reply = router.handle(job.second);
    const bool large = job.second.body.size() > kTrimAfterBody;
    const uint64_t tag = job.first;
    job = {};
    {
      std::lock_guard lock(mu);
      replies.emplace_back(tag, std::move(reply));
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake, &one, sizeof(one));
    // The parse of a large body leaves its JSON tree and token buffers freed in this
    // thread's malloc arena, which glibc keeps; hand the pages back so RSS returns to the
    // server's working set.
    if (large) malloc_trim(0);
  }
}

void HttpServer::Impl::take_replies() {
  std::deque<std::pair<uint64_t, HttpReply>> done;
  {
    std::lock_guard lock(mu);
    done.swap(replies);
  }
  for (auto& [tag, reply] : done) {
    auto it = conns.find(tag);
    if (it == conns.end()) {  // the client left while its route ran
      if (reply.generation) reply.generation->stream->cancel();
      continue;
    }
    on_reply(*it->second, std::move(reply));
  }
}

void HttpServer::Impl::on_reply(Connection& c, HttpReply reply) {
  if (!reply.generation) return respond(c, reply);
  if (cut) {  // past the grace period: refuse at once
    reply.generation->stream->cancel();
    c.keep_alive = false;
    return respond(c, error_reply(503, "the server is shutting down", "server_error"));
  }
  start_generation(c, std::move(reply.generation));
}

// A complete answer; then the next request (keep-alive) or the close.
void HttpServer::Impl::respond(Connection& c, const HttpReply& reply) {
  if (draining) c.keep_alive = false;
  std::vector<std::pair<std::string, std::string>> headers;
  if (!reply.content_type.empty()) headers.emplace_back("Content-Type", reply.content_type);
  if (reply.status != 204 && reply.status >= 200)
    headers.emplace_back("Content-Length", std::to_string(reply.body.size()));
  if (!c.keep_alive)
    headers.emplace_back("Connection", "close");
  else if (c.minor_version == 0)
    headers.emplace_back("Connection", "keep-alive");
  for (const auto& h : reply.headers) headers.push_back(h);
  c.out += http_head(reply.status, c.minor_version, headers);
  if (!c.head_only) c.out += reply.body;
  after_answer(c);
}

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

// After an answer is queued: read the next request (its bytes may already be in `in`) or
// close once the answer is out.
void HttpServer::Impl::after_answer(Connection& c) {
  c.gen.reset();
  if (c.keep_alive && !draining) {
    c.state = Connection::State::kReading;
    c.reader.reset();
    c.got_bytes = !c.in.empty();
    c.continue_sent = false;
    c.deadline = Clock::now() + to_duration(options.read_timeout_s);
    update_events(c);
    const uint64_t id = c.id;
    flush(c);
    if (conns.count(id) != 0 && c.state == Connection::State::kReading) process_input(c);
    return;
  }
  c.state = Connection::State::kClosing;
  flush(c);
}

void HttpServer::Impl::flush(Connection& c) {
  while (c.pending() > 0) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_sent, c.pending(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      return close_connection(c);  // the client left: its request is cancelled there
    }
    c.out_sent += static_cast<size_t>(n);
  }
  if (c.pending() == 0) {
    c.out.clear();
    c.out_sent = 0;
    if (c.state == Connection::State::kClosing) {
      shutdown(c.fd, SHUT_WR);
      c.state = Connection::State::kLingering;
      c.deadline = Clock::now() + kLinger;
    }
  }
  update_events(c);
}

void HttpServer::Impl::update_events(Connection& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.state == Connection::State::kReading || c.state == Connection::State::kLingering)
    want |= EPOLLIN;
  if (c.pending() > 0) want |= EPOLLOUT;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll, c.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
  c.events = want;
}

void HttpServer::Impl::close_connection(Connection& c) {
  if (c.gen) c.gen->stream->cancel();  // the engine frees its blocks at its next step
  generating.erase(c.id);
  epoll_ctl(epoll, EPOLL_CTL_DEL, c.fd, nullptr);
  ::close(c.fd);
  conns.erase(c.id);  // c is gone after this
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
