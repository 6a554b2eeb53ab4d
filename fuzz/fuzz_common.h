// Shared by the libFuzzer targets in fuzz/ (docs/reliability.md). An input is handled when the
// parser returns or throws an lmstack::Error (the clear error naming the file that users see);
// any other exception escapes LLVMFuzzerTestOneInput, aborts, and libFuzzer reports it as a
// finding, as it does a sanitizer report, a timeout or an allocation past -rss_limit_mb.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "lmstack/core/error.h"

namespace lmstack::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A per-process scratch path for loaders that take a file name (mapped files, directories).
inline std::string scratch_path(const std::string& name) {
  return "/tmp/lmstack-fuzz-" + std::to_string(getpid()) + "-" + name;
}

// Writes the input with stdio, not core/file.h, so the file layer's own code stays out of the
// measured coverage of the target.
inline void write_input(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
    __builtin_trap();
  std::fclose(f);
}

template <class F>
void run_one(F&& parse) {
  try {
    parse();
  } catch (const lmstack::Error&) {
  }
}

}  // namespace lmstack::fuzz
