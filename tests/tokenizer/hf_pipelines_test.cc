// tokenizer.json files in the layouts of Qwen2, Llama 2, Llama 3, DeepSeek-V3, Phi-3, Gemma and
// five more normalizer / pre-tokenizer combinations, written by `tokenizers` 0.23.3
// (tools/ref/gen_tokenizer_pipelines.py): lmstack's ids and decoded text equal `tokenizers`'
// on the committed Unicode cases (combining marks, CJK, digits, emoji) and, when ../shared is
// present, on every file of the shared corpus.
#include <gtest/gtest.h>

#include <sstream>

#include "lmstack/core/json.h"
#include "lmstack/core/thread_pool.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using test::data_path;
using test::first_difference;

std::string fnv64_bytes(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return fmt::format("{:016x}", h);
}

class HfPipeline : public ::testing::TestWithParam<std::string> {
 protected:
  Tokenizer load() const { return Tokenizer::load(data_path("pipelines/" + GetParam() + ".json")); }
};

TEST_P(HfPipeline, UnicodeCasesMatchHfTokenizers) {
  const Tokenizer tok = load();
  const Json cases = read_json_file(data_path("pipelines/unicode_cases.json"));
  const Json expected = read_json_file(data_path("pipelines/" + GetParam() + ".cases.json"));
  ASSERT_EQ(cases.size(), expected.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i].get<std::string>();
    const auto want = expected[i]["ids"].get<std::vector<int32_t>>();
    const auto got = tok.encode(text, SpecialMode::kAllow);
    EXPECT_EQ(got, want) << "case " << i << " '" << text << "': " << first_difference(got, want);
    EXPECT_EQ(tok.decode_text(want), expected[i]["decoded"].get<std::string>()) << "case " << i;
  }
}

TEST_P(HfPipeline, CorpusMatchesHfTokenizers) {
  LMSTACK_REQUIRE_PEERS(peers);
  const Tokenizer tok = load();
  std::istringstream in(read_file(data_path("pipelines/corpus.tsv")));
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string name, file, ids_hash, text_hash;
    size_t bytes = 0, tokens = 0;
    if (!(f >> name >> file >> bytes >> tokens >> ids_hash >> text_hash) || name != GetParam())
      continue;
    const std::string text = read_file(peers + "/corpus/" + file);
    const auto ids = tok.encode(text, SpecialMode::kAllow);
    EXPECT_EQ(text.size(), bytes) << file;
    EXPECT_EQ(ids.size(), tokens) << file;
    EXPECT_EQ(test::fnv64(ids), ids_hash) << file;
    EXPECT_EQ(fnv64_bytes(tok.decode_text(ids)), text_hash) << file << " (decoded)";
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HfPipeline,
                         ::testing::Values("qwen2", "llama2", "llama3", "deepseek_v3", "phi3",
                                           "gemma", "metaspace_split", "bert_like", "whitespace",
                                           "splits"));

}  // namespace
}  // namespace lmstack::tokenizer
