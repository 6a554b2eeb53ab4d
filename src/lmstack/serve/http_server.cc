// The event-driven HTTP/1.1 transport of the OpenAI-compatible API (see http_server.h): one
// epoll loop (level-triggered) owns every socket and worker threads run the routes. This
// file: sockets, reading requests, answering; http_server_stream.cc: engine events (polled
// every 2 ms while any request generates, since a RequestStream has no descriptor to wait
// on), deadlines and the drain.
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
#include "lmstack/serve/http_server_impl.h"

namespace lmstack::serve {

using namespace http_internal;

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

}  // namespace lmstack::serve
