// ChatTemplate against Python jinja2: renders every case of
// tests/data/tokenizer/chat_templates/goldens.json (the real chat templates of Llama 2/3/3.1/
// 3.2, Mistral, TinyLlama, SmolLM2, Qwen2/2.5/3 and ChatML over several conversations) and
// compares byte for byte; also the render_chat helper, concurrent renders and strftime_now.
// Regenerate the goldens: python3 tools/ref/gen_chat_templates.py
#include <gtest/gtest.h>

#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/chat_template.h"
#include "test_util.h"

namespace lmstack::tokenizer {
namespace {

const std::string kDir = "tests/data/tokenizer/chat_templates/";

ChatTemplate load_template(const std::string& name) {
  return ChatTemplate::parse(read_file(test::source_path(kDir + name + ".jinja")), name);
}

// Where two renders first differ, for a readable failure.
std::string first_difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "first difference at byte " + std::to_string(i) + ": got \"" + got.substr(i, 40) +
         "\", want \"" + want.substr(i, 40) + "\"";
}

TEST(ChatTemplate, GoldensMatchPythonJinja2ByteForByte) {
  const Json goldens = read_json_file(test::source_path(kDir + "goldens.json"));
  std::map<std::string, ChatTemplate> templates;
  std::set<std::string> with_errors;
  size_t checked = 0, ordered = 0;
  for (const Json& c : goldens.at("cases")) {
    const std::string name = c.at("template").get<std::string>();
    SCOPED_TRACE(name + " / " + c.at("case").get<std::string>() +
                 " (regenerate: python3 tools/ref/gen_chat_templates.py)");
    if (!templates.count(name)) templates.emplace(name, load_template(name));
    const ChatTemplate& t = templates.at(name);
    if (c.contains("error")) {
      with_errors.insert(name);
      try {
        t.render(c.at("context"));
        ADD_FAILURE() << "expected an error containing " << c.at("error");
      } catch (const RequestError& e) {
        EXPECT_NE(std::string(e.what()).find(c.at("error").get<std::string>()), std::string::npos)
            << e.what();
      }
    } else {
      const std::string want = c.at("expected").get<std::string>();
      // "context_text" cases keep the caller's key order (tool schemas), as HF does.
      const std::string got =
          c.contains("context_text")
              ? t.render(nlohmann::ordered_json::parse(c.at("context_text").get<std::string>()))
              : t.render(c.at("context"));
      EXPECT_EQ(got, want) << first_difference(got, want);
    }
    ordered += c.contains("context_text");
    ++checked;
  }
  EXPECT_GE(checked, 150u);
  for (const char* required :
       {"llama-2-chat", "llama-3-instruct", "llama-3.1-instruct", "llama-3.2-instruct",
        "mistral-instruct-v0.1", "mistral-instruct-v0.2", "tinyllama-chat", "smollm2-instruct",
        "chatml", "qwen2-instruct", "qwen2.5-instruct", "qwen3"})
    EXPECT_TRUE(templates.count(required)) << "no golden cases for " << required;
  EXPECT_TRUE(with_errors.count("mistral-instruct-v0.1")) << "mistral must reject bad alternation";
  EXPECT_GE(ordered, 4u) << "expected insertion-ordered tool cases";
}

TEST(ChatTemplate, RenderChatPassesTheUsualVariables) {
  const ChatTemplate t = load_template("llama-2-chat");
  const Json messages = Json::parse(R"([{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": " Hi "}])");
  EXPECT_EQ(render_chat(t, messages, true, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST]");
  const ChatTemplate chatml = load_template("chatml");
  EXPECT_EQ(render_chat(chatml, Json::parse(R"([{"role": "user", "content": "x"}])"), true, "", ""),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      ChatTemplate::parse("{{ tools is none }}{{ documents is none }}").render(Json::object()),
      "FalseFalse");
  EXPECT_EQ(render_chat(ChatTemplate::parse("{{ tools is none }}"), Json::array(), false, "", ""),
            "True");
}

TEST(ChatTemplate, RaiseExceptionBecomesRequestError) {
  const ChatTemplate t = load_template("mistral-instruct-v0.1");
  const Json messages = Json::parse(R"([{"role": "assistant", "content": "first"}])");
  try {
    render_chat(t, messages, false, "<s>", "</s>");
    FAIL() << "expected RequestError";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find("mistral-instruct-v0.1:1:"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("raise_exception: Conversation roles must alternate"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
  const ChatTemplate t = load_template("qwen3");
  const Json messages = Json::parse(R"([{"role": "user", "content": "a"},
      {"role": "assistant", "content": "<think>r</think>b"}, {"role": "user", "content": "c"}])");
  const std::string want = render_chat(t, messages, true, "", "<|im_end|>");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t i = 0; i < mismatches.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k)
        mismatches[i] += render_chat(t, messages, true, "", "<|im_end|>") != want;
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplate, Llama32UsesStrftimeNowWithoutDateString) {
  const ChatTemplate t = load_template("llama-3.2-instruct");
  const Json messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  auto today = [] {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[32];
    return std::string(buf, std::strftime(buf, sizeof(buf), "%d %b %Y", &local));
  };
  const std::string before = today();
  const std::string out = render_chat(t, messages, true, "<|begin_of_text|>", "<|eot_id|>");
  const std::string after = today();  // a render across midnight may see either date
  const bool found = out.find("Today Date: " + before + "\n") != std::string::npos ||
                     out.find("Today Date: " + after + "\n") != std::string::npos;
  EXPECT_TRUE(found) << out;
}

// Every prefix of every real template either parses or throws FormatError, and whatever
// parses renders or throws RequestError: malformed input never crashes (run under ASan).
TEST(ChatTemplate, TruncatedTemplatesFailCleanly) {
  const Json goldens = read_json_file(test::source_path(kDir + "goldens.json"));
  std::map<std::string, Json> context_of;
  for (const Json& c : goldens.at("cases"))
    if (c.contains("context")) context_of.emplace(c.at("template"), c.at("context"));
  size_t parsed = 0, rejected = 0;
  for (const auto& [name, context] : context_of) {
    const std::string source = read_file(test::source_path(kDir + name + ".jinja"));
    for (size_t n = 0; n < source.size(); n += 7) {
      try {
        ChatTemplate::parse(source.substr(0, n), name).render(context);
        ++parsed;
      } catch (const FormatError&) {
        ++rejected;
      } catch (const RequestError&) {
        ++parsed;
      }
    }
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(rejected, 0u);
}

TEST(ChatTemplate, ParseErrorNamesTemplateLineAndColumn) {
  try {
    ChatTemplate::parse("{% for m in messages %}\n{{ m.content | wordwrap }}\n{% endfor %}",
                        "my_model");
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "my_model:2:16: unsupported construct 'filter wordwrap'");
  }
}

}  // namespace
}  // namespace lmstack::tokenizer
