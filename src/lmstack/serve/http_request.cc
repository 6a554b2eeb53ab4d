// HTTP/1.1 request reading with limits (see http_request.h). Grammar from RFC 9112: request
// line "method SP request-target SP HTTP-version", header fields "name: value" (no space
// before the colon, no obsolete line folding), body by Transfer-Encoding: chunked or
// Content-Length (both present: refused, as 9112 section 6.1 advises against request
// smuggling). Lines end in CRLF; a bare LF is accepted (9112 section 2.2).
#include "lmstack/serve/http_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace lmstack::serve {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110 token characters (method and header names).
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) != 0 ||
          std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos))
      return false;
  return true;
}

// The next line of `text` from `pos` (without its CRLF or LF); false when none is complete.
bool next_line(std::string_view text, size_t& pos, std::string_view& line) {
  const size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) return false;
  line = text.substr(pos, end - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  pos = end + 1;
  return true;
}

bool contains_token(std::string_view list, std::string_view token) {
  const std::string l = lower(list);
  size_t pos = 0;
  while (pos <= l.size()) {
    const size_t comma = std::min(l.find(',', pos), l.size());
    if (trim(std::string_view(l).substr(pos, comma - pos)) == token) return true;
    pos = comma + 1;
  }
  return false;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return &v;
  return nullptr;
}

bool HttpRequest::keep_alive() const {
  const std::string* c = header("connection");
  if (minor_version == 0) return c && contains_token(*c, "keep-alive");
  return !(c && contains_token(*c, "close"));
}

void RequestReader::reset() {
  phase_ = Phase::kHead;
  request_ = HttpRequest();
  scanned_ = remaining_ = trailer_bytes_ = 0;
  expect_continue_ = false;
}

RequestReader::Result RequestReader::fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  return Result::kError;
}

RequestReader::Result RequestReader::feed(std::string& in) {
  size_t pos = 0;
  Result r = Result::kNeedMore;
  if (phase_ == Phase::kHead) r = read_head(in, pos);
  if (r != Result::kError && phase_ == Phase::kBody) {
    const size_t take = std::min(remaining_, in.size() - pos);
    request_.body.append(in, pos, take);
    pos += take;
    remaining_ -= take;
    if (remaining_ == 0) phase_ = Phase::kDone;
  }
  if (r != Result::kError && phase_ >= Phase::kChunkSize && phase_ <= Phase::kTrailer)
    r = read_chunked(in, pos);
  in.erase(0, pos);
  if (r == Result::kError) return r;
  return phase_ == Phase::kDone ? Result::kDone : Result::kNeedMore;
}

// Finds the empty line that ends the head; refuses a head past max_header_bytes at once.
RequestReader::Result RequestReader::read_head(std::string& in, size_t& pos) {
  // Leading empty lines before a request line are ignored (9112 section 2.2).
  while (pos < in.size() && (in[pos] == '\r' || in[pos] == '\n')) ++pos;
  const std::string_view text = std::string_view(in).substr(pos);
  size_t end = std::string_view::npos;
  for (size_t i = scanned_ > 3 ? scanned_ - 3 : 0; i < text.size(); ++i) {
    if (text[i] != '\n') continue;
    if (i + 1 < text.size() && text[i + 1] == '\n') end = i + 2;
    if (i + 2 < text.size() && text[i + 1] == '\r' && text[i + 2] == '\n') end = i + 3;
    if (end != std::string_view::npos) break;
  }
  if (end == std::string_view::npos) {
    scanned_ = text.size();
    if (text.size() > limits_.max_header_bytes)
      return fail(431, fmt::format("the request head is over the server's limit of {} bytes",
                                   limits_.max_header_bytes));
    return Result::kNeedMore;
  }
  if (end > limits_.max_header_bytes)
    return fail(431, fmt::format("the request head is over the server's limit of {} bytes",
                                 limits_.max_header_bytes));
  const Result r = parse_head(text.substr(0, end));
  pos += end;
  if (r == Result::kError) return r;
  return start_body();
}

RequestReader::Result RequestReader::parse_head(std::string_view head) {
  size_t pos = 0;
  std::string_view line;
  next_line(head, pos, line);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line (expected 'METHOD TARGET HTTP/1.1')");
  request_.method = std::string(line.substr(0, sp1));
  request_.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(request_.method) || request_.target.empty())
    return fail(400, "malformed request line (expected 'METHOD TARGET HTTP/1.1')");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      std::isdigit(static_cast<unsigned char>(version[5])) == 0 ||
      std::isdigit(static_cast<unsigned char>(version[7])) == 0)
    return fail(400, "malformed HTTP version in the request line");
  if (version[5] != '1')
    return fail(505, fmt::format("{} is not supported; use HTTP/1.1", version));
  request_.minor_version = version[7] - '0';
  const size_t q = request_.target.find('?');
  request_.path = request_.target.substr(0, q);
  if (q != std::string::npos) request_.query = request_.target.substr(q + 1);
  while (next_line(head, pos, line) && !line.empty())
    if (parse_header_line(line) == Result::kError) return Result::kError;
  return Result::kNeedMore;
}

RequestReader::Result RequestReader::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return fail(400, fmt::format("malformed header line '{:.60}'", line));
  if (static_cast<int>(request_.headers.size()) >= limits_.max_headers)
    return fail(431, fmt::format("the request has more than the server's limit of {} header "
                                 "fields",
                                 limits_.max_headers));
  request_.headers.emplace_back(lower(line.substr(0, colon)),
                                std::string(trim(line.substr(colon + 1))));
  return Result::kNeedMore;
}

RequestReader::Result RequestReader::start_body() {
  const std::string* te = request_.header("transfer-encoding");
  const std::string* cl = request_.header("content-length");
  const std::string* expect = request_.header("expect");
  expect_continue_ = expect && lower(*expect) == "100-continue";
  if (te) {
    if (cl) return fail(400, "a request may not have both Content-Length and Transfer-Encoding");
    if (lower(trim(*te)) != "chunked")
      return fail(501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked)", *te));
    phase_ = Phase::kChunkSize;
    return Result::kNeedMore;
  }
  size_t length = 0;
  if (cl) {
    const char* end = cl->data() + cl->size();
    const auto [p, ec] = std::from_chars(cl->data(), end, length);
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc() && p == end && length > limits_.max_body_bytes))
      return fail(413, fmt::format("the body ({} bytes) is over the server's limit of {} bytes",
                                   *cl, limits_.max_body_bytes));
    if (ec != std::errc() || p != end || cl->empty())
      return fail(400, fmt::format("Content-Length '{:.40}' is not a number", *cl));
    for (const auto& [k, v] : request_.headers)
      if (k == "content-length" && v != *cl) return fail(400, "conflicting Content-Length values");
  }
  remaining_ = length;
  phase_ = length > 0 ? Phase::kBody : Phase::kDone;
  if (length > 0) request_.body.reserve(length);
  return Result::kNeedMore;
}

// Chunked body (9112 section 7.1): hex size [; extensions] CRLF, data CRLF, ..., a zero
// size, trailer fields (ignored, but counted against the head limit), the empty line.
RequestReader::Result RequestReader::read_chunked(std::string& in, size_t& pos) {
  const std::string_view text(in);
  std::string_view line;
  while (phase_ != Phase::kDone) {
    if (phase_ == Phase::kChunkData) {
      const size_t take = std::min(remaining_, text.size() - pos);
      request_.body.append(text.substr(pos, take));
      pos += take;
      remaining_ -= take;
      if (remaining_ > 0) return Result::kNeedMore;
      phase_ = Phase::kChunkEnd;
      continue;
    }
    const size_t start = pos;
    if (!next_line(text, pos, line)) {
      if (text.size() - pos > 1024 + limits_.max_header_bytes)
        return fail(400, "malformed chunked body (a line without its end)");
      return Result::kNeedMore;
    }
    if (phase_ == Phase::kChunkEnd) {
      if (!line.empty()) return fail(400, "malformed chunked body (data longer than its size)");
      phase_ = Phase::kChunkSize;
    } else if (phase_ == Phase::kChunkSize) {
      const std::string_view digits = trim(line.substr(0, line.find(';')));
      size_t size = 0;
      const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
      if (ec == std::errc::result_out_of_range ||
          (ec == std::errc() && size > limits_.max_body_bytes - request_.body.size()))
        return fail(413, fmt::format("the body is over the server's limit of {} bytes",
                                     limits_.max_body_bytes));
      if (ec != std::errc() || p != digits.data() + digits.size() || digits.empty())
        return fail(400, fmt::format("malformed chunk size '{:.20}'", line));
      remaining_ = size;
      phase_ = size == 0 ? Phase::kTrailer : Phase::kChunkData;
    } else {  // kTrailer
      trailer_bytes_ += pos - start;
      if (trailer_bytes_ > limits_.max_header_bytes)
        return fail(431, "the request's trailer fields are over the server's head limit");
      if (line.empty()) phase_ = Phase::kDone;
    }
  }
  return Result::kNeedMore;
}

const char* http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string http_head(int status, int minor_version,
                      const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out = fmt::format("HTTP/1.{} {} {}\r\n", minor_version, status, http_reason(status));
  for (const auto& [k, v] : headers) out += fmt::format("{}: {}\r\n", k, v);
  return out + "\r\n";
}

std::string http_chunk(std::string_view text) {
  if (text.empty()) return "";
  return fmt::format("{:x}\r\n{}\r\n", text.size(), text);
}

}  // namespace lmstack::serve
