// The chat prompt OpenAiApi builds against transformers 5.24's apply_chat_template
// (tests/data/tokenizer/chat_layouts/goldens.json): a request with tools renders through the
// model's "tool_use" template, one without through its default, and tool schemas and tool-call
// arguments (sent as a JSON string, OpenAI's format) keep the client's key order. Also the
// errors: arguments that are not JSON, tools that are not an array, no template for the request.
#include <gtest/gtest.h>

#include "api_fixture.h"
#include "lmstack/core/file.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;
const std::string kDir = "tests/data/tokenizer/chat_layouts/";

class OpenAiChatTest : public test::ApiFixture {
 protected:
  void SetUp() override { make_api(/*prefix_cache=*/false); }
  // An API over the tiny model with the tokenizer (and chat templates) of a layout.
  std::unique_ptr<OpenAiApi> api_for(const std::string& layout) {
    layout_tok_ = std::make_unique<tokenizer::Tokenizer>(
        tokenizer::Tokenizer::load(lmstack::test::source_path(kDir + layout)));
    return std::make_unique<OpenAiApi>(*engine_, *layout_tok_, "tiny");
  }
  // The request body OpenAI's client sends for a golden case: arguments as a JSON string.
  static std::string body_of(const OJson& c) {
    OJson body = {{"model", "tiny"}, {"messages", c["messages"]}};
    for (OJson& m : body["messages"])
      if (m.contains("tool_calls"))
        for (OJson& call : m["tool_calls"])
          call["function"]["arguments"] = call["function"]["arguments"].dump();
    if (!c["tools"].is_null()) body["tools"] = c["tools"];
    return body.dump();
  }
  std::unique_ptr<tokenizer::Tokenizer> layout_tok_;
};

TEST_F(OpenAiChatTest, PromptsEqualTransformersWithAndWithoutTools) {
  const OJson goldens = OJson::parse(read_file(lmstack::test::source_path(kDir + "goldens.json")));
  size_t checked = 0;
  for (const OJson& c : goldens) {
    const std::string layout = c["layout"].get<std::string>();
    if (c.contains("error") || !c["add_generation_prompt"].get<bool>()) continue;
    SCOPED_TRACE(layout + " / " + c["conversation"].get<std::string>());
    const auto api = api_for(layout);
    const Json t = api->tokenize(body_of(c));
    const std::vector<int32_t> ids = t["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(layout_tok_->decode(ids), c["text"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 11u);
}

TEST_F(OpenAiChatTest, BadToolFieldsAreNamed) {
  const auto api = api_for("config_named");
  const auto expect_param = [&](const std::string& body, const std::string& param,
                                const std::string& what) {
    try {
      api->tokenize(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), param) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_param(R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools",
               "'tools' must be an array");
  expect_param(R"({"messages": [{"role": "assistant", "content": "", "tool_calls":
      [{"function": {"name": "f", "arguments": "{not json"}}]}]})",
               "messages", "messages[0].tool_calls[0].function.arguments is not valid JSON");
  const auto only_tools = api_for("additional_no_default");
  try {
    only_tools->tokenize(R"({"messages": [{"role": "user", "content": "x"}]})");
    ADD_FAILURE() << "accepted a request the model has no template for";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "messages");
    EXPECT_NE(std::string(e.what()).find("no 'default'"), std::string::npos) << e.what();
  }
}

// chat_template_kwargs become template variables: Qwen3's enable_thinking=false and an
// add_generation_prompt override render as the jinja2 goldens of
// tools/ref/gen_chat_templates.py (transformers' apply_chat_template(**kwargs) settings).
TEST_F(OpenAiChatTest, ChatTemplateKwargsRenderAsTheGoldens) {
  const std::string dir = "tests/data/tokenizer/chat_templates/";
  const OJson goldens =
      OJson::parse(read_file(lmstack::test::source_path(dir + "goldens.json")))["cases"];
  OpenAiApi qwen3(*engine_, *tok_, "tiny",
                  read_file(lmstack::test::source_path(dir + "qwen3.jinja")));
  size_t checked = 0;
  for (const OJson& c : goldens) {
    const std::string name = c["case"].get<std::string>();
    if (c["template"] != "qwen3" ||
        (name != "thinking/disabled" && name != "user_only/agp=0" && name != "user_only/agp=1"))
      continue;
    SCOPED_TRACE(name);
    OJson body = {{"model", "tiny"}, {"messages", c["context"]["messages"]}};
    if (c["context"].contains("enable_thinking"))
      body["chat_template_kwargs"]["enable_thinking"] = c["context"]["enable_thinking"];
    if (!c["context"]["add_generation_prompt"].get<bool>())
      body["chat_template_kwargs"]["add_generation_prompt"] = false;
    const Json t = qwen3.tokenize(body.dump());
    EXPECT_EQ(tok_->decode(t["tokens"].get<std::vector<int32_t>>()),
              c["expected"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 3u);
  // Without the kwarg the thinking case renders differently (the kwarg is not ignored).
  const OJson plain = {{"model", "tiny"},
                       {"messages", {{{"role", "user"}, {"content", "What is 2+2?"}}}}};
  EXPECT_EQ(tok_->decode(qwen3.tokenize(plain.dump())["tokens"].get<std::vector<int32_t>>()),
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

// tool_choice "none" renders the prompt without the tools, as if none were sent.
TEST_F(OpenAiChatTest, ToolChoiceNoneHidesTheTools) {
  const auto api = api_for("config_named");
  const std::string messages = R"("messages": [{"role": "user", "content": "x"}])";
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  const Json with = api->tokenize("{" + messages + ", " + tools + "}");
  const Json none = api->tokenize("{" + messages + ", " + tools + R"(, "tool_choice": "none"})");
  const Json without = api->tokenize("{" + messages + "}");
  EXPECT_NE(with["tokens"], without["tokens"]);
  EXPECT_EQ(none["tokens"], without["tokens"]);
}

}  // namespace
}  // namespace lmstack::serve
