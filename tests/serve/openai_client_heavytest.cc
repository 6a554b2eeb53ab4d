// The official `openai` Python client (PyPI package `openai`) against a live `lmstack serve`
// on 127.0.0.1: tests/serve/openai_client_check.py does the checks; this test makes a tiny
// model, starts the server on a free port, runs the script and stops the server. Skips when
// python3 cannot import openai.
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lmstack::serve {
namespace {

using lmstack::test::run_command;

// The port from "serving ... on http://127.0.0.1:PORT", waiting up to 120 s.
std::optional<int> wait_for_port(const std::string& log_path) {
  for (int i = 0; i < 1200; ++i) {
    std::ifstream in(log_path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    const size_t at = s.find("http://127.0.0.1:");
    if (at != std::string::npos) {
      const size_t begin = at + 17;
      const size_t end = s.find_first_not_of("0123456789", begin);
      if (end != std::string::npos && end > begin) return std::stoi(s.substr(begin, end - begin));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

TEST(OpenAiClient, OfficialClientAgainstLiveServer) {
  std::string out;
  if (run_command("python3 -c 'import openai' 2>&1", &out) != 0)
    GTEST_SKIP() << "python3 cannot import openai (pip install openai): " << out;
  const std::string dir = test::temp_dir("openai_client");
  const std::string bin = test::lmstack_binary();
  ASSERT_EQ(
      run_command(bin + " init-model --preset tiny-llama --out " + dir + "/model --seed 1", &out),
      0)
      << out;
  const std::string log = dir + "/serve.log";
  ASSERT_EQ(run_command(bin + " serve --model " + dir +
                            "/model --port 0 --api-key test-key --kv-memory 64MiB --threads 1 "
                            "--max-model-len 1024 > " +
                            log + " 2>&1 & echo $!",
                        &out, false),
            0);
  const int pid = std::stoi(out);
  const std::optional<int> port = wait_for_port(log);
  if (!port) {
    kill(pid, SIGTERM);
    FAIL() << "the server did not start; its log: " << log;
  }
  const int rc =
      run_command("timeout 900 python3 " + test::source_path("tests/serve/openai_client_check.py") +
                      " --port " + std::to_string(*port),
                  &out);
  kill(pid, SIGTERM);
  EXPECT_EQ(rc, 0) << out;
  std::string status;
  for (int i = 0;
       i < 100 && run_command("kill -0 " + std::to_string(pid) + " 2>/dev/null", &status) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

}  // namespace
}  // namespace lmstack::serve
