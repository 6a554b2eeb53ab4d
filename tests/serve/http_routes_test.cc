// The HTTP routes over a live loopback socket (in-process HttpServer, tiny-llama engine
// running): OpenAI error shapes for unknown URLs (404), wrong methods (405 with Allow),
// refused fields (400 naming them), GET /v1/models/{id}, case-insensitive Bearer, HEAD,
// keep-alive, and SSE framing per HTTP version (chunked for 1.1, until close for 1.0).
// Expected values are the HTTP and OpenAI API specifications, written out per case.
#include "lmstack/serve/http_server.h"

#include <thread>

#include <gtest/gtest.h>

#include "api_fixture.h"
#include "raw_http.h"

namespace lmstack::serve {
namespace {

using test::body_of;
using test::http_exchange;
using test::post_request;
using test::status_of;

class HttpRoutesTest : public test::ApiFixture {
 protected:
  void SetUp() override {
    make_api(/*prefix_cache=*/false);
    engine_->start();
    HttpServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.api_key = "s3cret";
    server_ = std::make_unique<HttpServer>(*api_, o);
    port_ = server_->bind();
    listener_ = std::thread([this] { server_->listen(); });
  }
  void TearDown() override {
    server_->stop();
    listener_.join();
    engine_->stop();
  }
  std::string get(const std::string& path, const std::string& method = "GET") {
    return http_exchange(port_, method + " " + path + " HTTP/1.1\r\nHost: x\r\n" + kAuth + "\r\n");
  }
  std::string post(const std::string& path, const std::string& body) {
    return http_exchange(port_, post_request(path, body, kAuth));
  }
  // The {"error": {...}} object of a response; fails the test when it has none.
  Json error_of(const std::string& response) {
    const Json j = Json::parse(body_of(response), nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << response;
    return j.is_object() && j.contains("error") ? j["error"] : Json::object();
  }

  static constexpr const char* kAuth = "Authorization: Bearer s3cret\r\n";
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::thread listener_;
};

TEST_F(HttpRoutesTest, UnknownPathIs404InOpenAiShape) {
  const std::string r = get("/v1/nope");
  EXPECT_EQ(status_of(r), 404) << r;
  const Json e = error_of(r);
  EXPECT_EQ(e["message"], "Invalid URL (GET /v1/nope)");
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_TRUE(e["param"].is_null());
}

TEST_F(HttpRoutesTest, WrongMethodIs405WithAllow) {
  std::string r = get("/v1/completions");
  EXPECT_EQ(status_of(r), 405) << r;
  EXPECT_NE(r.find("\r\nAllow: POST\r\n"), std::string::npos) << r;
  EXPECT_EQ(error_of(r)["type"], "invalid_request_error");
  r = get("/v1/models", "DELETE");
  EXPECT_EQ(status_of(r), 405) << r;
  EXPECT_NE(r.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << r;
}

TEST_F(HttpRoutesTest, ModelById) {
  std::string r = get("/v1/models/tiny");
  ASSERT_EQ(status_of(r), 200) << r;
  const Json m = Json::parse(body_of(r));
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["object"], "model");
  r = get("/v1/models/other");
  EXPECT_EQ(status_of(r), 404) << r;
  EXPECT_EQ(error_of(r)["param"], "model");
}

TEST_F(HttpRoutesTest, BearerSchemeIsCaseInsensitive) {
  const std::string lower = http_exchange(
      port_, "GET /v1/models HTTP/1.1\r\nHost: x\r\nauthorization: bearer s3cret\r\n\r\n");
  EXPECT_EQ(status_of(lower), 200) << lower;
  const std::string wrong = http_exchange(
      port_, "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n");
  EXPECT_EQ(status_of(wrong), 401) << wrong;
  EXPECT_EQ(error_of(wrong)["type"], "authentication_error");
  const std::string open = http_exchange(port_, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(status_of(open), 200) << "/health needs no key: " << open;
}

TEST_F(HttpRoutesTest, RefusedFieldsName) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model":"tiny","prompt":"x","logit_bias":{"5":10}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"x","echo":true})", "echo"},
      {R"({"model":"tiny","prompt":"x","suffix":"end"})", "suffix"},
      {R"({"model":"tiny","prompt":"x","best_of":3})", "best_of"},
      {R"({"model":"tiny","prompt":"x","stop":""})", "stop"},
  };
  for (const auto& [body, field] : cases) {
    const std::string r = post("/v1/completions", body);
    EXPECT_EQ(status_of(r), 400) << body << ": " << r;
    EXPECT_EQ(error_of(r)["param"], field) << body;
  }
  std::string r = post("/v1/chat/completions",
                       R"({"model":"tiny","messages":[{"role":"wizard","content":"x"}]})");
  EXPECT_EQ(status_of(r), 400) << r;
  EXPECT_EQ(error_of(r)["param"], "messages[0].role");
  r = post("/v1/chat/completions",
           R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"logit_bias":{"1":1}})");
  EXPECT_EQ(error_of(r)["param"], "logit_bias") << r;
  // Defaults are accepted: they ask for nothing lmstack lacks.
  r = post(
      "/v1/completions",
      R"({"model":"tiny","prompt":"x","max_tokens":2,"echo":false,"best_of":1,"logit_bias":{}})");
  EXPECT_EQ(status_of(r), 200) << r;
}

TEST_F(HttpRoutesTest, HeadAndKeepAlive) {
  const int fd = test::connect_loopback(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::send_all(fd, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string head = test::read_response(fd, std::chrono::seconds(10), false, true);
  EXPECT_EQ(status_of(head), 200) << head;
  EXPECT_EQ(body_of(head), "") << "HEAD has no body";
  ASSERT_TRUE(test::send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_of(test::read_response(fd, std::chrono::seconds(10))), 200)
      << "a second request on the same connection";
  close(fd);
}

constexpr const char* kStreamBody =
    R"({"model":"tiny","prompt":"Hello","max_tokens":5,"temperature":0,"stream":true})";

TEST_F(HttpRoutesTest, StreamIsChunkedForHttp11) {
  const std::string r = http_exchange(port_, post_request("/v1/completions", kStreamBody, kAuth));
  ASSERT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("\r\nTransfer-Encoding: chunked\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("data: [DONE]\n\n\r\n0\r\n\r\n"), std::string::npos) << r;
}

TEST_F(HttpRoutesTest, StreamToHttp10IsNotChunkedAndEndsWithTheClose) {
  const std::string r =
      http_exchange(port_, post_request("/v1/completions", kStreamBody, kAuth, "HTTP/1.0"),
                    std::chrono::seconds(60), /*until_close=*/true);
  ASSERT_EQ(r.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << r;
  EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos) << r;
  const std::string body = body_of(r);
  EXPECT_EQ(body.rfind("data: {", 0), 0u) << "the body starts with an event, not a chunk size";
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n") << body;
  EXPECT_EQ(body.find("\r\n"), std::string::npos) << "no chunk framing: " << body;
}

}  // namespace
}  // namespace lmstack::serve
