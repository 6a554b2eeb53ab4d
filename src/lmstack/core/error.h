// Error types and checks for all of lmstack.
// Recoverable errors throw a subclass of lmstack::Error whose message names the file, field,
// request or rank at fault; three places catch them (cli/main.cc, each HTTP handler, the
// training-step driver). Programmer errors use LMSTACK_CHECK, which aborts with file:line
// and stays on in release builds.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace lmstack {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A file's bytes do not follow its format (bad magic, truncated header, wrong shape).
class FormatError : public Error {
 public:
  using Error::Error;
};
// A configuration value is missing, has the wrong type, or contradicts another one.
class ConfigError : public Error {
 public:
  using Error::Error;
};
// A file cannot be opened, read, mapped or written.
class IoError : public Error {
 public:
  using Error::Error;
};
// A request (CLI argument, HTTP body) is invalid; serve maps this to a 4xx answer.
class RequestError : public Error {
 public:
  using Error::Error;
};
// A collective failed or a rank died.
class CommError : public Error {
 public:
  using Error::Error;
};
// The dist layer's name for it (dist/comm.h documents "throws DistError").
using DistError = CommError;
// A GPU call failed.
class DeviceError : public Error {
 public:
  using Error::Error;
};

// Throws E with an fmt-formatted message: throw_error<ConfigError>("{}: field '{}'", path, f).
template <class E = Error, class... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}

// Prints "file:line: check failed: expr: message" to stderr and aborts.
[[noreturn]] void check_failed(const char* file, int line, const char* expr,
                               const std::string& message);

}  // namespace lmstack

// Programmer-error check: always on. The message is fmt-formatted.
#define LMSTACK_CHECK(cond, ...)                                                      \
  do {                                                                                \
    if (!(cond)) [[unlikely]]                                                         \
      ::lmstack::check_failed(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// Hot-loop check: only in debug builds.
#ifdef NDEBUG
#define LMSTACK_DCHECK(cond, ...) \
  do {                            \
  } while (0)
#else
#define LMSTACK_DCHECK(cond, ...) LMSTACK_CHECK(cond, __VA_ARGS__)
#endif
