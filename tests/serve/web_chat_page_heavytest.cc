// The web chat page at "/" in headless Chromium against a live `lmstack serve` (tiny model).
//  - One greedy reply: the page is opened with ?prompt=...&temperature=0&autosend=1 and the
//    test reads the DOM once <body data-state> says "done". Independent reference: the same
//    greedy request sent to /v1/chat/completions without the page. Checks the reply text, one
//    streamed chunk per completion token, positive prefill and decode tokens/s and the cached
//    prompt tokens (a later identical request must report the same count).
//  - A long conversation past a 128-token context: every turn is answered, older turns are
//    left out so that prompt + max_tokens fits (the prompt token count the page shows), the
//    log is scrolled to the newest reply; "New chat" empties it and the next request carries
//    one message (its prompt tokens equal /tokenize's count for that message alone).
//  - Markdown renders as elements, and HTML in a reply stays text (no element, no script).
//  - Every input has a label.
// With LMSTACK_SCREENSHOT_DIR set, PNGs of the page are written there. Skips when Chromium is
// absent.
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "headless_chromium.h"
#include "live_server.h"
#include "lmstack/core/json.h"
#include "raw_http.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

constexpr const char* kPrompt = "Tell me a short story about a lighthouse keeper and the sea";
constexpr int kMaxTokens = 12;

Json post_json(int port, const std::string& path, const Json& body) {
  const std::string r =
      test::http_exchange(port, test::post_request(path, body.dump()), std::chrono::seconds(120));
  if (test::status_of(r) != 200) throw std::runtime_error(path + " failed: " + r);
  return Json::parse(test::body_of(r));
}

// A greedy, non-streaming chat request: the reference for what the page must show.
Json chat_reference(int port) {
  return post_json(port, "/v1/chat/completions",
                   {{"model", "model"},
                    {"messages", {{{"role", "user"}, {"content", kPrompt}}}},
                    {"max_tokens", kMaxTokens},
                    {"temperature", 0}});
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

std::string find_chromium_or_empty() { return test::HeadlessChromium::find_binary(); }

#define SKIP_WITHOUT_CHROMIUM(binary)                                           \
  if ((binary).empty())                                                         \
  GTEST_SKIP() << "chromium is not on PATH (Debian: apt-get install chromium; " \
                  "scripts/setup.sh installs it)"

// Polls <body data-state> until "done" or "error" (<= 120 s); returns the last state.
std::string wait_done(test::HeadlessChromium& browser) {
  std::string state;
  for (int i = 0; i < 600 && state != "done" && state != "error"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    state = browser.evaluate("document.body ? (document.body.dataset.state || '') : ''")
                .get<std::string>();
  }
  return state;
}

// Waits (<= 30 s) until the page's script has run (open() returns before the load).
void wait_ready(test::HeadlessChromium& browser) {
  for (int i = 0; i < 300; ++i) {
    if (browser.evaluate("document.readyState === 'complete' && window.lmstack !== undefined")
            .get<bool>())
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("the page did not load in 30 s");
}

Json page_stats(test::HeadlessChromium& browser) {
  return Json::parse(
      browser
          .evaluate(
              "(() => { const r = [...document.querySelectorAll('.assistant')].pop();"
              " const t = (id) => document.getElementById(id).textContent;"
              " return JSON.stringify({reply: r ? r.dataset.raw : null,"
              " chunks: r ? Number(r.dataset.chunks) : -1, tps: t('tps'), prefill: t('prefill'),"
              " ntok: t('ntok'), ptok: t('ptok'), cached: t('cached'),"
              " dropped: Number(document.body.dataset.dropped || 0)}); })()")
          .get<std::string>());
}

void maybe_screenshot(test::HeadlessChromium& browser, const std::string& name) {
  const char* dir = std::getenv("LMSTACK_SCREENSHOT_DIR");
  if (!dir || !*dir) return;
  std::ofstream(std::string(dir) + "/" + name, std::ios::binary) << browser.screenshot_png();
}

TEST(WebChatPage, StreamsTheGreedyReplyWithTokensPerSecondAndCachedTokens) {
  const std::string chromium = find_chromium_or_empty();
  SKIP_WITHOUT_CHROMIUM(chromium);
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
    ASSERT_EQ(wait_done(browser), "done") << browser.evaluate("document.body.innerText");
    shown = page_stats(browser);
  }
  const Json warm = chat_reference(server.port());
  EXPECT_EQ(shown["reply"].get<std::string>(), expected);
  EXPECT_EQ(warm["choices"][0]["message"]["content"].get<std::string>(), expected);
  EXPECT_EQ(shown["ntok"].get<std::string>(), std::to_string(completion_tokens));
  EXPECT_EQ(shown["chunks"].get<int>(), completion_tokens) << "one streamed chunk per token";
  for (const char* rate : {"tps", "prefill"}) {
    const std::string v = shown[rate].get<std::string>();
    EXPECT_GT(std::atof(v.c_str()), 0.0) << rate << " shows '" << v << "'";
  }
  // The cold request cached the prompt's full blocks; the page and the warm request hit them.
  const int cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached, 0);
  EXPECT_EQ(shown["cached"].get<std::string>(), std::to_string(cached));
  EXPECT_EQ(shown["ptok"].get<std::string>(), cold["usage"]["prompt_tokens"].dump());
}

// Types `text` into the page and sends it; the state of the reply.
std::string send_turn(test::HeadlessChromium& browser, const std::string& text) {
  browser.evaluate(
      fmt::format("document.body.dataset.state = ''; document.getElementById('prompt').value = {};"
                  " document.getElementById('form').requestSubmit(); 1",
                  Json(text).dump()));
  return wait_done(browser);
}

TEST(WebChatPage, LongConversationPastTheContextThenNewChat) {
  const std::string chromium = find_chromium_or_empty();
  SKIP_WITHOUT_CHROMIUM(chromium);
  constexpr int kContext = 128, kReply = 24;
  test::LiveServer server("web_chat_long", fmt::format("--kv-memory 16MiB --threads 1 "
                                                       "--max-model-len {}",
                                                       kContext));
  ASSERT_TRUE(server.ok()) << server.error();
  test::HeadlessChromium browser(chromium, server.dir() + "/profile");
  browser.open(
      fmt::format("http://127.0.0.1:{}/?max_tokens={}&temperature=0", server.port(), kReply));
  wait_ready(browser);
  browser.set_viewport(900, 900);
  int max_dropped = 0;
  for (int turn = 0; turn < 10; ++turn) {
    const std::string text = fmt::format("Turn {}: tell me more about the sea and the sky", turn);
    ASSERT_EQ(send_turn(browser, text), "done")
        << "turn " << turn << ": " << browser.evaluate("document.body.innerText");
    const Json s = page_stats(browser);
    const int prompt = std::stoi(s["ptok"].get<std::string>());
    EXPECT_LE(prompt + kReply, kContext) << "turn " << turn << ": the prompt did not fit";
    max_dropped = std::max(max_dropped, s["dropped"].get<int>());
  }
  EXPECT_GT(max_dropped, 0) << "10 turns of ~40 tokens must overflow a 128-token context";
  EXPECT_EQ(browser.evaluate("window.lmstack.messages().length").get<int>(), 20);
  EXPECT_TRUE(browser
                  .evaluate("(() => { const l = document.getElementById('log');"
                            " return l.scrollHeight > l.clientHeight &&"
                            " l.scrollTop + l.clientHeight >= l.scrollHeight - 2; })()")
                  .get<bool>())
      << "the log is not scrolled to the newest reply";
  maybe_screenshot(browser, "web_chat_long_conversation.png");

  browser.evaluate("document.getElementById('newchat').click(); 1");
  EXPECT_EQ(browser.evaluate("document.querySelectorAll('#log > *').length").get<int>(), 0);
  EXPECT_EQ(browser.evaluate("window.lmstack.messages().length").get<int>(), 0);
  const std::string text = "A new start";
  ASSERT_EQ(send_turn(browser, text), "done");
  const Json s = page_stats(browser);
  EXPECT_EQ(s["dropped"].get<int>(), 0);
  const Json alone = post_json(server.port(), "/tokenize",
                               {{"messages", {{{"role", "user"}, {"content", text}}}}});
  EXPECT_EQ(s["ptok"].get<std::string>(), alone["count"].dump())
      << "the request after New chat carries only its own message";
  maybe_screenshot(browser, "web_chat_new_chat.png");
}

TEST(WebChatPage, RendersMarkdownAndKeepsHtmlAsText) {
  const std::string chromium = find_chromium_or_empty();
  SKIP_WITHOUT_CHROMIUM(chromium);
  test::LiveServer server("web_chat_markdown", "--kv-memory 16MiB --threads 1");
  ASSERT_TRUE(server.ok()) << server.error();
  test::HeadlessChromium browser(chromium, server.dir() + "/profile");
  browser.open(fmt::format("http://127.0.0.1:{}/", server.port()));
  wait_ready(browser);
  browser.set_viewport(900, 700);
  const std::string markdown =
      "# Title\n**bold** and *it* and `x<y`\n<img src=x onerror=\"window.pwned=1\">"
      "<script>window.pwned=2</script>\n- one\n- two\n```js\nif (a < b) { go(); }\n```";
  const Json r = Json::parse(
      browser
          .evaluate(fmt::format(
              "(() => {{ const el = window.lmstack.renderMarkdown({});"
              " const d = document.createElement('div'); d.className = 'assistant';"
              " d.appendChild(el); document.getElementById('log').appendChild(d);"
              " const q = (s) => el.querySelector(s);"
              " return JSON.stringify({{html: el.querySelectorAll('img,script').length,"
              " h: q('h3') && q('h3').textContent, strong: q('strong') && q('strong').textContent,"
              " em: q('em') && q('em').textContent, code: q('p code') && q('p code').textContent,"
              " pre: q('pre code') && q('pre code').textContent,"
              " lang: q('pre code') && q('pre code').dataset.lang,"
              " items: el.querySelectorAll('ul li').length,"
              " text: el.textContent.includes('<img src=x')}}); }})()",
              Json(markdown).dump()))
          .get<std::string>());
  EXPECT_EQ(r["html"], 0) << "HTML in a reply became elements: " << r;
  EXPECT_EQ(r["text"], true) << r;
  EXPECT_EQ(r["h"], "Title");
  EXPECT_EQ(r["strong"], "bold");
  EXPECT_EQ(r["em"], "it");
  EXPECT_EQ(r["code"], "x<y");
  EXPECT_EQ(r["pre"], "if (a < b) { go(); }");
  EXPECT_EQ(r["lang"], "js");
  EXPECT_EQ(r["items"], 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(browser.evaluate("window.pwned === undefined").get<bool>());
  EXPECT_TRUE(browser
                  .evaluate("[...document.querySelectorAll('input')].every("
                            "(i) => i.labels && i.labels.length > 0)")
                  .get<bool>())
      << "an input has no label";
  maybe_screenshot(browser, "web_chat_markdown.png");
}

}  // namespace
}  // namespace lmstack::serve
