// check_failed: the one place programmer errors end the process (see error.h).
#include "lmstack/core/error.h"

#include <cstdio>
#include <cstdlib>

namespace lmstack {

void check_failed(const char* file, int line, const char* expr, const std::string& message) {
  std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file, line, expr,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace lmstack
