// Tokenizers from GGUF metadata against independent references: ids from the `sentencepiece`
// package for the "llama" (SPM) vocabulary and from HF `tokenizers` for the two "gpt2" (BPE)
// vocabularies, all in tests/data/model/gguf/tokenizer_goldens.json written by
// tools/ref/gen_gguf_golden.py (the GGUF files themselves were written by gguf-py). Also: the
// GGUF tokenizer equals lmstack's tokenizer.json loader on the same vocabulary, and malformed or
// unsupported vocabularies are refused naming the key.
#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/gguf.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::tokenizer {
namespace {

std::string data(const std::string& name) {
  return test::source_path("tests/data/model/gguf/" + name);
}

const Json& goldens() {
  static const Json j = read_json_file(data("tokenizer_goldens.json"));
  return j;
}

void expect_golden_ids(const Tokenizer& tok, const std::string& key, SpecialMode mode) {
  const Json& texts = goldens()["texts"];
  const Json& ids = goldens()[key];
  ASSERT_EQ(texts.size(), ids.size());
  ASSERT_GT(texts.size(), 10u);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(tok.encode(text, mode), ids[i].get<std::vector<int32_t>>())
        << key << " text " << i << ": " << text
        << "\nregenerate: python3 tools/ref/gen_gguf_golden.py";
  }
}

TEST(GgufVocab, SentencePieceVocabularyMatchesSentencepiece) {
  const Tokenizer tok = Tokenizer::load(data("llama_f16_spm.gguf"));
  EXPECT_FALSE(tok.is_byte_level());
  expect_golden_ids(tok, "spm", SpecialMode::kAsText);
  EXPECT_TRUE(tok.add_bos_token());
  EXPECT_EQ(tok.bos_token(), "<s>");
  EXPECT_EQ(tok.eos_token(), "</s>");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.is_special(1));
  // Byte fallback and the U+2581 space decode back to the exact text.
  for (const Json& t : goldens()["texts"]) {
    const std::string text = t.get<std::string>();
    EXPECT_EQ(tok.decode(tok.encode(text, SpecialMode::kAsText)), text);
  }
}

TEST(GgufVocab, BytePairVocabulariesMatchTokenizers) {
  const Tokenizer qwen2 = Tokenizer::load(data("qwen2_f32_bpe.gguf"));
  EXPECT_TRUE(qwen2.is_byte_level());
  expect_golden_ids(qwen2, "bpe_qwen2", SpecialMode::kAllow);
  const Tokenizer gpt2 = Tokenizer::load(data("gpt2_f16.gguf"));
  expect_golden_ids(gpt2, "bpe_gpt2", SpecialMode::kAllow);
  EXPECT_FALSE(gpt2.add_bos_token());
  EXPECT_EQ(gpt2.eos_token(), "<|im_end|>");
  EXPECT_NE(gpt2.chat_template().find("<|im_start|>"), std::string::npos);
  for (const Json& t : goldens()["texts"]) {
    const std::string text = t.get<std::string>();
    EXPECT_EQ(gpt2.decode(gpt2.encode(text, SpecialMode::kAllow)), text);
  }
}

TEST(GgufVocab, EqualsTheTokenizerJsonItCameFrom) {
  for (const auto& [gguf, json] : {std::pair{"qwen2_f32_bpe.gguf", "bpe_qwen2.tokenizer.json"},
                                   std::pair{"gpt2_f16.gguf", "bpe_gpt2.tokenizer.json"}}) {
    const Tokenizer a = Tokenizer::load(data(gguf));
    const Tokenizer b = Tokenizer::load(data(json));
    EXPECT_EQ(a.num_merges(), b.num_merges()) << gguf;
    for (const Json& t : goldens()["texts"]) {
      const std::string text = t.get<std::string>();
      EXPECT_EQ(a.encode(text, SpecialMode::kAllow), b.encode(text, SpecialMode::kAllow))
          << gguf << ": " << text;
    }
  }
}

// A GGUF holding only the tokenizer keys of `base` with `change` applied.
std::string vocab_file(const std::string& name, const std::string& base,
                       const std::function<void(GgufWriter&)>& change) {
  const GgufFile src(data(base));
  GgufWriter w;
  for (const auto& [key, value] : src.metadata())
    if (key.rfind("tokenizer.", 0) == 0) w.set(key, value);
  change(w);
  const std::string path = test::temp_dir("gguf_vocab") + "/" + name + ".gguf";
  w.write(path);
  return path;
}

template <class E>
void expect_refused(const std::string& path, const std::string& what) {
  try {
    (void)Tokenizer::load(path);
    ADD_FAILURE() << path << " accepted";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GgufVocab, RefusesUnsupportedAndMalformedVocabularies) {
  expect_refused<ConfigError>(
      vocab_file("pre", "qwen2_f32_bpe.gguf",
                 [](GgufWriter& w) { w.set("tokenizer.ggml.pre", GgufValue::string("tekken")); }),
      "tokenizer.ggml.pre 'tekken' is not supported");
  expect_refused<ConfigError>(
      vocab_file("model", "qwen2_f32_bpe.gguf",
                 [](GgufWriter& w) { w.set("tokenizer.ggml.model", GgufValue::string("bert")); }),
      "tokenizer.ggml.model 'bert'");
  expect_refused<FormatError>(
      vocab_file("types", "llama_f16_spm.gguf",
                 [](GgufWriter& w) {
                   w.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1}));
                 }),
      "tokenizer.ggml.token_type has 2 entries");
  expect_refused<FormatError>(vocab_file("merges", "qwen2_f32_bpe.gguf",
                                         [](GgufWriter& w) {
                                           w.set("tokenizer.ggml.merges",
                                                 GgufValue::string_array({"zzzq qqqz"}));
                                         }),
                              "tokenizer.ggml.merges[0] 'zzzq qqqz'");
  expect_refused<FormatError>(
      vocab_file("scores", "llama_f16_spm.gguf",
                 [](GgufWriter& w) { w.set("tokenizer.ggml.scores", GgufValue::u32(3)); }),
      "'tokenizer.ggml.scores' is u32, expected array of f32");
  expect_refused<FormatError>(
      vocab_file(
          "bos", "llama_f16_spm.gguf",
          [](GgufWriter& w) { w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(99999)); }),
      "tokenizer.ggml.bos_token_id = 99999 is outside");
}

}  // namespace
}  // namespace lmstack::tokenizer
