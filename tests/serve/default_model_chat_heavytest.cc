// The built-in default model (models/default) answers chat requests: its chat template ends
// with an assistant cue, so a greedy reply to each of 8 everyday prompts is non-empty (with
// the earlier template, which only joined the contents by newlines, 6 of these 8 got an
// empty reply: the model ended the "document" at once). Through a live `lmstack serve`.
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "live_server.h"
#include "lmstack/core/json.h"
#include "raw_http.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

TEST(DefaultModelChat, EveryPromptGetsAReply) {
  test::LiveServer server("default_chat", "--threads 1 --kv-memory 64MiB",
                          lmstack::test::source_path("models/default"));
  ASSERT_TRUE(server.ok()) << server.error();
  const char* prompts[] = {"Hi",
                           "How are you today?",
                           "Tell me a joke",
                           "What is the meaning of life?",
                           "Write a poem about the moon",
                           "Give me some advice",
                           "What should I do tomorrow?",
                           "床前明月光"};
  int answered = 0;
  std::string replies;
  for (const char* p : prompts) {
    const Json body = {{"model", "default"},
                       {"messages", {{{"role", "user"}, {"content", p}}}},
                       {"max_tokens", 24},
                       {"temperature", 0}};
    const std::string r =
        test::http_exchange(server.port(), test::post_request("/v1/chat/completions", body.dump()),
                            std::chrono::seconds(120));
    ASSERT_EQ(test::status_of(r), 200) << r;
    const std::string text =
        Json::parse(test::body_of(r))["choices"][0]["message"]["content"].get<std::string>();
    answered += text.find_first_not_of(" \t\r\n") != std::string::npos;
    replies += fmt::format("{:?} -> {:?}\n", p, text);
  }
  EXPECT_EQ(answered, 8) << replies;
  std::cout << replies;
}

}  // namespace
}  // namespace lmstack::serve
