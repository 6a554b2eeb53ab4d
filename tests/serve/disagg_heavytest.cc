// Disaggregated serving end to end (docs/disaggregation.md): `lmstack serve --role prefill`,
// `--role decode` and `--role router` processes on the loopback answer exactly as one
// colocated server does (completions and chat, streaming and not, greedy and seeded); each
// transfer's bytes equal calc's KV bytes per token (from the decode server's start-up report)
// x prompt tokens + the stated overhead; corrupt or truncated messages are retried, then
// fail that request with 502 while the servers keep serving and hold no block; a killed
// prefill server fails requests cleanly. The official openai client runs its whole check
// script against the router (--disaggregated: n = 1) and compares temperature-0 replies, seeded
// samples and logprobs with the single server's.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "live_server.h"
#include "lmstack/core/json.h"
#include "raw_http.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using test::LiveServer;

constexpr const char* kEngineFlags =
    "--kv-memory 16MiB --no-prefix-cache --threads 1 --api-key test-key --max-model-len 1024 "
    "--tool-call-parser hermes ";
constexpr const char* kAuth = "Authorization: Bearer test-key\r\n";

std::string url(const LiveServer& s) { return "http://127.0.0.1:" + std::to_string(s.port()); }

// A chunked body without its framing.
std::string dechunk(const std::string& body) {
  std::string out;
  for (size_t at = 0; at < body.size();) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(body.substr(at, eol - at).c_str(), nullptr, 16);
    if (n == 0) break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

struct Answer {
  int status = 0;
  std::string text, finish_reason, error;
  int prompt_tokens = 0;
};

// POSTs a body; the generated text (streamed deltas joined), finish reason and usage.
Answer ask(int port, const std::string& path, const Json& body) {
  const std::string raw = test::http_exchange(port, test::post_request(path, body.dump(), kAuth),
                                              std::chrono::seconds(120));
  Answer a;
  a.status = test::status_of(raw);
  std::string payload = test::body_of(raw);
  const bool chat = path.find("chat") != std::string::npos;
  if (a.status != 200) {
    a.error = payload;
    return a;
  }
  if (!body.value("stream", false)) {
    const Json j = Json::parse(payload);
    const Json& c = j["choices"][0];
    a.text = chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
    a.finish_reason = c["finish_reason"];
    a.prompt_tokens = j["usage"]["prompt_tokens"];
    return a;
  }
  std::istringstream lines(dechunk(payload));
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const Json j = Json::parse(line.substr(6));
    if (j["choices"].empty()) continue;
    const Json& c = j["choices"][0];
    const Json& piece = chat ? c["delta"].value("content", Json("")) : c["text"];
    if (piece.is_string()) a.text += piece.get<std::string>();
    if (c["finish_reason"].is_string()) a.finish_reason = c["finish_reason"];
  }
  return a;
}

// One value of a server's /metrics.
double metric(int port, const std::string& name) {
  const std::string raw = test::http_exchange(
      port, "GET /metrics HTTP/1.1\r\nHost: x\r\n" + std::string(kAuth) + "\r\n");
  // A plain find, not std::regex: GCC 12's -O1 ASan build warns inside <regex>.
  const std::string body = "\n" + test::body_of(raw), key = "\n" + name + " ";
  const size_t at = body.find(key);
  return at == std::string::npos ? -1 : std::stod(body.substr(at + key.size()));
}

// A gauge's value once it settles: the engine publishes gauges at the end of a step, just
// after the step's last answer went out, so a client can read the previous step's value.
double settled_metric(int port, const std::string& name, double want) {
  double v = metric(port, name);
  for (int i = 0; i < 100 && v != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    v = metric(port, name);
  }
  return v;
}

class DisaggTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    single_ = new LiveServer("disagg_single", kEngineFlags);
    ASSERT_TRUE(single_->ok()) << single_->error();
    model_ = single_->dir() + "/model";
    prefill_ =
        new LiveServer("disagg_prefill", std::string(kEngineFlags) + "--role prefill", model_);
    ASSERT_TRUE(prefill_->ok()) << prefill_->error();
    decode_ = new LiveServer("disagg_decode",
                             std::string(kEngineFlags) + "--role decode --block-size 8", model_);
    ASSERT_TRUE(decode_->ok()) << decode_->error();
    router_ = new LiveServer(
        "disagg_router", "--role router --prefill " + url(*prefill_) + " --decode " + url(*decode_),
        model_);
    ASSERT_TRUE(router_->ok()) << router_->error();
  }
  static void TearDownTestSuite() {
    for (LiveServer* s : {router_, decode_, prefill_, single_}) delete s;
  }

  static inline LiveServer *single_ = nullptr, *prefill_ = nullptr, *decode_ = nullptr,
                           *router_ = nullptr;
  static inline std::string model_;
};

std::vector<Json> request_bodies() {
  std::vector<Json> out;
  for (const char* p : {"Hello world", "The quick brown fox jumps over the lazy dog", "1 2 3"})
    for (bool stream : {false, true}) {
      out.push_back({{"model", "model"},
                     {"prompt", p},
                     {"max_tokens", 12},
                     {"temperature", 0},
                     {"stream", stream}});
      out.push_back({{"model", "model"},
                     {"messages", Json::array({{{"role", "user"}, {"content", p}}})},
                     {"max_tokens", 10},
                     {"temperature", 0},
                     {"stream", stream}});
    }
  out.push_back({{"model", "model"},
                 {"prompt", "Seeded"},
                 {"max_tokens", 12},
                 {"temperature", 0.9},
                 {"seed", 3}});
  return out;
}

TEST_F(DisaggTest, RouterAnswersAsOneServerDoes) {
  for (const Json& body : request_bodies()) {
    const std::string path = body.contains("messages") ? "/v1/chat/completions" : "/v1/completions";
    const Answer want = ask(single_->port(), path, body);
    const Answer got = ask(router_->port(), path, body);
    ASSERT_EQ(want.status, 200) << want.error;
    ASSERT_EQ(got.status, 200) << got.error << "\nrouter log: " << router_->log_text();
    EXPECT_EQ(got.text, want.text) << body.dump();
    EXPECT_EQ(got.finish_reason, want.finish_reason) << body.dump();
  }
  EXPECT_EQ(settled_metric(decode_->port(), "lmstack:kv_cache_blocks_used", 0), 0);
  EXPECT_EQ(settled_metric(prefill_->port(), "lmstack:kv_cache_blocks_used", 0), 0);
}

// Bytes of a message: calc's KV bytes per token x T + 64 (header) + 4 T (prompt ids)
// + 4 (token section CRC) + 4 per layer (layer CRCs); no logprobs asked.
TEST_F(DisaggTest, BytesPerRequestAreCalcKvBytesTimesPromptTokensPlusOverhead) {
  const std::string log = decode_->log_text(), key = "calc predicts ";
  const size_t at = log.find(key);
  ASSERT_NE(at, std::string::npos) << log;
  ASSERT_NE(log.find(" bytes/token", at), std::string::npos) << log;
  const double calc_per_token = std::stod(log.substr(at + key.size()));
  std::ifstream in(model_ + "/config.json");
  const Json config = Json::parse(in);
  const int layers = config["num_hidden_layers"];
  const double before = metric(decode_->port(), "lmstack:kv_transfer_bytes_total");
  const double sent_before = metric(prefill_->port(), "lmstack:kv_transfer_bytes_total");
  const Answer a = ask(router_->port(), "/v1/completions",
                       {{"model", "model"},
                        {"prompt", "Count the bytes of this prompt"},
                        {"max_tokens", 4},
                        {"temperature", 0}});
  ASSERT_EQ(a.status, 200) << a.error;
  const double bytes = metric(decode_->port(), "lmstack:kv_transfer_bytes_total") - before;
  const int T = a.prompt_tokens;
  EXPECT_EQ(bytes, calc_per_token * T + 64 + 4 * T + 4 + 4 * layers) << T << " prompt tokens";
  EXPECT_EQ(metric(prefill_->port(), "lmstack:kv_transfer_bytes_total") - sent_before, bytes);
}

// `serve --disaggregate`: the three roles in one process, answering as one server does.
TEST_F(DisaggTest, DisaggregateFlagRunsTheRolesInOneProcess) {
  LiveServer all("disagg_inproc", std::string(kEngineFlags) + "--disaggregate", model_);
  ASSERT_TRUE(all.ok()) << all.error();
  const std::vector<Json> bodies = request_bodies();
  for (size_t i = 0; i < bodies.size(); i += 3) {
    const Json& body = bodies[i];
    const std::string path = body.contains("messages") ? "/v1/chat/completions" : "/v1/completions";
    const Answer got = ask(all.port(), path, body);
    ASSERT_EQ(got.status, 200) << got.error << "\nlog: " << all.log_text();
    EXPECT_EQ(got.text, ask(single_->port(), path, body).text) << body.dump();
  }
  EXPECT_GT(metric(all.port(), "lmstack:kv_transfers_total"), 0);  // the decode server's
  EXPECT_EQ(settled_metric(all.port(), "lmstack:kv_cache_blocks_used", 0), 0);
}

TEST_F(DisaggTest, CorruptTransfersAreRetriedThenFailCleanly) {
  // The first 4 messages are damaged; 2 retries: request 1 fails after 3 attempts, request 2
  // succeeds on its second.
  LiveServer bad("disagg_bad_prefill",
                 std::string(kEngineFlags) + "--role prefill --inject-kv-fault corrupt:4", model_);
  ASSERT_TRUE(bad.ok()) << bad.error();
  LiveServer dec("disagg_decode2",
                 std::string(kEngineFlags) + "--role decode --kv-retries 2 --prefill " + url(bad),
                 model_);
  ASSERT_TRUE(dec.ok()) << dec.error();
  const Json body = {
      {"model", "model"}, {"prompt", "Hello world"}, {"max_tokens", 8}, {"temperature", 0}};
  const Answer failed = ask(dec.port(), "/v1/completions", body);
  EXPECT_EQ(failed.status, 502);
  EXPECT_NE(failed.error.find("failed after 3 attempts"), std::string::npos) << failed.error;
  EXPECT_NE(failed.error.find("checksum mismatch"), std::string::npos) << failed.error;
  const Answer ok = ask(dec.port(), "/v1/completions", body);
  ASSERT_EQ(ok.status, 200) << ok.error;
  EXPECT_EQ(ok.text, ask(single_->port(), "/v1/completions", body).text);
  EXPECT_EQ(metric(dec.port(), "lmstack:kv_transfers_failed_total"), 1);
  EXPECT_EQ(metric(dec.port(), "lmstack:kv_transfers_retried_total"), 3);
  EXPECT_EQ(settled_metric(dec.port(), "lmstack:kv_cache_blocks_used", 0), 0);
  EXPECT_EQ(settled_metric(bad.port(), "lmstack:kv_cache_blocks_used", 0), 0);
}

TEST_F(DisaggTest, TruncatedTransferWithoutRetriesFails) {
  LiveServer bad("disagg_trunc_prefill",
                 std::string(kEngineFlags) + "--role prefill --inject-kv-fault truncate:1", model_);
  ASSERT_TRUE(bad.ok()) << bad.error();
  LiveServer dec("disagg_decode3",
                 std::string(kEngineFlags) + "--role decode --kv-retries 0 --prefill " + url(bad),
                 model_);
  ASSERT_TRUE(dec.ok()) << dec.error();
  const Json body = {{"model", "model"}, {"prompt", "Hello"}, {"max_tokens", 4}, {"stream", true}};
  const Answer failed = ask(dec.port(), "/v1/completions", body);
  EXPECT_EQ(failed.status, 502);
  EXPECT_NE(failed.error.find("truncated"), std::string::npos) << failed.error;
  EXPECT_EQ(ask(dec.port(), "/v1/completions", body).status, 200);  // serving on
  EXPECT_EQ(settled_metric(dec.port(), "lmstack:kv_cache_blocks_used", 0), 0);
}

TEST_F(DisaggTest, OfficialOpenAiClientAgainstTheRouter) {
  std::string out;
  const char* env = std::getenv("LMSTACK_PYTHON");
  const std::string python = env && *env ? env : "python3";
  if (lmstack::test::run_command(python + " -c 'import openai' 2>&1", &out) != 0)
    GTEST_SKIP() << "python3 cannot import openai (pip install openai): " << out;
  const int rc = lmstack::test::run_command(
      "timeout 900 " + python + " " +
          lmstack::test::source_path("tests/serve/openai_client_check.py") + " --port " +
          std::to_string(router_->port()) + " --reference-port " + std::to_string(single_->port()) +
          " --disaggregated --expect-metric lmstack:kv_transfers_total",
      &out);
  EXPECT_EQ(rc, 0) << out;
}

// Last: the prefill server dies; the router's requests fail with 502, the decode server
// keeps answering its own endpoints and holds no block.
TEST_F(DisaggTest, ZKilledPrefillServerFailsRequestsCleanly) {
  ASSERT_TRUE(prefill_->terminate(std::chrono::seconds(10)));
  const Answer a = ask(router_->port(), "/v1/completions",
                       {{"model", "model"}, {"prompt", "Anyone there?"}, {"max_tokens", 4}});
  EXPECT_EQ(a.status, 502);
  EXPECT_NE(a.error.find("the KV transfer from the prefill server failed"), std::string::npos)
      << a.error;
  EXPECT_EQ(settled_metric(decode_->port(), "lmstack:kv_cache_blocks_used", 0), 0);
  const std::string health =
      test::http_exchange(decode_->port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(test::status_of(health), 200);
}

}  // namespace
}  // namespace lmstack::serve
