// A raw HTTP/1.x client over loopback sockets for the live-server tests: exact bytes out,
// exact bytes back (status line, headers and framing are what the tests check), every wait
// bounded by a deadline.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

namespace lmstack::serve::test {

// A connected socket to 127.0.0.1:port (-1 on failure); the caller closes it.
inline int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Whether `text` holds a whole response: its head and then Content-Length bytes, or a
// chunked body up to its last chunk. Without either it ends at the close.
inline bool response_complete(const std::string& text) {
  const size_t head_end = text.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string head = text.substr(0, head_end);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (head.rfind("http/1.1 100", 0) == 0) return response_complete(text.substr(head_end + 4));
  if (head.find("transfer-encoding: chunked") != std::string::npos)
    return text.find("\r\n0\r\n\r\n", head_end) != std::string::npos;
  const size_t cl = head.find("content-length: ");
  if (cl == std::string::npos) return false;
  return text.size() - head_end - 4 >= std::strtoull(head.c_str() + cl + 16, nullptr, 10);
}

// Reads until a whole response (`head_only`: its head, as for HEAD), the close, or the
// timeout; returns what came.
inline std::string read_response(int fd, std::chrono::milliseconds timeout,
                                 bool until_close = false, bool head_only = false) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (until_close ||
         !(head_only ? got.find("\r\n\r\n") != std::string::npos : response_complete(got))) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p = {fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[65536];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

// One request on a fresh connection; the whole response (or what came before the timeout).
inline std::string http_exchange(int port, const std::string& request,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(60),
                                 bool until_close = false) {
  const int fd = connect_loopback(port);
  if (fd < 0) return "";
  std::string got;
  if (send_all(fd, request)) got = read_response(fd, timeout, until_close);
  close(fd);
  return got;
}

inline std::string post_request(const std::string& path, const std::string& body,
                                const std::string& extra_headers = "",
                                const std::string& version = "HTTP/1.1") {
  return "POST " + path + " " + version +
         "\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The status code of a response ("HTTP/1.1 200 OK" -> 200), 0 when there is none.
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

inline std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// Resident set size of a process in KiB (VmRSS in /proc/PID/status), -1 if unknown.
inline long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    long value = 0;
    if (key == "VmRSS:" && in >> value) return value;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

// Threads of a process (Threads: in /proc/PID/status), -1 if unknown.
inline int thread_count(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    int value = 0;
    if (key == "Threads:" && in >> value) return value;
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

}  // namespace lmstack::serve::test
