// Byte-identical ids to PyPI tiktoken (goldens from tools/ref/gen_tokenizer_goldens.py): the
// committed edge-case and fuzz files for r50k/gpt2, cl100k and o200k, and the whole shared
// corpus (count + hash of the ids) for those and Llama 3. The corpus runs on all threads at
// once. A failure means: regenerate with python3 tools/ref/gen_tokenizer_goldens.py only if
// the reference changed; otherwise the tokenizer is wrong.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "lmstack/core/thread_pool.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using test::cached;
using test::data_path;
using test::first_difference;

class TiktokenGolden : public ::testing::TestWithParam<std::string> {};

// gpt2 (encoder.json + vocab.bpe) must equal r50k_base's goldens.
std::string golden_name(const std::string& enc) { return enc == "gpt2" ? "r50k_base" : enc; }

TEST_P(TiktokenGolden, EdgeCasesOrdinaryAndAllowed) {
  const Tokenizer& tok = cached(GetParam());
  const std::string edge = read_file(data_path("constructed_edge_cases.txt"));
  const std::string g = data_path("goldens/" + golden_name(GetParam()));
  const auto ordinary = test::read_id_lines(g + ".edge.ordinary.ids").at(0);
  const auto allowed = test::read_id_lines(g + ".edge.allow.ids").at(0);
  const auto got_text = tok.encode(edge, SpecialMode::kAsText);
  EXPECT_EQ(got_text, ordinary) << first_difference(got_text, ordinary);
  const auto got_allow = tok.encode(edge, SpecialMode::kAllow);
  EXPECT_EQ(got_allow, allowed) << first_difference(got_allow, allowed);
  EXPECT_EQ(tok.decode(got_text), edge);
  EXPECT_EQ(tok.decode(got_allow), edge);
}

TEST_P(TiktokenGolden, FuzzLines) {
  const Tokenizer& tok = cached(GetParam());
  const auto lines = test::split_lines(read_file(data_path("fuzz_cases.txt")));
  const auto expected =
      test::read_id_lines(data_path("goldens/" + golden_name(GetParam()) + ".fuzz.ids"));
  ASSERT_EQ(lines.size(), expected.size());
  ThreadPool pool(2);
  const auto got = tok.encode_batch(pool, lines, SpecialMode::kAsText);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << "line " << i + 1 << " '" << lines[i].substr(0, 80)
                                   << "': " << first_difference(got[i], expected[i]);
    EXPECT_EQ(tok.decode(got[i]), lines[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, TiktokenGolden,
                         ::testing::Values("gpt2", "r50k_base", "cl100k_base", "o200k_base"));

struct CorpusGolden {
  std::string encoding, name;
  size_t bytes, tokens;
  std::string hash;
};

std::vector<CorpusGolden> corpus_goldens() {
  std::vector<CorpusGolden> rows;
  std::istringstream in(read_file(data_path("corpus_goldens.tsv")));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    CorpusGolden g;
    f >> g.encoding >> g.name >> g.bytes >> g.tokens >> g.hash;
    rows.push_back(g);
  }
  return rows;
}

// The text a corpus golden row was computed on.
std::string golden_input(const std::string& peers, const CorpusGolden& g) {
  if (g.name == "fuzz") {
    std::string all;
    for (const auto& l : test::split_lines(read_file(data_path("fuzz_cases.txt")))) all += l;
    return all;  // hashed as the concatenation of the per-line ids: checked per line below
  }
  if (g.name.starts_with("edge.")) return read_file(data_path("constructed_edge_cases.txt"));
  return read_file(peers + "/corpus/" + g.name);
}

void check_corpus(const std::string& encoding, const std::string& peers) {
  const Tokenizer& tok = cached(encoding);
  std::vector<CorpusGolden> rows;
  std::vector<std::string> texts;
  for (const CorpusGolden& g : corpus_goldens()) {
    if (g.encoding != golden_name(encoding) || g.name == "fuzz") continue;
    rows.push_back(g);
    texts.push_back(golden_input(peers, g));
  }
  ASSERT_FALSE(rows.empty());
  ThreadPool pool(ThreadPool::default_num_threads());
  std::vector<std::vector<int32_t>> ids(texts.size());
  pool.parallel_for(static_cast<int64_t>(texts.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      ids[i] = tok.encode(
          texts[i], rows[i].name == "edge.allow" ? SpecialMode::kAllow : SpecialMode::kAsText);
  });
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(texts[i].size(), rows[i].bytes) << rows[i].name << ": corpus file changed";
    EXPECT_EQ(ids[i].size(), rows[i].tokens) << encoding << " " << rows[i].name;
    EXPECT_EQ(test::fnv64(ids[i]), rows[i].hash) << encoding << " " << rows[i].name;
    EXPECT_EQ(tok.decode(ids[i]), texts[i]) << encoding << " " << rows[i].name;
  }
}

TEST(TiktokenCorpus, Gpt2) {
  LMSTACK_REQUIRE_PEERS(peers);
  check_corpus("gpt2", peers);
}
TEST(TiktokenCorpus, R50k) {
  LMSTACK_REQUIRE_PEERS(peers);
  check_corpus("r50k_base", peers);
}
TEST(TiktokenCorpus, Cl100k) {
  LMSTACK_REQUIRE_PEERS(peers);
  check_corpus("cl100k_base", peers);
}
TEST(TiktokenCorpus, O200k) {
  LMSTACK_REQUIRE_PEERS(peers);
  check_corpus("o200k_base", peers);
}

TEST(TiktokenCorpus, Llama3) {
  LMSTACK_REQUIRE_PEERS(peers);
  check_corpus("llama3", peers);
  const Tokenizer& tok = cached("llama3");
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.special_tokens().size(), 256u);
  EXPECT_EQ(tok.token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(tok.token_id("<|reserved_special_token_250|>"), 128255);
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_TRUE(tok.add_bos_token());
  // Fuzz lines: hashed over the concatenated per-line ids.
  std::vector<int32_t> all;
  for (const auto& l : test::split_lines(read_file(data_path("fuzz_cases.txt"))))
    tok.encode_append(l, SpecialMode::kAsText, all);
  for (const CorpusGolden& g : corpus_goldens()) {
    if (g.encoding == "llama3" && g.name == "fuzz") {
      EXPECT_EQ(test::fnv64(all), g.hash);
    }
  }
}

// decode(encode(x)) == x for every corpus file, invalid UTF-8 included, every encoding.
TEST(TiktokenCorpus, RoundTripIncludingInvalidUtf8) {
  LMSTACK_REQUIRE_PEERS(peers);
  int checked = 0;
  for (const char* enc : {"gpt2", "cl100k_base", "o200k_base", "llama3"}) {
    const Tokenizer& tok = cached(enc);
    for (const auto& e : std::filesystem::directory_iterator(peers + "/corpus")) {
      const std::string text = read_file(e.path().string());
      EXPECT_EQ(tok.decode(tok.encode(text, SpecialMode::kAsText)), text)
          << enc << " " << e.path().filename();
      ++checked;
    }
  }
  EXPECT_GE(checked, 4 * 10) << "corpus files in " << peers << "/corpus";
}

}  // namespace
}  // namespace lmstack::tokenizer
