// tokenizer.json files encode exactly like Hugging Face `tokenizers` (goldens from
// tools/ref/gen_tokenizer_hf.py): SentencePiece-converted style with byte fallback (Prepend +
// Replace normalizer, or Metaspace), byte-level with Digits + a PCRE2 regex, and the
// tokenizer.json lmstack's own trainer writes (also on the whole corpus when ../shared exists).
#include <gtest/gtest.h>

#include <sstream>

#include "lmstack/core/thread_pool.h"
#include "lmstack/tokenizer/bpe_trainer.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using test::data_path;
using test::first_difference;

class HfGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGolden, FuzzLinesAndEdgeCasesMatchHfTokenizers) {
  const Tokenizer tok = Tokenizer::load(data_path("hf/" + GetParam() + ".json"));
  std::vector<std::string> texts = test::split_lines(read_file(data_path("fuzz_cases.txt")));
  texts.push_back(read_file(data_path("constructed_edge_cases.txt")));
  const auto expected = test::read_id_lines(data_path("hf/" + GetParam() + ".ids"));
  ASSERT_EQ(texts.size(), expected.size());
  ThreadPool pool(2);
  const auto got = tok.encode_batch(pool, texts, SpecialMode::kAllow);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << "case " << i + 1 << " '" << texts[i].substr(0, 60)
                                   << "': " << first_difference(got[i], expected[i]);
    // Metaspace (prepend_scheme first) decodes " x" as "x", as Hugging Face does.
    if (GetParam() != "sp_metaspace" || !texts[i].starts_with(' ')) {
      EXPECT_EQ(tok.decode(got[i]), texts[i]) << "case " << i + 1;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfGolden,
                         ::testing::Values("sp_llama2", "sp_metaspace", "bytelevel_regex",
                                           "lmstack_trained"));

TEST(HfJson, SentencePieceStyleMetadata) {
  const Tokenizer tok = Tokenizer::load(data_path("hf/sp_llama2.json"));
  EXPECT_FALSE(tok.is_byte_level());
  EXPECT_EQ(tok.bos_token(), "<s>");
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.add_bos_token());
  EXPECT_EQ(tok.token_bytes(3 + 0x0A), "\n");  // <0x0A> decodes to the byte
  EXPECT_EQ(tok.decode(tok.encode("Hello world")), "Hello world");
  // The streaming decoder strips the leading space once, like decode().
  auto dec = tok.incremental_decoder();
  std::string out;
  for (int32_t id : tok.encode("a b\xE4\xB8\xAD")) out += dec.push(id);
  EXPECT_EQ(out + dec.flush(), "a b\xE4\xB8\xAD");
}

TEST(HfJson, TrainerReproducesTheCommittedFixture) {
  BpeTrainerOptions o;
  o.vocab_size = 1000;
  o.pattern = "cl100k";
  o.special_tokens = {"<|endoftext|>", "<|pad|>"};
  const std::string json = train_bpe_to_hf_json(
      {read_file(data_path("fuzz_cases.txt")), read_file(data_path("constructed_edge_cases.txt"))},
      o);
  EXPECT_TRUE(json == read_file(data_path("hf/lmstack_trained.json")))
      << "the trainer's output changed: regenerate with tools/ref/gen_tokenizer_hf.py if "
         "intended";
}

TEST(HfJson, TrainedTokenizerMatchesHfOnCorpus) {
  LMSTACK_REQUIRE_PEERS(peers);
  const Tokenizer tok = Tokenizer::load(data_path("hf/lmstack_trained.json"));
  std::istringstream in(read_file(data_path("hf/corpus.tsv")));
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string name, hash;
    size_t bytes = 0, tokens = 0;
    f >> name >> bytes >> tokens >> hash;
    const std::string text = read_file(peers + "/corpus/" + name);
    const auto ids = tok.encode(text, SpecialMode::kAllow);
    EXPECT_EQ(text.size(), bytes) << name;
    EXPECT_EQ(ids.size(), tokens) << name;
    EXPECT_EQ(test::fnv64(ids), hash) << name;
    ++checked;
  }
  EXPECT_GT(checked, 5);
}

}  // namespace
}  // namespace lmstack::tokenizer
