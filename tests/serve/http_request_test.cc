// RequestReader (HTTP/1.1 request reading with limits) and the Bearer check, without
// sockets: the expected results are RFC 9112's grammar, written out by hand per case.
#include "lmstack/serve/http_request.h"

#include <gtest/gtest.h>

#include "lmstack/serve/http_routes.h"

namespace lmstack::serve {
namespace {

using Result = RequestReader::Result;

HttpLimits small_limits() {
  HttpLimits l;
  l.max_header_bytes = 256;
  l.max_headers = 4;
  l.max_body_bytes = 100;
  return l;
}

TEST(RequestReader, ReadsPipelinedRequestsFedByteByByte) {
  const std::string wire =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"
      "GET /health HTTP/1.0\nConnection: keep-alive\n\n";
  RequestReader reader(small_limits());
  std::string in;
  std::vector<HttpRequest> got;
  for (char c : wire) {
    in += c;
    if (reader.feed(in) == Result::kDone) {
      got.push_back(reader.request());
      reader.reset();
    }
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].method, "POST");
  EXPECT_EQ(got[0].path, "/v1/completions");
  EXPECT_EQ(got[0].query, "x=1");
  EXPECT_EQ(got[0].body, "hello");
  ASSERT_NE(got[0].header("host"), nullptr);
  EXPECT_EQ(*got[0].header("host"), "a");
  EXPECT_TRUE(got[0].keep_alive());
  EXPECT_EQ(got[1].path, "/health");
  EXPECT_EQ(got[1].minor_version, 0);
  EXPECT_TRUE(got[1].keep_alive()) << "HTTP/1.0 with Connection: keep-alive";
  EXPECT_TRUE(in.empty());
}

TEST(RequestReader, DecodesAChunkedBody) {
  RequestReader reader(small_limits());
  std::string in =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  ASSERT_EQ(reader.feed(in), Result::kDone);
  EXPECT_EQ(reader.request().body, "Wikipedia");
  EXPECT_EQ(in, "NEXT") << "bytes of the next request stay";
}

TEST(RequestReader, RefusesAnOversizedHeadBeforeItEnds) {
  RequestReader reader(small_limits());
  std::string in = "GET / HTTP/1.1\r\nX-Flood: " + std::string(300, 'a');  // no end yet
  ASSERT_EQ(reader.feed(in), Result::kError);
  EXPECT_EQ(reader.error().status, 431);
}

TEST(RequestReader, RefusesTooManyHeaderFields) {
  RequestReader reader(small_limits());
  std::string in = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n";
  ASSERT_EQ(reader.feed(in), Result::kError);
  EXPECT_EQ(reader.error().status, 431);
}

TEST(RequestReader, RefusesAnOversizedBodyFromItsLengthAlone) {
  RequestReader reader(small_limits());
  std::string in = "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n";  // no body sent
  ASSERT_EQ(reader.feed(in), Result::kError);
  EXPECT_EQ(reader.error().status, 413);
  RequestReader huge(small_limits());
  in = "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
  ASSERT_EQ(huge.feed(in), Result::kError);
  EXPECT_EQ(huge.error().status, 413);
  RequestReader chunked(small_limits());
  in = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n" + std::string(80, 'x') +
       "\r\n50\r\n";
  ASSERT_EQ(chunked.feed(in), Result::kError);
  EXPECT_EQ(chunked.error().status, 413) << "the second chunk's size passes the limit";
}

TEST(RequestReader, ExpectContinueIsVisibleBeforeTheBody) {
  RequestReader reader(small_limits());
  std::string in = "POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
  ASSERT_EQ(reader.feed(in), Result::kNeedMore);
  EXPECT_TRUE(reader.awaiting_body());
  EXPECT_TRUE(reader.expects_continue());
  in = "abc";
  ASSERT_EQ(reader.feed(in), Result::kDone);
  EXPECT_EQ(reader.request().body, "abc");
}

TEST(RequestReader, MalformedRequestsGetTheirStatus) {
  const std::pair<const char*, int> cases[] = {
      {"GET /\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTX/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad name: x\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\na: 1\r\n folded\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -3\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
  };
  for (const auto& [wire, status] : cases) {
    RequestReader reader(small_limits());
    std::string in = wire;
    ASSERT_EQ(reader.feed(in), Result::kError) << wire;
    EXPECT_EQ(reader.error().status, status) << wire;
  }
}

TEST(RequestReader, KeepAliveFollowsTheVersion) {
  RequestReader reader(small_limits());
  std::string in = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(reader.feed(in), Result::kDone);
  EXPECT_FALSE(reader.request().keep_alive());
  reader.reset();
  in = "GET / HTTP/1.1\r\nConnection: Close\r\n\r\n";
  ASSERT_EQ(reader.feed(in), Result::kDone);
  EXPECT_FALSE(reader.request().keep_alive());
}

TEST(BearerMatches, SchemeIsCaseInsensitiveTokenIsNot) {
  const std::string key = "s3cret";
  for (const char* ok : {"Bearer s3cret", "bearer s3cret", "BEARER  s3cret"}) {
    const std::string a = ok;
    EXPECT_TRUE(bearer_matches(&a, key)) << a;
  }
  for (const char* bad : {"Bearer S3CRET", "Basic s3cret", "Bearers3cret", "Bearer s3cret2", ""}) {
    const std::string a = bad;
    EXPECT_FALSE(bearer_matches(&a, key)) << a;
  }
  EXPECT_FALSE(bearer_matches(nullptr, key));
}

TEST(HttpChunk, FramesText) {
  EXPECT_EQ(http_chunk("hello, world!!!!"), "10\r\nhello, world!!!!\r\n");
  EXPECT_EQ(http_chunk(""), "") << "an empty chunk would end the body";
}

}  // namespace
}  // namespace lmstack::serve
