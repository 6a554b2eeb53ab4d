// A request body nested 100,000 deep in an extra message field crashed `serve` (SIGSEGV,
// issue 13); the API's parse is depth-limited now (core/json_depth.h) and answers a 400 that
// names the limit, and the same API then serves the next request.
#include <gtest/gtest.h>

#include <string>

#include "serve/api_fixture.h"

namespace lmstack::serve {
namespace {

class RequestDepthTest : public test::ApiFixture {};

std::string nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST_F(RequestDepthTest, DeepBodiesGetA400AndTheApiKeepsServing) {
  make_api(false);
  const std::string deep = R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi",
      "extra": )" + nested(100000) +
                           "}]}";
  for (const auto& parse : {&OpenAiApi::parse_chat, &OpenAiApi::parse_completion}) {
    try {
      ((*api_).*parse)(deep);
      ADD_FAILURE() << "accepted a body nested 100,000 deep";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_NE(std::string(e.what()).find("JSON nests deeper than 256 levels"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(api_->tokenize(R"({"prompt": )" + nested(300) + "}"), ApiError);
  // Tool-call arguments are a JSON string inside the body, parsed again: as deep inside it.
  const std::string deep_args = R"({"model": "tiny", "messages": [{"role": "user", "content":
      "x"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
      {"name": "f", "arguments": ")" +
                                nested(100000) + R"("}}]}]})";
  try {
    api_->parse_chat(deep_args);
    ADD_FAILURE() << "accepted tool-call arguments nested 100,000 deep";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("nest deeper than 512 levels"), std::string::npos)
        << e.what();
  }
  const ApiRequest ok = api_->parse_chat(
      R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})");
  EXPECT_FALSE(ok.engine.prompt.empty());
}

}  // namespace
}  // namespace lmstack::serve
