// The official `openai` Python client (PyPI package `openai`) against a live `lmstack serve`
// on 127.0.0.1: tests/serve/openai_client_check.py does the checks; this test starts the
// server on a tiny model (live_server.h), runs the script and stops the server. The Python
// is $LMSTACK_PYTHON when set (a venv with openai), else python3; skips when it cannot import
// openai. The speculative modes run the same checks and, against a plain server on the same
// model, require every temperature-0 reply to be identical.
#include <cstdlib>

#include <gtest/gtest.h>

#include "live_server.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using lmstack::test::run_command;

constexpr const char* kServeArgs =
    "--api-key test-key --kv-memory 64MiB --threads 1 --max-model-len 1024 "
    "--tool-call-parser hermes ";

std::string client_python() {
  const char* env = std::getenv("LMSTACK_PYTHON");
  return env && *env ? env : "python3";
}

// Runs the check script against `port`; its output in `out`, its exit status returned.
int run_client_check(int port, const std::string& extra_args, std::string* out) {
  return run_command("timeout 900 " + client_python() + " " +
                         lmstack::test::source_path("tests/serve/openai_client_check.py") +
                         " --port " + std::to_string(port) + " " + extra_args,
                     out);
}

bool openai_missing(std::string* why) {
  return run_command(client_python() + " -c 'import openai' 2>&1", why) != 0;
}

TEST(OpenAiClient, OfficialClientAgainstLiveServer) {
  std::string out;
  if (openai_missing(&out)) GTEST_SKIP() << "python3 cannot import openai: " << out;
  test::LiveServer server("openai_client", kServeArgs);
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_EQ(run_client_check(server.port(), "", &out), 0) << out;
}

// A speculative server (`spec_args`) on the plain server's model: the whole check, then the
// greedy replies compared with the plain server's and the accepted-token counter required > 0.
void check_speculative(const std::string& name, const std::string& spec_args) {
  std::string out;
  if (openai_missing(&out)) GTEST_SKIP() << "python3 cannot import openai: " << out;
  test::LiveServer plain(name + "_plain", kServeArgs);
  ASSERT_TRUE(plain.ok()) << plain.error();
  const std::string model = plain.dir() + "/model";
  std::string args = spec_args;
  for (size_t at; (at = args.find("{model}")) != std::string::npos;) args.replace(at, 7, model);
  test::LiveServer spec(name, kServeArgs + args, model);
  ASSERT_TRUE(spec.ok()) << spec.error();
  EXPECT_EQ(run_client_check(spec.port(),
                             "--reference-port " + std::to_string(plain.port()) +
                                 " --expect-metric lmstack:spec_decode_num_accepted_tokens_total",
                             &out),
            0)
      << out << "\nspeculative server log: " << spec.log_path();
}

TEST(OpenAiClient, NgramSpeculationRepliesEqualPlainServer) {
  check_speculative("openai_client_ngram", "--spec ngram --num-spec-tokens 4");
}

// The target as its own draft: every greedy draft token is accepted, so the verify path with
// full acceptance (and the bonus token) is what runs.
TEST(OpenAiClient, DraftModelSpeculationRepliesEqualPlainServer) {
  check_speculative("openai_client_draft", "--draft-model {model} --num-spec-tokens 3");
}

}  // namespace
}  // namespace lmstack::serve
