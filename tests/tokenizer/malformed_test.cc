// Malformed vocabulary files get clear errors naming the file, line or field.
#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

template <class E, class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// The first 256 ranks of r50k (all single bytes) plus extra lines.
std::string r50k_head(const std::string& extra) {
  const std::string all = read_file(test::data_path("r50k_base.tiktoken"));
  size_t pos = 0;
  for (int i = 0; i < 256; ++i) pos = all.find('\n', pos) + 1;
  return all.substr(0, pos) + extra;
}

TEST(Malformed, TiktokenFiles) {
  expect_error<FormatError>([] { Tokenizer::from_tiktoken(r50k_head("IQ=!= 300\n"), "gpt2", "t"); },
                            "t:257: invalid base64 'IQ=!='");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken(r50k_head("aGk= 255\n"), "gpt2", "t"); },
                            "duplicate token id 255");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken(r50k_head("IQ== 300\n"), "gpt2", "t"); },
                            "repeats the bytes of token 0");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken(r50k_head("aGk= x1\n"), "gpt2", "t"); },
                            "t:257: invalid rank 'x1'");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken(r50k_head("aGk=\n"), "gpt2", "t"); },
                            "expected 'BASE64 RANK'");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken("IQ== 0\n", "gpt2", "t"); },
                            "no token for the single byte 0x00");
  expect_error<FormatError>([] { Tokenizer::from_tiktoken("", "gpt2", "t"); }, "no tokens");
  expect_error<FormatError>(
      [] { Tokenizer::from_tiktoken(r50k_head("aGk= 50256\n"), "gpt2", "t"); },
      "also an ordinary token");
}

TEST(Malformed, Gpt2Files) {
  const std::string enc = read_file(test::data_path("gpt2/encoder.json"));
  const std::string bpe = read_file(test::data_path("gpt2/vocab.bpe"));
  expect_error<FormatError>([&] { Tokenizer::from_gpt2(enc.substr(0, 5000), bpe, "g"); },
                            "g/encoder.json: invalid JSON");
  expect_error<FormatError>(
      [&] { Tokenizer::from_gpt2(enc, bpe.substr(0, bpe.find('\n', 2000) + 1), "g"); },
      "merges for 50256 tokens");
  expect_error<FormatError>([&] { Tokenizer::from_gpt2(enc, bpe.substr(0, 2000), "g"); },
                            "g/vocab.bpe:373: merge 'Ġ ' should create token 627");
  std::string swapped = bpe;
  const std::string first_merge = "\nĠ t\n";
  swapped.replace(swapped.find(first_merge), first_merge.size(), "\nt Ġ\n");
  expect_error<FormatError>([&] { Tokenizer::from_gpt2(enc, swapped, "g"); },
                            "g/vocab.bpe:2: merge 't Ġ' should create token 256");
}

TEST(Malformed, HfJson) {
  const std::string base = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
      "merges": ["a b"]}, "pre_tokenizer": null, "added_tokens": []})";
  EXPECT_NO_THROW(Tokenizer::from_hf_json(base, "h.json"));
  expect_error<FormatError>([&] { Tokenizer::from_hf_json(base.substr(0, 40), "h.json"); },
                            "h.json: invalid JSON at byte");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = base;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_error<FormatError>([&] { Tokenizer::from_hf_json(with("\"a b\"", "\"a c\""), "h"); },
                            "merges[0]: 'a c': 'c' is not in the vocabulary");
  expect_error<FormatError>([&] { Tokenizer::from_hf_json(with("\"ab\": 2", "\"ab\": 1"), "h"); },
                            "duplicate token id 1");
  expect_error<ConfigError>([&] { Tokenizer::from_hf_json(with("BPE", "WordPiece"), "h"); },
                            "model type 'WordPiece' is not supported");
  expect_error<ConfigError>(
      [&] {
        Tokenizer::from_hf_json(
            with("\"pre_tokenizer\": null", R"("pre_tokenizer": {"type": "UnicodeScripts"})"), "h");
      },
      "pre-tokenizer 'UnicodeScripts' is not supported");
  expect_error<ConfigError>(
      [&] {
        Tokenizer::from_hf_json(
            with("\"pre_tokenizer\": null",
                 R"("normalizer": {"type": "Precompiled"}, "pre_tokenizer": null)"),
            "h");
      },
      "normalizer 'Precompiled' is not supported");
  // `tokenizers` refuses a BPE model without merges too ("Missing vocab/merges").
  expect_error<FormatError>(
      [&] {
        Tokenizer::from_hf_json(with(R"(,
      "merges": ["a b"])",
                                     ""),
                                "h.json");
      },
      "h.json: model: missing 'merges'");
  expect_error<ConfigError>(
      [&] {
        Tokenizer::from_hf_json(
            with("\"pre_tokenizer\": null",
                 R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\W]"}})"),
            "h");
      },
      "\\W inside a character class is not supported");
  expect_error<ConfigError>(
      [&] {
        Tokenizer::from_hf_json(
            with("\"pre_tokenizer\": null",
                 R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}})"),
            "h");
      },
      "pre-tokenizer regex '(a'");
}

}  // namespace
}  // namespace lmstack::tokenizer
