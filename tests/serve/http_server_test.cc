// HttpServer over a live loopback socket (in-process, on an init-model tiny-llama): a client
// that disconnects cancels its request, streaming or not, and the engine frees its blocks at
// its next step. The test drives engine.step() itself, so every step is observed: the
// request is running and holds blocks, the client closes its socket, and within a bounded
// number of steps (fewer than max_tokens) the request ends as cancelled with no block held.
#include "lmstack/serve/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "api_fixture.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

// Connects to 127.0.0.1:port and sends one POST; returns the socket (-1 on failure).
int send_request(int port, const std::string& path, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  const std::string request = "POST " + path +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

class HttpServerTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    make_api(/*prefix_cache=*/false);  // so a freed request leaves no block held
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.num_workers = 2;
    o.request_timeout_s = 60;
    server_ = std::make_unique<HttpServer>(*api_, o);
    port_ = server_->bind();
    listener_ = std::thread([this] { server_->listen(); });
  }
  void TearDown() override {
    server_->stop();
    listener_.join();
  }

  // Sends a long request, lets it run, disconnects, and checks it is cancelled and freed.
  void expect_disconnect_cancels(bool stream) {
    const std::string body = std::string(R"({"model": "tiny", "prompt": "Hello there", )") +
                             R"("max_tokens": 200, "ignore_eos": true, "stream": )" +
                             (stream ? "true}" : "false}");
    const int fd = send_request(port_, "/v1/completions", body);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 500 && engine_->metrics().gauges().num_running == 0; ++i) {
      if (!engine_->step()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(engine_->metrics().gauges().num_running, 1) << "the request never started";
    engine_->step();
    EXPECT_GT(engine_->metrics().gauges().kv_blocks_used, 0);
    close(fd);
    // One step per 100 ms: the handler polls the socket (or fails a write) meanwhile.
    int steps = 0;
    while (engine_->metrics().gauges().num_running > 0 && steps < 100) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      engine_->step();
      ++steps;
    }
    const EngineGauges g = engine_->metrics().gauges();
    EXPECT_EQ(g.num_running, 0) << "still running after " << steps << " steps";
    EXPECT_EQ(g.kv_blocks_used, 0);
    const std::string metrics = engine_->metrics().render_prometheus();
    EXPECT_NE(metrics.find("\nlmstack:request_cancelled_total 1\n"), std::string::npos) << metrics;
    EXPECT_NE(metrics.find("\nlmstack:request_success_total 0\n"), std::string::npos) << metrics;
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread listener_;
};

TEST_F(HttpServerTest, NonStreamingClientThatDisconnectsIsCancelled) {
  expect_disconnect_cancels(false);
}

TEST_F(HttpServerTest, StreamingClientThatDisconnectsIsCancelled) {
  expect_disconnect_cancels(true);
}

}  // namespace
}  // namespace lmstack::serve
