// HTTP/1.1 request reading (RFC 9112) without sockets: RequestReader takes the bytes of one
// connection as they arrive and yields one HttpRequest at a time, enforcing HttpLimits as it
// goes, so an oversized head is refused (431) once the limit is passed and an oversized body
// (413) as soon as its Content-Length or chunk sizes say so, before the rest is read. Bodies
// come with Content-Length or Transfer-Encoding: chunked; pipelined requests stay in the
// input for the next read. Also the small response pieces the server writes.
//
// Thread safety: a reader belongs to one connection (the server's I/O thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lmstack::serve {

struct HttpLimits {
  size_t max_header_bytes = 64 << 10;  // request line + header fields (nginx: 4 x 8 KiB)
  int max_headers = 100;               // header fields (Apache's LimitRequestFields)
  size_t max_body_bytes = 16 << 20;    // decoded body
};

struct HttpRequest {
  std::string method, target, path, query;  // path and query split at the first '?'
  int minor_version = 1;                    // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;

  // The first value of a header (name lower-case), nullptr when absent.
  const std::string* header(std::string_view name) const;
  // Whether the connection stays open after the answer (HTTP/1.1 unless "close", 1.0 only
  // with "keep-alive").
  bool keep_alive() const;
};

// Why a request could not be read: the status to answer (400, 413, 431, 501, 505) and a
// message for the error body.
struct HttpReadError {
  int status = 400;
  std::string message;
};

class RequestReader {
 public:
  enum class Result { kNeedMore, kDone, kError };
  explicit RequestReader(HttpLimits limits) : limits_(limits) {}

  // Consumes what it can of `in` (bytes it uses are erased). kDone: request() holds a whole
  // request; call reset() before reading the next. kError: error() says why; the connection
  // must be answered and closed, its remaining bytes are not a request.
  Result feed(std::string& in);
  HttpRequest& request() { return request_; }
  const HttpReadError& error() const { return error_; }
  // The head is read and its body is still to come ("Expect: 100-continue" may be answered).
  bool awaiting_body() const { return phase_ == Phase::kBody || phase_ == Phase::kChunkSize; }
  bool expects_continue() const { return expect_continue_; }
  void reset();

 private:
  enum class Phase { kHead, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailer, kDone };
  Result fail(int status, std::string message);
  Result read_head(std::string& in, size_t& pos);
  Result parse_head(std::string_view head);
  Result parse_header_line(std::string_view line);
  Result start_body();
  Result read_chunked(std::string& in, size_t& pos);

  HttpLimits limits_;
  Phase phase_ = Phase::kHead;
  HttpRequest request_;
  HttpReadError error_;
  size_t scanned_ = 0;    // bytes of the head already searched for its end
  size_t remaining_ = 0;  // body bytes (Content-Length) or chunk bytes still to come
  size_t trailer_bytes_ = 0;
  bool expect_continue_ = false;
};

// "OK", "Not Found", ... for the statuses the server sends.
const char* http_reason(int status);
// The status line and header block (ending in the empty line) of a response.
std::string http_head(int status, int minor_version,
                      const std::vector<std::pair<std::string, std::string>>& headers);
// One chunk of a chunked body ("" for empty text: an empty chunk would end the body).
std::string http_chunk(std::string_view text);

}  // namespace lmstack::serve
