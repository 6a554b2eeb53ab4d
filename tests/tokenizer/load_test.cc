// Tokenizer::load's chat templates against transformers 5.24: for each file layout under
// tests/data/tokenizer/chat_layouts/ (tokenizer_config string or named list,
// chat_template.jinja, additional_chat_templates/, a processor's chat_template.json), the
// template chat_template_for() picks renders every conversation byte for byte as
// apply_chat_template did, tool schemas and tool-call arguments in the client's key order; a
// layout transformers refuses is refused too. Regenerate:
// /work/venv-ref/bin/python tools/ref/gen_chat_template_layouts.py
#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/tokenizer/chat_template.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::tokenizer {
namespace {

using OJson = nlohmann::ordered_json;
const std::string kDir = "tests/data/tokenizer/chat_layouts/";

OJson goldens() { return OJson::parse(read_file(test::source_path(kDir + "goldens.json"))); }

TEST(LoadChatTemplates, EveryLayoutRendersAsTransformersDoes) {
  size_t rendered = 0, refused = 0;
  for (const OJson& c : goldens()) {
    const std::string layout = c["layout"].get<std::string>();
    SCOPED_TRACE(layout + " / " + c["conversation"].get<std::string>());
    const Tokenizer tok = Tokenizer::load(test::source_path(kDir + layout));
    const bool with_tools = !c["tools"].is_null();
    if (c.contains("error")) {  // transformers: "multiple chat templates with no default"
      EXPECT_THROW(chat_template_for(tok, with_tools), ConfigError);
      ++refused;
      continue;
    }
    const ChatTemplate tmpl = ChatTemplate::parse(chat_template_for(tok, with_tools), layout);
    const std::string got =
        render_chat(tmpl, c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(),
                    tok.bos_token(), tok.eos_token());
    EXPECT_EQ(got, c["text"].get<std::string>());
    ++rendered;
  }
  EXPECT_EQ(rendered, 16u);
  EXPECT_EQ(refused, 2u);
}

TEST(LoadChatTemplates, FilesReplaceTheConfigEntry) {
  const Tokenizer over = Tokenizer::load(test::source_path(kDir + "jinja_over_config"));
  EXPECT_EQ(over.chat_template(),
            read_file(test::source_path(kDir + "jinja_over_config/chat_template.jinja")));
  EXPECT_TRUE(chat_templates(over).empty());  // one template: the plain-string form
  const Tokenizer named = Tokenizer::load(test::source_path(kDir + "jinja_and_additional"));
  ASSERT_EQ(chat_templates(named).size(), 2u);
  EXPECT_EQ(chat_templates(named).begin()->first, "default");
  EXPECT_NE(chat_template_for(named, true), chat_template_for(named, false));
  // additional_chat_templates/ alone also replaces the config's template (no default left).
  const Tokenizer only_tools = Tokenizer::load(test::source_path(kDir + "additional_no_default"));
  EXPECT_TRUE(only_tools.chat_template().empty());
  try {
    chat_template_for(only_tools, false);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("[tool_use] and no 'default'"), std::string::npos)
        << e.what();
  }
}

TEST(LoadChatTemplates, MalformedEntriesNameTheFileAndField) {
  const std::string dir = test::temp_dir("chat_layout_bad");
  write_file_atomic(path_join(dir, "tokenizer.json"),
                    read_file(test::source_path(kDir + "config_string/tokenizer.json")));
  const auto expect_error = [&](const std::string& config, const std::string& what) {
    write_file_atomic(path_join(dir, "tokenizer_config.json"), config);
    try {
      Tokenizer::load(dir);
      FAIL() << "expected FormatError for " << config;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(R"({"chat_template": [{"name": "default"}]})", "chat_template[0]");
  expect_error(R"({"chat_template": 3})", "tokenizer_config.json: chat_template must be");
  write_file_atomic(path_join(dir, "tokenizer_config.json"), "{}");
  write_file_atomic(path_join(dir, "chat_template.json"), R"({"template": "x"})");
  EXPECT_THROW(Tokenizer::load(dir), FormatError);
}

}  // namespace
}  // namespace lmstack::tokenizer
