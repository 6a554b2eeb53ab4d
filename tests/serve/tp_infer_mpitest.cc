// `mpirun -np 2 lmstack generate|serve --tp 2` against one process, through the real binary and
// OpenMPI (ctest label "mpi", test serve_mpi_tp_inference; the test launches mpirun itself): on
// a tiny random llama (init-model, f32, std 0.3 so the greedy choices are far from ties) the
// greedy tokens and text of generate --tp 2 equal the single-process run's, every rank reports
// half the KV cache bytes, and a temperature-0 completion from serve --tp 2 equals the
// completion of a single-process server.
#include <gtest/gtest.h>

#include "lmstack/core/json.h"
#include "serve/live_server.h"
#include "serve/raw_http.h"
#include "test_util.h"

namespace lmstack::serve::test {
namespace {

using lmstack::test::run_command;

const std::string& tiny_dir() {
  static const std::string dir = [] {
    const std::string d = lmstack::test::temp_dir("tp_infer_mpi") + "/model";
    std::string out;
    EXPECT_EQ(run_command(lmstack::test::lmstack_binary() +
                              " init-model --preset tiny-llama --dtype f32 --std 0.3 --seed 3 "
                              "--out " +
                              d,
                          &out),
              0)
        << out;
    return d;
  }();
  return dir;
}

std::string mpirun(int np) {
  return fmt::format("{} -np {} {} ", LMSTACK_MPIEXEC, np, LMSTACK_MPIEXEC_FLAGS);
}

const char* kGenerateArgs =
    " generate -p 'Tensor parallel inference' --temperature 0 --max-tokens 24 --ignore-eos "
    "--threads 1 --json";

Json generate_json(const std::string& cmd, std::string* err_and_out) {
  std::string out;
  const int rc = run_command(cmd, &out, false);
  *err_and_out = cmd + "\n" + out;
  EXPECT_EQ(rc, 0) << *err_and_out;
  const size_t at = out.find('{');
  return at == std::string::npos ? Json() : Json::parse(out.substr(at));
}

TEST(TpInferMpi, GenerateTp2EqualsOneProcess) {
  const std::string bin = lmstack::test::lmstack_binary();
  std::string log1, log2;
  const Json one = generate_json(bin + kGenerateArgs + std::string(" -m ") + tiny_dir(), &log1);
  const Json two = generate_json(
      mpirun(2) + bin + kGenerateArgs + std::string(" -m ") + tiny_dir() + " --tp 2", &log2);
  ASSERT_TRUE(one.contains("tokens")) << log1;
  ASSERT_TRUE(two.contains("tokens")) << log2;
  EXPECT_EQ(one["tokens"].size(), 24u);
  EXPECT_EQ(two["tokens"], one["tokens"]) << log2;
  EXPECT_EQ(two["text"], one["text"]);
  // Only rank 0 prints the result: one JSON object on stdout.
  EXPECT_EQ(log2.find("\"tokens\""), log2.rfind("\"tokens\"")) << log2;
  // Each rank holds 1 of the 2 KV heads: half the single process's KV cache.
  const double kv_one = one["kv_cache_bytes"].get<double>();
  const double kv_two = two["kv_cache_bytes"].get<double>();
  EXPECT_EQ(kv_two * 2, kv_one) << log2;
}

TEST(TpInferMpi, GenerateTpNeedsMatchingWorld) {
  std::string out;
  const std::string cmd = lmstack::test::lmstack_binary() + kGenerateArgs + std::string(" -m ") +
                          tiny_dir() + " --tp 2";
  EXPECT_NE(run_command(cmd, &out), 0);
  EXPECT_NE(out.find("--tp 2 needs 2 ranks (mpirun -np 2), this run has 1"), std::string::npos)
      << out;
}

TEST(TpInferMpi, ServeTp2EqualsOneProcess) {
  const std::string body =
      R"({"model": "model", "prompt": "Tensor parallel inference", "max_tokens": 20,)"
      R"( "temperature": 0, "ignore_eos": true, "logprobs": 1})";
  const auto complete = [&](LiveServer& server) {
    EXPECT_TRUE(server.ok()) << server.error() << "\n" << server.log_text();
    if (!server.ok()) return Json();
    const std::string r = http_exchange(server.port(), post_request("/v1/completions", body));
    EXPECT_EQ(status_of(r), 200) << r;
    return Json::parse(body_of(r))["choices"][0];
  };
  Json one_choice, two_choice;
  {
    LiveServer one("tp_serve_one", "--kv-memory 4MiB", tiny_dir());
    one_choice = complete(one);
  }
  {
    LiveServer two("tp_serve_two", "--kv-memory 4MiB --tp 2", tiny_dir(), mpirun(2));
    two_choice = complete(two);
    EXPECT_TRUE(two.terminate(std::chrono::seconds(20))) << two.log_text();
    EXPECT_NE(two.log_text().find("tp rank 1: stopped after"), std::string::npos) << two.log_text();
  }
  // Most of the tiny model's ids (257..511) have no text: the log-probs pin each token too.
  ASSERT_TRUE(one_choice.contains("logprobs") && two_choice.contains("logprobs"));
  EXPECT_EQ(two_choice["text"], one_choice["text"]);
  const Json& want = one_choice["logprobs"]["token_logprobs"];
  const Json& have = two_choice["logprobs"]["token_logprobs"];
  ASSERT_EQ(want.size(), 20u);
  ASSERT_EQ(have.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i].get<double>(), want[i].get<double>(), 1e-4) << "token " << i;
}

}  // namespace
}  // namespace lmstack::serve::test
