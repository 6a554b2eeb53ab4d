// The disaggregation router (see disagg_router.h): accept, read one request head, rewrite
// two headers, connect to a decode server and pipe bytes both ways until it closes.
#include "lmstack/serve/disagg_router.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "lmstack/core/error.h"
#include "lmstack/core/log.h"

namespace lmstack::serve {
namespace {

constexpr size_t kMaxHead = 64 << 10;
constexpr int kPollMs = 200;

int connect_to(const std::string& host, const std::string& port) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return -1;
  int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent <= 0) return false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

void send_error(int fd, int status, const std::string& reason, const std::string& message) {
  const std::string body = fmt::format(
      R"({{"error": {{"message": "{}", "type": "router_error", "param": null, "code": {}}}}})",
      message, status);
  const std::string reply = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: "
      "close\r\n\r\n{}",
      status, reason, body.size(), body);
  send_all(fd, reply.data(), reply.size());
}

// Forwards bytes both ways until the upstream closes, a side fails, or a stop's grace ends.
// A client that goes away closes the upstream too, which cancels its request there.
void pipe_until_close(int client, int upstream, const std::atomic<bool>& stopping, double grace_s) {
  char buf[64 << 10];
  std::chrono::steady_clock::time_point cut{};
  while (true) {
    if (stopping && cut == std::chrono::steady_clock::time_point{})
      cut = std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                std::chrono::duration<double>(grace_s));
    if (cut != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() > cut)
      return;
    pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    if (poll(p, 2, kPollMs) <= 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::recv(p[k].fd, buf, sizeof(buf), 0);
      if (n <= 0) return;
      if (!send_all(p[1 - k].fd, buf, static_cast<size_t>(n))) return;
    }
  }
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ProxyRouter::ProxyRouter(ProxyRouterOptions options) : options_(std::move(options)) {
  auto parse = [](const std::string& url, const char* flag) {
    // http://host:port, nothing after the port.
    const size_t colon = url.rfind(':');
    if (url.rfind("http://", 0) != 0 || colon == std::string::npos || colon < 7 ||
        url.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
        colon + 1 == url.size())
      throw_error<ConfigError>("{} '{}': expected http://host:port", flag, url);
    return Backend{url, url.substr(7, colon - 7), url.substr(colon + 1)};
  };
  for (const std::string& u : options_.prefill_urls) prefill_.push_back(parse(u, "--prefill"));
  for (const std::string& u : options_.decode_urls) decode_.push_back(parse(u, "--decode"));
  if (prefill_.empty() || decode_.empty())
    throw_error<ConfigError>("--role router needs at least one --prefill and one --decode URL");
}

ProxyRouter::~ProxyRouter() {
  if (listener_ >= 0) ::close(listener_);
}

int ProxyRouter::bind() {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string port = std::to_string(options_.port);
  if (getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
    throw_error<IoError>("cannot listen on {}:{}", options_.host, options_.port);
  listener_ = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool ok = listener_ >= 0 && ::bind(listener_, found->ai_addr, found->ai_addrlen) == 0 &&
                  ::listen(listener_, 1024) == 0;
  freeaddrinfo(found);
  if (!ok)
    throw_error<IoError>("cannot listen on {}:{}: {}", options_.host, options_.port,
                         std::strerror(errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(addr).sin6_port
                                          : reinterpret_cast<sockaddr_in&>(addr).sin_port);
}

void ProxyRouter::serve() {
  while (!stopping_) {
    pollfd p{listener_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++open_;
    std::thread([this, fd] {
      handle(fd);
      ::close(fd);
      --open_;
    }).detach();
  }
  const auto grace_end = std::chrono::steady_clock::now() +
                         std::chrono::duration<double>(options_.shutdown_grace_s + 1);
  while (open_ > 0 && std::chrono::steady_clock::now() < grace_end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void ProxyRouter::stop() { stopping_ = true; }

bool ProxyRouter::rewrite_head(std::string& head, const std::string& prefill_url) const {
  const size_t first_end = head.find("\r\n");
  if (first_end == std::string::npos ||
      head.substr(0, first_end).find(" HTTP/1.") == std::string::npos)
    return false;
  std::string out = head.substr(0, first_end + 2);
  for (size_t at = first_end + 2; at < head.size();) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string::npos || end == at) break;
    const std::string line = head.substr(at, end - at);
    const std::string name = lower(line.substr(0, line.find(':')));
    if (name != "connection" && name != "x-lmstack-prefill" && name != "keep-alive")
      out += line + "\r\n";
    at = end + 2;
  }
  out += "X-Lmstack-Prefill: " + prefill_url + "\r\nConnection: close\r\n\r\n";
  head = std::move(out);
  return true;
}

// One client connection: the head (bounded in size and time), then a pipe until the decode
// server closes (it answers Connection: close) or either side fails.
void ProxyRouter::handle(int client) {
  std::string in;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.read_timeout_s);
  size_t head_end = std::string::npos;
  char buf[64 << 10];
  while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
    if (in.size() > kMaxHead || std::chrono::steady_clock::now() > deadline || stopping_)
      return send_error(client, 431, "Request Header Fields Too Large",
                        "request head too large or too slow");
    pollfd p{client, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const ssize_t n = ::recv(client, buf, sizeof(buf), 0);
    if (n <= 0) return;
    in.append(buf, static_cast<size_t>(n));
  }
  std::string head = in.substr(0, head_end + 4);
  const std::string rest = in.substr(head_end + 4);
  const uint64_t i = next_++;
  const Backend& prefill = prefill_[i % prefill_.size()];
  const Backend& decode = decode_[i % decode_.size()];
  if (!rewrite_head(head, prefill.url))
    return send_error(client, 400, "Bad Request", "not an HTTP/1.x request");
  const int upstream = connect_to(decode.host, decode.port);
  if (upstream < 0)
    return send_error(client, 502, "Bad Gateway",
                      fmt::format("cannot connect to the decode server {}", decode.url));
  if (send_all(upstream, head.data(), head.size()) && send_all(upstream, rest.data(), rest.size()))
    pipe_until_close(client, upstream, stopping_, options_.shutdown_grace_s);
  ::close(upstream);
}

}  // namespace lmstack::serve
