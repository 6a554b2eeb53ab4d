// GrammarConstraint's token mask on GPT-2's 50257-token vocabulary (tests/data/tokenizer/gpt2)
// against the plain definition: a token is allowed when the matcher accepts its bytes fed one
// by one (special tokens only inside a tool-call wrapper), EOS only when the value is complete.
// Covers the trie walk, its pruning, and the shortcut for free string bodies.
#include "lmstack/serve/token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lmstack/serve/tool_calls.h"
#include "test_util.h"

namespace lmstack::serve {
namespace {

using OJson = nlohmann::ordered_json;

class TokenMaskTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = new tokenizer::Tokenizer(
        tokenizer::Tokenizer::load(lmstack::test::source_path("tests/data/tokenizer/gpt2")));
    trie_ = new std::shared_ptr<const TokenTrie>(std::make_shared<const TokenTrie>(*tok_));
  }
  static void TearDownTestSuite() {
    delete trie_;
    delete tok_;
  }
  // The constraint after the tokens of `prefix` (which the grammar must accept).
  static std::unique_ptr<GrammarConstraint> after(std::shared_ptr<const JsonGrammar> g,
                                                  const std::string& prefix) {
    auto c = std::make_unique<GrammarConstraint>(*trie_, g, std::vector<int32_t>{eos()});
    for (int32_t id : tok_->encode(prefix, tokenizer::SpecialMode::kAllow)) c->accept(id);
    JsonMatcher direct(g);
    EXPECT_TRUE(direct.feed(prefix)) << prefix;
    return c;
  }
  static std::vector<int32_t> brute_force(const JsonMatcher& at) {
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < tok_->vocab_size(); ++id) {
      const std::string& b = (*trie_)->bytes(id);
      if (b.empty() || ((*trie_)->is_special(id) && !at.in_raw_literal())) continue;
      JsonMatcher m = at;
      if (m.feed(b)) ids.push_back(id);
    }
    return ids;
  }
  static int32_t eos() { return *tok_->eos_id(); }
  static inline tokenizer::Tokenizer* tok_ = nullptr;
  static inline std::shared_ptr<const TokenTrie>* trie_ = nullptr;
};

TEST_F(TokenMaskTest, EqualsFeedingEveryTokenOnItsOwn) {
  const auto schema = std::make_shared<const JsonGrammar>(JsonGrammar::from_schema(
      OJson::parse(R"({"type": "object", "properties": {"name": {"type": "string"},
          "short": {"type": "string", "maxLength": 3}, "n": {"type": "number"},
          "tags": {"type": "array", "items": {"enum": ["red", "green", 12]}}},
          "required": ["name"]})"),
      "schema"));
  const auto object = std::make_shared<const JsonGrammar>(JsonGrammar::any_object());
  const OJson tools = OJson::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"properties": {"x": {"type": "integer"}}}}}])");
  const auto tool =
      std::make_shared<const JsonGrammar>(tool_call_grammar(ToolCallFormat::kHermes, tools, ""));
  const std::pair<std::shared_ptr<const JsonGrammar>, std::string> cases[] = {
      {schema, ""},
      {schema, R"({"name":"Jo)"},              // free string body: the shortcut
      {schema, R"({"name":"Jo\)"},             // inside an escape
      {schema, "{\"name\":\"caf\xC3"},         // inside a UTF-8 character
      {schema, R"({"name":"x","short":"ab)"},  // maxLength: the full walk
      {schema, R"({"name":"x","n":-1.5)"},
      {schema, R"({"name":"x","tags":["re)"},
      {schema, R"({"name":"x","tags":[12,)"},
      {object, R"({"a":[{"b":)"},
      {object, R"({"a":"hi)"},
      {tool, "<tool_"},
      {tool, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\":4"},
  };
  for (const auto& [g, prefix] : cases) {
    SCOPED_TRACE(prefix);
    const auto c = after(g, prefix);
    std::vector<int32_t> allowed;
    c->allowed_tokens(allowed);
    std::sort(allowed.begin(), allowed.end());
    JsonMatcher direct(g);  // the state without tokens: prefix bytes fed one by one
    ASSERT_TRUE(direct.feed(prefix));
    const std::vector<int32_t> expected = brute_force(direct);
    EXPECT_EQ(allowed, expected);
    EXPECT_FALSE(expected.empty());
  }
}

TEST_F(TokenMaskTest, MaskLeavesOnlyAllowedLogitsAndEosWhenComplete) {
  const auto g = std::make_shared<const JsonGrammar>(
      JsonGrammar::from_schema(OJson::parse(R"({"enum": [1, 12]})"), "schema"));
  const size_t padded = static_cast<size_t>(tok_->vocab_size()) + 64;  // a padded model vocab
  auto finite = [&](GrammarConstraint& c) {
    std::vector<float> logits(padded, 0.5f);
    c.mask(logits);
    std::vector<int32_t> ids;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::isfinite(logits[i])) {
        EXPECT_EQ(logits[i], 0.5f);
        ids.push_back(static_cast<int32_t>(i));
      }
    return ids;
  };
  const auto start = after(g, "");
  EXPECT_EQ(finite(*start),
            (std::vector<int32_t>{*tok_->encode("1").begin(), *tok_->encode("12").begin()}));
  const auto one = after(g, "1");  // complete, or "2" may follow
  std::vector<int32_t> expected = {tok_->encode("2")[0], eos()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(finite(*one), expected);
  const auto done = after(g, "12");  // closed: only EOS
  EXPECT_EQ(finite(*done), std::vector<int32_t>{eos()});
  // A token the mask refused (a sampler bug) leaves EOS as the only way out.
  const auto broken = after(g, "");
  broken->accept(tok_->encode("x")[0]);
  EXPECT_EQ(finite(*broken), std::vector<int32_t>{eos()});
}

}  // namespace
}  // namespace lmstack::serve
