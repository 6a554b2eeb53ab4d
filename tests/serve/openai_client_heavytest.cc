// The official `openai` Python client (PyPI package `openai`) against a live `lmstack serve`
// on 127.0.0.1: tests/serve/openai_client_check.py does the checks; this test starts the
// server on a tiny model (live_server.h), runs the script and stops the server. The Python
// is $LMSTACK_PYTHON when set (a venv with openai), else python3; skips when it cannot import
// openai.
#include <cstdlib>

#include <gtest/gtest.h>

#include "live_server.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using lmstack::test::run_command;

TEST(OpenAiClient, OfficialClientAgainstLiveServer) {
  std::string out;
  const char* env = std::getenv("LMSTACK_PYTHON");
  const std::string python = env && *env ? env : "python3";
  if (run_command(python + " -c 'import openai' 2>&1", &out) != 0)
    GTEST_SKIP() << "python3 cannot import openai (pip install openai): " << out;
  test::LiveServer server("openai_client",
                          "--api-key test-key --kv-memory 64MiB --threads 1 --max-model-len 1024 "
                          "--tool-call-parser hermes");
  ASSERT_TRUE(server.ok()) << server.error();
  const int rc = run_command("timeout 900 " + python + " " +
                                 lmstack::test::source_path("tests/serve/openai_client_check.py") +
                                 " --port " + std::to_string(server.port()),
                             &out);
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace lmstack::serve
