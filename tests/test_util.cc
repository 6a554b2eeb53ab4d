// Shared test helpers (see test_util.h).
#include "test_util.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace lmstack::test {

std::string source_path(const std::string& relative) {
  return std::string(LMSTACK_SOURCE_DIR) + "/" + relative;
}

std::string shared_dir() {
  const std::string candidates[] = {std::string(LMSTACK_SOURCE_DIR) + "/../shared"};
  for (const auto& c : candidates)
    if (std::filesystem::is_directory(c)) return std::filesystem::canonical(c).string();
  return "";
}

std::string lmstack_binary() { return LMSTACK_BINARY; }

namespace {

// The directories temp_dir() made, removed when the test binary exits (LMSTACK_KEEP_TEST_DIRS=1
// keeps them for a look after a failure). Only the process that made them removes them: a
// forked child's exit must not delete what its parent still uses.
class TempDirs {
 public:
  void add(const std::filesystem::path& dir) {
    if (std::find(dirs_.begin(), dirs_.end(), dir) == dirs_.end()) dirs_.push_back(dir);
  }
  ~TempDirs() {
    const char* keep = std::getenv("LMSTACK_KEEP_TEST_DIRS");
    if (::getpid() != owner_ || (keep != nullptr && *keep != '\0' && *keep != '0')) return;
    std::error_code ignored;
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ignored);
  }

 private:
  pid_t owner_ = ::getpid();
  std::vector<std::filesystem::path> dirs_;
};

TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}

}  // namespace

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("lmstack_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  temp_dirs().add(dir);
  return dir.string();
}

int run_command(const std::string& command, std::string* output, bool merge_stderr) {
  const std::string full = command + (merge_stderr ? " 2>&1" : "");
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  std::string out;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<float>& expected, double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected " << expected.size();
  size_t worst = 0;
  double worst_excess = -1;
  size_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double tol = atol + rtol * std::fabs(static_cast<double>(expected[i]));
    const bool nan_mismatch = std::isnan(actual[i]) != std::isnan(expected[i]);
    if (diff > tol || nan_mismatch) {
      ++bad;
      const double excess = nan_mismatch ? 1e300 : diff - tol;
      if (excess > worst_excess) {
        worst_excess = excess;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " elements differ; worst at index " << worst
         << ": actual " << actual[worst] << " expected " << expected[worst] << " diff "
         << std::fabs(static_cast<double>(actual[worst]) - expected[worst]) << " (rtol " << rtol
         << ", atol " << atol << ")";
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

}  // namespace lmstack::test
