// convert for SentencePiece-style tokenizers: a model directory holding the tokenizer.json
// transformers 5.24's LlamaTokenizerFast wrote for a SentencePiece BPE model
// (tests/data/tokenizer/spm_llama, tools/ref/gen_spm_tokenizer.py) converts to GGUF with
// llama.cpp's "llama" vocabulary, and the GGUF tokenizer encodes every test line as HF does
// (lines that start with a space as sentencepiece and llama.cpp do: there HF's Metaspace adds
// no second U+2581); token types equal the tokenizer.model's and scores order the normal tokens
// as its scores do. The Llama 2 era layout (Prepend/Replace normalizers) of the same vocabulary
// encodes every line as sentencepiece does, and what llama.cpp cannot run is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "gguf_test_util.h"
#include "lmstack/core/gguf.h"
#include "lmstack/model/gguf_model.h"
#include "lmstack/model/presets.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::model {
namespace {

using gguf_test::make_reference;

// A tiny llama with the tokenizer.json at `tokenizer_json` (vocab_size 1024: ids past the
// tokenizer's become [PAD<id>]) converted to GGUF; returns the .gguf path.
std::string convert_with(const std::string& tokenizer_json, const std::string& name) {
  Json cfg = find_model_preset("tiny-llama", "").config;
  cfg["vocab_size"] = 1024;
  const ModelDir ref = make_reference(cfg, DType::kF32, name, tokenizer_json);
  const std::string path = test::temp_dir("gguf_spm") + "/" + name + ".gguf";
  GgufWriteOptions o;
  o.matrix_dtype = DType::kF32;
  write_gguf_model(path, ref.config, ref.weights, ref.path, o);
  return path;
}

std::vector<size_t> order_by_score(const std::vector<double>& scores,
                                   const std::vector<int64_t>& types) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < scores.size(); ++i)
    if (types[i] == 1) ids.push_back(i);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return ids;
}

TEST(GgufTokenizerSpm, ConvertedVocabularyEncodesLikeTransformers) {
  const std::string dir = test::source_path("tests/data/tokenizer/spm_llama");
  const std::string path = convert_with(dir + "/tokenizer.json", "spm_llama");
  const Json g = read_json_file(dir + "/goldens.json");
  const auto tok = tokenizer::Tokenizer::load(path);
  size_t as_hf = 0, as_sp = 0;
  for (size_t i = 0; i < g["lines"].size(); ++i) {
    const std::string line = g["lines"][i].get<std::string>();
    const auto ids = tok.encode(line, tokenizer::SpecialMode::kAllow);
    if (line[0] == ' ') {
      EXPECT_EQ(ids, g["sp_ids"][i].get<std::vector<int32_t>>()) << "line " << i;
      ++as_sp;
    } else {
      EXPECT_EQ(ids, g["hf_ids"][i].get<std::vector<int32_t>>()) << "line " << i;
      ++as_hf;
    }
    EXPECT_EQ(tok.decode(ids), line) << "line " << i;
  }
  EXPECT_EQ(as_hf + as_sp, 439u);
  EXPECT_EQ(as_sp, 35u);

  const GgufFile f(path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_space_prefix", false));
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id", -1), 0);
  const std::vector<int64_t> types = f.get_ints("tokenizer.ggml.token_type");
  const std::vector<double>& scores = f.get_floats("tokenizer.ggml.scores");
  ASSERT_EQ(types.size(), 1024u);
  std::vector<int64_t> sp_types = g["sp_types"].get<std::vector<int64_t>>();
  std::replace(sp_types.begin(), sp_types.end(), int64_t{2},
               int64_t{3});  // <unk>: an added special
  EXPECT_EQ(std::vector<int64_t>(types.begin(), types.begin() + 1000), sp_types);
  EXPECT_EQ(types[1000], 5);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens")[1023], "[PAD1023]");
  const std::vector<double> sp_scores = g["sp_scores"].get<std::vector<double>>();
  EXPECT_EQ(order_by_score(std::vector<double>(scores.begin(), scores.begin() + 1000), sp_types),
            order_by_score(sp_scores, sp_types));
}

TEST(GgufTokenizerSpm, Llama2LayoutEncodesLikeSentencepiece) {
  // The same vocabulary in the Llama 2 era layout (Prepend + Replace normalizers, no
  // pre-tokenizer): one U+2581 is always prepended, so every line equals sentencepiece's ids.
  const std::string src = test::source_path("tests/data/tokenizer/spm_llama");
  Json j = read_json_file(src + "/tokenizer.json");
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = Json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
  const std::string dir = test::temp_dir("gguf_spm_llama2");
  write_file_atomic(dir + "/tokenizer.json", j.dump());
  write_file_atomic(dir + "/tokenizer_config.json", read_file(src + "/tokenizer_config.json"));
  const std::string path = convert_with(dir + "/tokenizer.json", "spm_llama2_layout");
  const auto gguf = tokenizer::Tokenizer::load(path);
  const auto hf_json = tokenizer::Tokenizer::load(dir);
  const Json g = read_json_file(src + "/goldens.json");
  for (size_t i = 0; i < g["lines"].size(); ++i) {
    const std::string line = g["lines"][i].get<std::string>();
    const auto want = g["sp_ids"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(gguf.encode(line, tokenizer::SpecialMode::kAllow), want) << "line " << i;
    EXPECT_EQ(hf_json.encode(line, tokenizer::SpecialMode::kAllow), want) << "line " << i;
  }
  EXPECT_TRUE(GgufFile(path).get_bool("tokenizer.ggml.add_space_prefix", false));
}

TEST(GgufTokenizerSpm, WhatLlamaCppCannotRunIsRefusedByName) {
  const std::string src = test::source_path("tests/data/tokenizer/spm_llama/tokenizer.json");
  Json j = read_json_file(src);
  j["pre_tokenizer"]["split"] = true;
  const std::string dir = test::temp_dir("gguf_spm_bad");
  write_file_atomic(dir + "/tokenizer.json", j.dump());
  try {
    convert_with(dir + "/tokenizer.json", "spm_split");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("split=true"), std::string::npos) << e.what();
  }
  j["pre_tokenizer"] = nullptr;
  j["normalizer"] = {{"type", "NFKC"}};
  write_file_atomic(dir + "/tokenizer.json", j.dump());
  EXPECT_THROW(convert_with(dir + "/tokenizer.json", "spm_nfkc"), ConfigError);
}

}  // namespace
}  // namespace lmstack::model
