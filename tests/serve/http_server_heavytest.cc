// A live `lmstack serve` under faults, as an attacker or a crowd would load it (issue 13
// item 3, issue 19 item 3); all on 127.0.0.1, each bounded in connections and time:
//  - 300 slowloris connections (a header line every 0.5 s, never ending the head) while a valid
//    client is served with the same greedy answer as on an idle server, in normal time;
//    the slow ones then get 408 at the read timeout;
//  - a 200 MiB header is refused with 431 after at most a few MiB, RSS stays flat;
//  - bodies over --max-body get 413 from their Content-Length (Expect: 100-continue: before
//    any body byte) or their chunk sizes;
//  - 10 rounds of 64 clients mixing valid requests, streams dropped mid-way, malformed
//    requests and requests abandoned half-sent: every valid answer right, every malformed
//    one a 4xx, 0 KV blocks held after each round, RSS flat over rounds;
//  - SIGTERM with streams in flight: past --shutdown-grace each ends with an error event,
//    "data: [DONE]" and the chunked terminator; within it each finishes normally, new
//    connections are refused meanwhile, and the server exits as soon as they are done.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "live_server.h"
#include "lmstack/core/json.h"
#include "raw_http.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using namespace std::chrono_literals;
using test::body_of;
using test::http_exchange;
using test::post_request;
using test::status_of;

const std::string kGreedy =
    R"({"model":"model","prompt":"Hello there","max_tokens":8,"temperature":0})";

// A metric's value in /metrics ("name value" line), -1 when absent.
double metric(int port, const std::string& name) {
  const std::string r = http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 10s);
  // A plain find, not std::regex: GCC 12's -O1 ASan build warns inside <regex>.
  const std::string key = "\n" + name + " ";
  const size_t at = r.find(key);
  return at == std::string::npos ? -1 : std::stod(r.substr(at + key.size()));
}

// Waits (<= 30 s) for the engine to be idle; then the fraction of KV blocks held.
double kv_usage_when_idle(int port) {
  for (int i = 0; i < 300; ++i) {
    if (metric(port, "lmstack:num_requests_running") == 0 &&
        metric(port, "lmstack:num_requests_waiting") == 0)
      break;
    std::this_thread::sleep_for(100ms);
  }
  return metric(port, "lmstack:kv_cache_usage_perc");
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(HttpServerFaults, SlowClientsDoNotHoldUpAValidOne) {
  test::LiveServer server("http_slowloris", "--kv-memory 16MiB --threads 1 --read-timeout 5");
  ASSERT_TRUE(server.ok()) << server.error();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string idle = http_exchange(server.port(), post_request("/v1/completions", kGreedy));
  const double idle_s = seconds_since(t0);
  ASSERT_EQ(status_of(idle), 200) << idle;
  const long rss_idle = test::rss_kib(server.pid());
  const int threads_idle = test::thread_count(server.pid());

  std::vector<int> slow;
  for (int i = 0; i < 300; ++i) {
    const int fd = test::connect_loopback(server.port());
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_TRUE(test::send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
    slow.push_back(fd);
  }
  // And one whose head is whole but whose body never is: the deadline covers the body too.
  const int slow_body = test::connect_loopback(server.port());
  ASSERT_TRUE(test::send_all(slow_body,
                             "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                             "Content-Length: 100\r\n\r\n{\"model\""));
  std::atomic<bool> feeding{true};
  std::thread feeder([&] {  // a header line to each every 0.5 s: never a whole head
    while (feeding.load()) {
      for (int fd : slow) send(fd, "X-a: b\r\n", 8, MSG_NOSIGNAL);
      std::this_thread::sleep_for(500ms);
    }
  });
  std::this_thread::sleep_for(1s);
  const auto t1 = std::chrono::steady_clock::now();
  const std::string busy = http_exchange(server.port(), post_request("/v1/completions", kGreedy));
  const double busy_s = seconds_since(t1);
  const long rss_busy = test::rss_kib(server.pid());
  const int threads_busy = test::thread_count(server.pid());
  std::cout << fmt::format(
      "valid request: {:.3f} s idle, {:.3f} s with 300 slow clients; threads {} -> {}, "
      "RSS {} -> {} KiB\n",
      idle_s, busy_s, threads_idle, threads_busy, rss_idle, rss_busy);
  ASSERT_EQ(status_of(busy), 200) << busy;
  EXPECT_EQ(Json::parse(body_of(busy))["choices"][0]["text"],
            Json::parse(body_of(idle))["choices"][0]["text"]);
  EXPECT_LT(busy_s, 3.0) << "well inside the 5 s read timeout that frees the slow clients";
  EXPECT_EQ(threads_busy, threads_idle) << "connections cost no thread";
  feeding.store(false);  // so no byte reaches a socket the server has closed (a reset)
  feeder.join();
  // The slow ones are answered 408 at the read timeout (5 s after they connected).
  int timed_out = 0;
  for (int fd : slow) {
    const std::string r = test::read_response(fd, 15s, /*until_close=*/true);
    timed_out += status_of(r) == 408;
  }
  for (int fd : slow) close(fd);
  EXPECT_EQ(timed_out, 300);
  const std::string body_answer = test::read_response(slow_body, 15s, /*until_close=*/true);
  close(slow_body);
  EXPECT_EQ(status_of(body_answer), 408) << body_answer;
}

// Sends `prefix` then filler until the server answers or stops reading; returns
// {answer, bytes sent}. The socket is non-blocking so a server that stops reading cannot
// hang the test.
std::pair<std::string, size_t> flood(int port, const std::string& prefix, char filler,
                                     size_t total) {
  const int fd = test::connect_loopback(port);
  if (fd < 0) return {"", 0};
  fcntl(fd, F_SETFL, O_NONBLOCK);
  const std::string block = prefix + std::string((64 << 10) - prefix.size(), filler);
  const std::string fill(64 << 10, filler);
  size_t sent = 0, offset = 0;
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (sent < total && std::chrono::steady_clock::now() < deadline) {
    pollfd p = {fd, POLLIN | POLLOUT, 0};
    poll(&p, 1, 100);
    if ((p.revents & POLLIN) != 0) break;
    if ((p.revents & POLLOUT) == 0) continue;
    const std::string& chunk = sent < block.size() ? block : fill;
    const ssize_t n = send(fd, chunk.data() + offset, chunk.size() - offset, MSG_NOSIGNAL);
    if (n < 0) break;  // reset: the server closed after answering
    sent += static_cast<size_t>(n);
    offset = (offset + static_cast<size_t>(n)) % chunk.size();
  }
  fcntl(fd, F_SETFL, 0);
  answer = test::read_response(fd, 10s);
  close(fd);
  return {answer, sent};
}

TEST(HttpServerFaults, HeaderFloodIsRefusedEarly) {
  test::LiveServer server("http_flood", "--kv-memory 16MiB --threads 1");
  ASSERT_TRUE(server.ok()) << server.error();
  const long rss_before = test::rss_kib(server.pid());
  const size_t kFlood = size_t{200} << 20;
  auto [answer, sent] = flood(server.port(), "GET / HTTP/1.1\r\nX-Flood: ", 'a', kFlood);
  EXPECT_EQ(status_of(answer), 431) << answer.substr(0, 200);
  EXPECT_LT(sent, size_t{16} << 20) << "the server kept reading a 200 MiB header";
  // Many small header lines: the count limit (100 fields).
  std::string lines = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) lines += fmt::format("X-H{}: v\r\n", i);
  const std::string many = http_exchange(server.port(), lines + "\r\n", 10s);
  EXPECT_EQ(status_of(many), 431) << many;
  const long rss_after = test::rss_kib(server.pid());
  std::cout << fmt::format("200 MiB header flood: refused after {} bytes; RSS {} -> {} KiB\n", sent,
                           rss_before, rss_after);
  EXPECT_LT(rss_after - rss_before, 32 << 10) << "RSS grew by the flood";
  // Still serving.
  EXPECT_EQ(status_of(http_exchange(server.port(), post_request("/v1/completions", kGreedy))), 200);
}

TEST(HttpServerFaults, OversizedBodyIsRefusedBeforeItIsRead) {
  test::LiveServer server("http_body", "--kv-memory 16MiB --threads 1 --max-body 1MiB");
  ASSERT_TRUE(server.ok()) << server.error();
  // Expect: 100-continue: answered from the head, no body byte sent.
  const std::string expect =
      http_exchange(server.port(),
                    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                    "Content-Length: 209715200\r\n\r\n",
                    10s);
  EXPECT_EQ(status_of(expect), 413) << expect;
  EXPECT_EQ(Json::parse(body_of(expect))["error"]["type"], "invalid_request_error");
  auto [plain, sent] = flood(server.port(),
                             "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                             "Content-Length: 209715200\r\n\r\n",
                             'x', size_t{200} << 20);
  EXPECT_EQ(status_of(plain), 413) << plain.substr(0, 200);
  EXPECT_LT(sent, size_t{16} << 20);
  auto [chunked, csent] = flood(server.port(),
                                "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n8000000\r\n",
                                'x', size_t{200} << 20);
  EXPECT_EQ(status_of(chunked), 413) << chunked.substr(0, 200);
  EXPECT_LT(csent, size_t{16} << 20);
  // Under the limit is served.
  const std::string ok = http_exchange(server.port(), post_request("/v1/completions", kGreedy));
  EXPECT_EQ(status_of(ok), 200) << ok;
}

// Large bodies (15 MiB prompts, tokenized, then refused as longer than the context) do not
// each leave their memory behind: the worker pool is fixed (2 threads, so per-thread
// tokenizer buffers are bounded by 2) and trims its malloc arena after a large body. Before
// (256 handler threads, each keeping what its biggest request took, no trim) four such
// bodies left RSS 375 MiB higher (models/default; about 94 MiB per body).
TEST(HttpServerFaults, LargeBodiesDoNotKeepMemory) {
  test::LiveServer server("http_large_bodies", "--kv-memory 16MiB --threads 1");
  ASSERT_TRUE(server.ok()) << server.error();
  const long before = test::rss_kib(server.pid());
  std::string prompt;
  for (int i = 0; i < (3 << 20); ++i) prompt += "word ";
  const std::string body = Json{{"model", "model"}, {"prompt", prompt}, {"max_tokens", 1}}.dump();
  for (int i = 0; i < 4; ++i) {
    const std::string r = http_exchange(server.port(), post_request("/v1/completions", body), 120s);
    ASSERT_EQ(status_of(r), 400) << r.substr(0, 300);
    EXPECT_EQ(Json::parse(body_of(r))["error"]["param"], "prompt");
  }
  const long after = test::rss_kib(server.pid());
  std::cout << fmt::format("6 x 15 MiB bodies: RSS {} -> {} KiB\n", before, after);
  EXPECT_LT(after - before, 256 << 10) << "RSS kept what the large bodies took";
}

// CPU time (user + system, in clock ticks) of a process so far; -1 if unknown.
long cpu_ticks(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string field;
  long ticks = 0;
  for (int i = 1; i <= 15 && in >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stol(field);
  return in ? ticks : -1;
}

// Out of file descriptors (a 64-descriptor limit, 100 connections), the server neither
// spins on its always-readable listener nor stops: once connections close it serves again.
TEST(HttpServerFaults, DescriptorExhaustionDoesNotSpin) {
  std::string out;
  if (lmstack::test::run_command("command -v prlimit", &out) != 0)
    GTEST_SKIP() << "prlimit (util-linux) is not on PATH";
  test::LiveServer server("http_emfile", "--kv-memory 16MiB --threads 1", "",
                          "prlimit --nofile=64:64");
  ASSERT_TRUE(server.ok()) << server.error();
  std::vector<int> fds;
  for (int i = 0; i < 100; ++i) fds.push_back(test::connect_loopback(server.port()));
  std::this_thread::sleep_for(500ms);
  const long before = cpu_ticks(server.pid());
  std::this_thread::sleep_for(2s);
  const long used = cpu_ticks(server.pid()) - before;
  std::cout << "cpu ticks while out of descriptors: " << used << " (pid " << server.pid() << ")\n";
  // Idle it uses ~0 ticks; spinning takes >= 25 of 200 even on a loaded 2-core machine.
  EXPECT_LT(used, sysconf(_SC_CLK_TCK) / 10) << "the server spun while out of descriptors";
  for (int fd : fds)
    if (fd >= 0) close(fd);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(status_of(http_exchange(server.port(), post_request("/v1/completions", kGreedy))), 200);
}

// One client of the mixed crowd; returns "" when it behaved as expected, else what not.
std::string crowd_client(int port, int i) {
  const std::string stream_body =
      R"({"model":"model","prompt":"Client says","max_tokens":64,"stream":true,"ignore_eos":true})";
  const std::string long_body =
      R"({"model":"model","prompt":"Wait for it","max_tokens":64,"ignore_eos":true})";
  static const std::vector<std::string> bad = {
      "{not json",
      R"({"model":"model","prompt":"x","max_tokens":-1})",
      R"({"model":"model","prompt":"x","temperature":"hot"})",
      R"({"model":"model","prompt":[999999]})",
      R"({"model":"model","prompt":"x","logit_bias":{"1":2}})",
      R"([1,2,3])",
      R"({"model":"model","messages":[{"role":"x","content":"y"}]})"};
  switch (i % 5) {
    case 0: {  // valid: the whole answer
      const std::string body = fmt::format(
          R"({{"model":"model","prompt":"Client {} says","max_tokens":6,"ignore_eos":true}})", i);
      const std::string r = http_exchange(port, post_request("/v1/completions", body), 120s);
      if (status_of(r) != 200) return "valid request got: " + r.substr(0, 300);
      if (Json::parse(body_of(r))["usage"]["completion_tokens"] != 6) return "wrong usage: " + r;
      return "";
    }
    case 1: {  // a stream dropped after its first event
      const int fd = test::connect_loopback(port);
      test::send_all(fd, post_request("/v1/completions", stream_body));
      std::string got;
      char buf[4096];
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (got.find("data: ") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline) {
        pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1000) <= 0) continue;
        const ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
      }
      close(fd);
      return status_of(got) == 200 ? "" : "stream got: " + got.substr(0, 300);
    }
    case 2: {  // malformed
      const std::string path = i % 7 == 6 ? "/v1/chat/completions" : "/v1/completions";
      const std::string r = http_exchange(port, post_request(path, bad[(i / 5) % bad.size()]), 60s);
      const int s = status_of(r);
      return s >= 400 && s < 500 ? "" : "malformed request got: " + r.substr(0, 300);
    }
    case 3: {  // abandoned half-sent
      const int fd = test::connect_loopback(port);
      test::send_all(
          fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo");
      close(fd);
      return "";
    }
    default: {  // a non-streaming request whose client leaves while it runs
      const int fd = test::connect_loopback(port);
      test::send_all(fd, post_request("/v1/completions", long_body));
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + i));
      close(fd);
      return "";
    }
  }
}

TEST(HttpServerFaults, CrowdWithDisconnectsAndMalformedRequestsLeaksNothing) {
  test::LiveServer server("http_crowd",
                          "--kv-memory 16MiB --threads 1 --no-prefix-cache --max-num-seqs 64");
  ASSERT_TRUE(server.ok()) << server.error();
  std::vector<long> rss;
  int max_threads = 0;
  for (int round = 0; round < 10; ++round) {
    std::vector<std::string> problems(64);
    std::vector<std::thread> clients;
    for (int i = 0; i < 64; ++i)
      clients.emplace_back([&, i] { problems[i] = crowd_client(server.port(), round * 64 + i); });
    std::this_thread::sleep_for(200ms);
    max_threads = std::max(max_threads, test::thread_count(server.pid()));
    for (std::thread& t : clients) t.join();
    for (int i = 0; i < 64; ++i) EXPECT_EQ(problems[i], "") << "round " << round << " client " << i;
    EXPECT_EQ(kv_usage_when_idle(server.port()), 0.0) << "KV blocks held after round " << round;
    rss.push_back(test::rss_kib(server.pid()));
  }
  std::cout << fmt::format(
      "64 clients x 10 rounds: server threads at most {}, RSS per round "
      "{} KiB\n",
      max_threads, fmt::join(rss, " "));
  // Flat: after the first rounds warm the allocator, later rounds add (almost) nothing.
  EXPECT_LT(rss.back() - rss[2], 8 << 10) << fmt::format("RSS per round: {}", fmt::join(rss, " "));
  EXPECT_EQ(status_of(http_exchange(server.port(), post_request("/v1/completions", kGreedy))), 200);
}

TEST(HttpServerFaults, SigtermEndsStreamsInFlightCleanly) {
  test::LiveServer server("http_sigterm", "--threads 1 --kv-memory 64MiB --shutdown-grace 0.5",
                          lmstack::test::source_path("models/default"));
  ASSERT_TRUE(server.ok()) << server.error();
  const std::string body =
      R"({"model":"default","prompt":"Once","max_tokens":480,"ignore_eos":true,"stream":true})";
  std::vector<int> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(test::connect_loopback(server.port()));
    const timeval limit = {30, 0};  // the blocking reads below give up after 30 s
    setsockopt(streams.back(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
    ASSERT_TRUE(test::send_all(streams.back(), post_request("/v1/completions", body)));
  }
  std::vector<std::string> got(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {  // each has begun
    for (int k = 0; k < 100 && got[i].find("data: {") == std::string::npos; ++k) {
      char buf[4096];
      const ssize_t n = recv(streams[i], buf, sizeof(buf), 0);
      if (n <= 0) break;
      got[i].append(buf, static_cast<size_t>(n));
    }
    ASSERT_NE(got[i].find("data: {"), std::string::npos) << got[i];
  }
  const int waiting = test::connect_loopback(server.port());  // a non-streaming one too
  ASSERT_TRUE(test::send_all(
      waiting, post_request("/v1/completions", R"({"model":"default","prompt":"Once",)"
                                               R"("max_tokens":480,"ignore_eos":true})")));
  std::this_thread::sleep_for(100ms);
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  const std::string answer = test::read_response(waiting, 20s);
  close(waiting);
  EXPECT_EQ(status_of(answer), 503) << answer;
  EXPECT_NE(answer.find("\r\nConnection: close\r\n"), std::string::npos) << answer;
  for (size_t i = 0; i < streams.size(); ++i) {
    got[i] += test::read_response(streams[i], 20s, /*until_close=*/true);
    close(streams[i]);
    const std::string& s = got[i];
    EXPECT_NE(s.find("the server is shutting down"), std::string::npos) << "stream " << i;
    ASSERT_GE(s.size(), 19u);
    EXPECT_EQ(s.substr(s.size() - 21), "data: [DONE]\n\n\r\n0\r\n\r\n")
        << "stream " << i
        << " was cut off: " << s.substr(s.size() - std::min<size_t>(300, s.size()));
  }
  EXPECT_TRUE(server.terminate(15s)) << "the server did not exit after SIGTERM";
  EXPECT_NE(server.log_text().find("stopped"), std::string::npos) << server.log_text();
}

TEST(HttpServerFaults, SigtermLetsStreamsFinishWithinTheGrace) {
  test::LiveServer server("http_sigterm_grace", "--threads 1 --kv-memory 64MiB --shutdown-grace 60",
                          lmstack::test::source_path("models/default"));
  ASSERT_TRUE(server.ok()) << server.error();
  const std::string body =
      R"({"model":"default","prompt":"Once","max_tokens":48,"ignore_eos":true,"stream":true})";
  std::vector<int> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(test::connect_loopback(server.port()));
    ASSERT_TRUE(test::send_all(streams.back(), post_request("/v1/completions", body)));
  }
  std::this_thread::sleep_for(50ms);  // both submitted
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  std::this_thread::sleep_for(100ms);
  const int late = test::connect_loopback(server.port());
  EXPECT_LT(late, 0) << "a connection was accepted after SIGTERM";
  if (late >= 0) close(late);
  for (size_t i = 0; i < streams.size(); ++i) {
    const std::string s = test::read_response(streams[i], 30s, /*until_close=*/true);
    close(streams[i]);
    EXPECT_EQ(s.find("shutting down"), std::string::npos) << "stream " << i << " was cut";
    EXPECT_NE(s.find("\"finish_reason\":\"length\""), std::string::npos) << s;
    ASSERT_GE(s.size(), 21u);
    EXPECT_EQ(s.substr(s.size() - 21), "data: [DONE]\n\n\r\n0\r\n\r\n") << "stream " << i;
  }
  EXPECT_TRUE(server.terminate(15s));
  EXPECT_LT(seconds_since(t0), 30.0) << "the drain waited for the whole grace, not the requests";
}

}  // namespace
}  // namespace lmstack::serve
