// The web chat page at "/" in headless Chromium against a live `lmstack serve` (tiny model):
// the page is opened with ?prompt=...&temperature=0&autosend=1, streams its reply, and the
// test reads the DOM once <body data-state> says "done". Independent reference: the same
// greedy request sent to /v1/chat/completions without the page. Checks the reply text, one
// streamed chunk per completion token, a positive tokens/s and the cached prompt tokens
// (a later identical request must report the same count). Skips when Chromium is absent.
#include <httplib.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "headless_chromium.h"
#include "live_server.h"
#include "lmstack/core/json.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

constexpr const char* kPrompt = "Tell me a short story about a lighthouse keeper and the sea";
constexpr int kMaxTokens = 12;

// A greedy, non-streaming chat request: the reference for what the page must show.
Json chat_reference(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  const Json body = {{"model", "model"},
                     {"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                     {"max_tokens", kMaxTokens},
                     {"temperature", 0}};
  auto r = client.Post("/v1/chat/completions", body.dump(), "application/json");
  if (!r || r->status != 200)
    throw std::runtime_error("reference request failed: " +
                             (r ? r->body : std::string("no answer")));
  return Json::parse(r->body);
}

std::string percent_encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

TEST(WebChatPage, StreamsTheGreedyReplyWithTokensPerSecondAndCachedTokens) {
  const std::string chromium = test::HeadlessChromium::find_binary();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not on PATH (Debian: apt-get install chromium; "
                    "scripts/setup.sh installs it)";
  test::LiveServer server("web_chat_page", "--kv-memory 16MiB --threads 1 --max-model-len 512");
  ASSERT_TRUE(server.ok()) << server.error();
  const Json cold = chat_reference(server.port());
  const std::string expected = cold["choices"][0]["message"]["content"].get<std::string>();
  const int completion_tokens = cold["usage"]["completion_tokens"].get<int>();
  ASSERT_GE(completion_tokens, 3) << "pick a prompt whose greedy reply is longer: " << cold;
  ASSERT_GT(cold["usage"]["prompt_tokens"].get<int>(), 16) << "the prompt must fill a KV block";

  Json shown;
  {
    test::HeadlessChromium browser(chromium, server.dir() + "/profile");
    browser.open(
        fmt::format("http://127.0.0.1:{}/?prompt={}&max_tokens={}&temperature=0&autosend=1",
                    server.port(), percent_encode(kPrompt), kMaxTokens));
    std::string state;
    for (int i = 0; i < 600 && state != "done" && state != "error"; ++i) {  // <= 120 s
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      state = browser.evaluate("document.body ? (document.body.dataset.state || '') : ''")
                  .get<std::string>();
    }
    ASSERT_EQ(state, "done") << browser.evaluate("document.body.innerText");
    shown = Json::parse(
        browser
            .evaluate(
                "(() => { const r = [...document.querySelectorAll('.assistant')].pop();"
                " return JSON.stringify({reply: r.textContent, chunks: Number(r.dataset.chunks),"
                " tps: document.getElementById('tps').textContent,"
                " ntok: document.getElementById('ntok').textContent,"
                " cached: document.getElementById('cached').textContent}); })()")
            .get<std::string>());
  }
  const Json warm = chat_reference(server.port());
  EXPECT_EQ(shown["reply"].get<std::string>(), expected);
  EXPECT_EQ(warm["choices"][0]["message"]["content"].get<std::string>(), expected);
  EXPECT_EQ(shown["ntok"].get<std::string>(), std::to_string(completion_tokens));
  EXPECT_EQ(shown["chunks"].get<int>(), completion_tokens) << "one streamed chunk per token";
  const std::string tps = shown["tps"].get<std::string>();
  EXPECT_GT(std::atof(tps.c_str()), 0.0) << "tokens/s shows '" << tps << "'";
  // The cold request cached the prompt's full blocks; the page and the warm request hit them.
  const int cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached, 0);
  EXPECT_EQ(shown["cached"].get<std::string>(), std::to_string(cached));
}

}  // namespace
}  // namespace lmstack::serve
