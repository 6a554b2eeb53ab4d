// The BPE trainer: merge order on a hand-counted example, the empty (bytes-only) vocabulary,
// duplicate spellings, and argument errors. Agreement with Hugging Face is in hf_json_test.cc.
#include "lmstack/tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::tokenizer {
namespace {

TEST(BpeTrainer, BytesOnlyVocabularyWithSpecials) {
  BpeTrainerOptions o;
  o.vocab_size = 258;
  o.special_tokens = {"<|endoftext|>", "<|im_end|>"};
  const std::string json = train_bpe_to_hf_json({}, o);
  const Json j = parse_json(json, "t");
  EXPECT_EQ(j["model"]["vocab"].size(), 256u);
  EXPECT_TRUE(j["model"]["merges"].empty());
  const Tokenizer tok = Tokenizer::from_hf_json(json, "t");
  EXPECT_EQ(tok.vocab_size(), 258);
  EXPECT_EQ(tok.encode("ab<|im_end|>", SpecialMode::kAllow), (std::vector<int32_t>{'a', 'b', 257}));
  EXPECT_EQ(tok.decode(tok.encode("\xFF\x00z", SpecialMode::kError)), "\xFF\x00z");
}

TEST(BpeTrainer, MergesMostFrequentPairFirst) {
  // Words (gpt2 pattern): "aaab" x3, " aaab" x2 ... counted by hand: (a,a) 10, (a,b) 5,
  // (' ',a) 2 -> first merge "aa", then (aa,a)/(aa,b)... deterministic tie-break.
  BpeTrainerOptions o;
  o.vocab_size = 259;
  o.min_frequency = 1;
  const std::string json = train_bpe_to_hf_json({"aaab aaab aaab"}, o);
  const Json j = parse_json(json, "t");
  ASSERT_EQ(j["model"]["merges"].size(), 3u);
  EXPECT_EQ(j["model"]["merges"][0], "a a");
  EXPECT_EQ(j["model"]["vocab"]["aa"], 256);
  const Tokenizer tok = Tokenizer::from_hf_json(json, "t");
  EXPECT_EQ(tok.decode(tok.encode("aaab aaab")), "aaab aaab");
  EXPECT_LT(tok.encode("aaab aaab").size(), 8u);
}

TEST(BpeTrainer, DuplicateSpellingsReuseTheId) {
  BpeTrainerOptions o;
  o.vocab_size = 300;
  o.min_frequency = 1;
  const std::string json =
      train_bpe_to_hf_json({"abc abc abc xab xab xbc xbc xbc xbc abcd abcd"}, o);
  EXPECT_NO_THROW(Tokenizer::from_hf_json(json, "t"));  // would throw on a repeated spelling
}

TEST(BpeTrainer, Errors) {
  BpeTrainerOptions o;
  o.vocab_size = 256;
  o.special_tokens = {"<s>"};
  EXPECT_THROW(train_bpe_to_hf_json({}, o), ConfigError);
  o.vocab_size = 300;
  o.special_tokens = {"<s>", "<s>"};
  EXPECT_THROW(train_bpe_to_hf_json({}, o), ConfigError);
  o.special_tokens = {};
  o.pattern = "bert";
  EXPECT_THROW(train_bpe_to_hf_json({}, o), ConfigError);
}

}  // namespace
}  // namespace lmstack::tokenizer
