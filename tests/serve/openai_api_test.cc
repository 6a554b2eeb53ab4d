// OpenAiApi and ResponseFormatter without sockets, on an init-model tiny-llama: every bad
// field gets an ApiError naming it, and a request run through the engine comes out in the
// OpenAI JSON and SSE chunk formats (role delta, content deltas, finish, usage, [DONE]).
#include "lmstack/serve/openai_api.h"

#include <gtest/gtest.h>

#include "api_fixture.h"
#include "lmstack/serve/openai_format.h"

namespace lmstack::serve {
namespace {

class OpenAiApiTest : public test::ApiFixture {
 protected:
  void SetUp() override { make_api(/*prefix_cache=*/true); }
  void expect_field(const std::string& body, const std::string& field, int status = 400,
                    bool chat = false) {
    try {
      chat ? api_->parse_chat(body) : api_->parse_completion(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), field) << body << ": " << e.what();
      EXPECT_EQ(e.status(), status) << body;
    }
  }
};

TEST_F(OpenAiApiTest, BadFieldsAreNamed) {
  expect_field("[1, 2]", "");
  expect_field(R"({"prompt": "x"})", "model");
  expect_field(R"({"model": "other", "prompt": "x"})", "model", 404);
  expect_field(R"({"model": "tiny"})", "prompt");
  expect_field(R"({"model": "tiny", "prompt": "x", "max_tokens": 0})", "max_tokens");
  expect_field(R"({"model": "tiny", "prompt": "x", "max_tokens": 2.5})", "max_tokens");
  expect_field(R"({"model": "tiny", "prompt": "x", "temperature": "1"})", "temperature");
  expect_field(R"({"model": "tiny", "prompt": "x", "top_p": 0})", "top_p");
  expect_field(R"({"model": "tiny", "prompt": "x", "stop": [1]})", "stop");
  expect_field(R"({"model": "tiny", "prompt": "x", "logprobs": 50})", "logprobs");
  expect_field(R"({"model": "tiny", "prompt": "x", "stream": "yes"})", "stream");
  expect_field(R"({"model": "tiny", "prompt": [100000]})", "prompt");
  expect_field(R"({"model": "tiny", "prompt": ")" + std::string(2000, 'a') + R"("})", "prompt");
  expect_field(R"({"model": "tiny", "messages": []})", "messages", 400, true);
  expect_field(R"({"model": "tiny", "messages": [{"content": "x"}]})", "messages", 400, true);
  expect_field(R"({"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                   "top_logprobs": 2})",
               "top_logprobs", 400, true);
}

TEST_F(OpenAiApiTest, ParsesSamplingFields) {
  const ApiRequest r = api_->parse_completion(
      R"({"model": "tiny", "prompt": "Hello", "max_tokens": 5, "temperature": 0.5, "top_k": -1,
          "top_p": 0.9, "min_p": 0.1, "seed": 3, "stop": "x", "n": 2, "logprobs": 2,
          "repetition_penalty": 1.1, "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.engine.params.max_tokens, 5);
  EXPECT_EQ(r.engine.params.top_k, 0);
  EXPECT_EQ(r.engine.params.seed, 3u);
  EXPECT_EQ(r.engine.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.engine.params.logprobs, 2);
  EXPECT_EQ(r.engine.n, 2);
  EXPECT_TRUE(r.stream && r.include_usage && r.logprobs);
  EXPECT_EQ(r.engine.prompt, tok_->encode("Hello", tokenizer::SpecialMode::kAllow));
  EXPECT_EQ(api_->parse_completion(R"({"model": "tiny", "prompt": "x"})").engine.params.max_tokens,
            16);
}

TEST_F(OpenAiApiTest, StreamChunksFollowTheOpenAiFormat) {
  ApiRequest r = api_->parse_chat(
      R"({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4,
          "temperature": 0, "n": 2, "stream": true, "logprobs": true, "top_logprobs": 1,
          "stream_options": {"include_usage": true}})");
  auto stream = *engine_->submit(r.engine);
  engine_->run_until_idle();
  ResponseFormatter f(r, *tok_, "tiny", "chatcmpl-x", 123);
  std::string sse = f.stream_begin();
  while (auto e = stream->next(std::chrono::milliseconds(0))) sse += f.stream_event(*e);
  std::vector<Json> chunks;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string data = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    chunks.push_back(Json::parse(data));
  }
  EXPECT_EQ(sse.substr(sse.size() - 14), "data: [DONE]\n\n");
  ASSERT_GE(chunks.size(), 5u);
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["index"], 1);
  int finishes = 0;
  for (const Json& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], "chatcmpl-x");
    for (const Json& ch : c["choices"]) finishes += ch["finish_reason"] == "length";
  }
  EXPECT_EQ(finishes, 2);
  const Json& last = chunks.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 8);
  const Json body = f.response();
  EXPECT_EQ(body["choices"][0]["logprobs"]["content"].size(), 4u);
  EXPECT_EQ(body["choices"][0]["message"]["content"], body["choices"][1]["message"]["content"]);
}

TEST_F(OpenAiApiTest, ToolEndpoints) {
  const Json t = api_->tokenize(R"({"prompt": "Hello world"})");
  EXPECT_EQ(t["count"], t["tokens"].size());
  const Json d = api_->detokenize(dump_json(Json{{"tokens", t["tokens"]}}));
  EXPECT_EQ(d["prompt"], "Hello world");
  EXPECT_EQ(api_->models()["data"][0]["id"], "tiny");
  const Json p = api_->debug_prefix(R"({"prompt": "Hello world"})");
  EXPECT_EQ(p["cached_tokens"], 0);
  EXPECT_FALSE(p["explanation"].get<std::string>().empty());
  EXPECT_NE(error_json("m", "t", "f", 400).find("\"param\":\"f\""), std::string::npos);
}

}  // namespace
}  // namespace lmstack::serve
