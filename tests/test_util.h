// Helpers shared by all test executables: paths to the source tree, the shared/ data folder
// (absent in a clean clone: tests that need it skip with a message), and tensor comparison
// that reports the worst element, and the check that a call is refused with a message naming
// what was wrong.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lmstack::test {

// Absolute path of a file under the source tree, e.g. source_path("tests/data/x.bin").
std::string source_path(const std::string& relative);
// The shared/ folder beside the checkout (../shared), or "" if absent.
std::string shared_dir();
// Path of the built `lmstack` binary.
std::string lmstack_binary();
// A fresh empty directory under the system temp dir, unique to this process and name,
// removed when the process exits (unless LMSTACK_KEEP_TEST_DIRS=1).
std::string temp_dir(const std::string& name);
// Runs a shell command, returns its exit status and captures stdout (+ stderr if asked).
int run_command(const std::string& command, std::string* output, bool merge_stderr = true);

// Fails with the worst element (index, both values, difference) if any |a-b| exceeds
// atol + rtol * |b|.
::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<float>& expected, double rtol, double atol);
// max |v[i]|, the scale for an absolute tolerance relative to a golden's magnitude.
double max_abs(const std::vector<float>& v);

// Success when `call` throws an `Error` whose message contains `words`; a failure saying what
// happened instead (accepted, or refused with another message).
template <class Error, class Call>
::testing::AssertionResult refused_naming(Call&& call, const std::string& words) {
  try {
    call();
  } catch (const Error& e) {
    if (std::string(e.what()).find(words) != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "refused, but the message lacks '" << words << "': " << e.what();
  }
  return ::testing::AssertionFailure() << "accepted; expected a refusal naming '" << words << "'";
}

}  // namespace lmstack::test
