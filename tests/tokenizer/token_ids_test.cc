// Token ids from vocabulary files are validated before they size a table (token_ids.h): the
// crashes of issue 13 (an added id of 2^31 → SIGSEGV, -1 → heap corruption, a tiktoken rank of
// 2,000,000,000 → 16 GB asked, 2147483647 → "vector::_M_fill_insert" naming nothing) are now
// FormatErrors naming the file and the id, as is a normalizer nested 20,000 deep.
#include "lmstack/tokenizer/token_ids.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

template <class F>
void expect_format_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::string hf_json(const std::string& added, const std::string& normalizer = "null") {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
      "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": null, "added_tokens": [)" + added + "]}";
}

std::string added(const std::string& content, const std::string& id) {
  return R"({"content": ")" + content + R"(", "id": )" + id + R"(, "special": true})";
}

TEST(TokenIds, AddedTokenIdsAreChecked) {
  EXPECT_EQ(Tokenizer::from_hf_json(hf_json(added("<s>", "3")), "t.json").vocab_size(), 4);
  expect_format_error(
      [] { Tokenizer::from_hf_json(hf_json(added("<s>", "2147483648")), "t.json"); },
      "t.json: added_tokens[0]: token id 2147483648 exceeds the limit of 4194303");
  expect_format_error([] { Tokenizer::from_hf_json(hf_json(added("<s>", "-1")), "t.json"); },
                      "t.json: added_tokens[0]: token id -1 is negative");
  expect_format_error(
      [] { Tokenizer::from_hf_json(hf_json(added("<s>", "4000000")), "t.json"); },
      "t.json: token id 4000000 is far beyond the vocabulary (4 tokens; ids must stay below "
      "262152)");
  expect_format_error(
      [] {
        Tokenizer::from_hf_json(hf_json(added("<s>", "3") + "," + added("</s>", "3")), "t.json");
      },
      "added tokens '</s>' and '<s>' share the id 3");
}

TEST(TokenIds, VocabIdsAreChecked) {
  std::string j = hf_json("");
  j.replace(j.find("\"ab\": 2"), 7, "\"ab\": 4294967298");  // 2^32 + 2 wrapped to 2 before
  expect_format_error([&] { Tokenizer::from_hf_json(j, "t.json"); },
                      "t.json: model.vocab: token id 4294967298 exceeds the limit");
}

// The first 256 ranks of r50k (every single byte) plus `extra`.
std::string r50k_head(const std::string& extra) {
  const std::string all = read_file(test::data_path("r50k_base.tiktoken"));
  size_t pos = 0;
  for (int i = 0; i < 256; ++i) pos = all.find('\n', pos) + 1;
  return all.substr(0, pos) + extra;
}

TEST(TokenIds, TiktokenRanksAreChecked) {
  expect_format_error([] { Tokenizer::from_tiktoken(r50k_head("YWI= 2000000000\n"), "gpt2", "r"); },
                      "r:257: token id 2000000000 exceeds the limit of 4194303");
  expect_format_error([] { Tokenizer::from_tiktoken(r50k_head("YWI= 2147483647\n"), "gpt2", "r"); },
                      "r:257: token id 2147483647 exceeds the limit");
  expect_format_error([] { Tokenizer::from_tiktoken(r50k_head("YWI= 4000000\n"), "gpt2", "r"); },
                      "token id 4000000 is far beyond the vocabulary");
  // None sized a table first (16 GB was asked for before): the fuzz target's 2 GiB malloc
  // limit (scripts/fuzz.sh) is what would catch a regression there.
}

TEST(TokenIds, DeepNormalizerSequenceFailsFast) {
  std::string norm;
  for (int i = 0; i < 20000; ++i) norm += R"({"type": "Sequence", "normalizers": [)";
  norm += R"({"type": "NFC"})";
  for (int i = 0; i < 20000; ++i) norm += "]}";
  expect_format_error([&] { Tokenizer::from_hf_json(hf_json("", norm), "t.json"); },
                      "t.json: JSON nests deeper than 256 levels");
}

TEST(TokenIds, CheckedTokenId) {
  EXPECT_EQ(checked_token_id(0, "s"), 0);
  EXPECT_EQ(checked_token_id(kMaxTokenId, "s"), kMaxTokenId);
  EXPECT_THROW(checked_token_id(kMaxTokenId + 1, "s"), FormatError);
  EXPECT_THROW(checked_token_id(-1, "s"), FormatError);
  EXPECT_NO_THROW(check_token_id_density(2 * 10 + kMaxUnusedTokenIds - 1, 10, "s"));
  EXPECT_THROW(check_token_id_density(2 * 10 + kMaxUnusedTokenIds, 10, "s"), FormatError);
}

}  // namespace
}  // namespace lmstack::tokenizer
