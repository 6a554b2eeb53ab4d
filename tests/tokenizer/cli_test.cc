// `lmstack tokenize`, `lmstack train-tokenizer` and `lmstack bench tokenizer`, end to end
// through the built binary.
#include <gtest/gtest.h>

#include "lmstack/core/json.h"
#include "tok_test_util.h"

namespace lmstack::tokenizer {
namespace {

using test::data_path;

int lmstack(const std::string& args, std::string* out) {
  return lmstack::test::run_command(lmstack::test::lmstack_binary() + " " + args, out);
}

std::string cl100k() { return "--tokenizer " + data_path("cl100k_base.tiktoken"); }

TEST(Cli, TokenizeFormats) {
  std::string out;
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text 'Hello world'", &out), 0) << out;
  EXPECT_EQ(out, "9906 1917\n");
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text 'Hello world' --format tokens", &out), 0);
  EXPECT_EQ(out, "\"Hello\" \" world\"\n");
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text 'Hello world' --format count", &out), 0);
  EXPECT_EQ(out, "2\n");
  ASSERT_EQ(lmstack("tokenize --tokenizer " + data_path("gpt2") + " --text 'Hello world'", &out),
            0);
  EXPECT_EQ(out, "15496 995\n");
}

TEST(Cli, EmptyTextAndDirectoryInputs) {
  std::string out;
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text '' --format count", &out), 0) << out;
  EXPECT_EQ(out, "0\n");
  // A directory is an error naming it, not an empty text (read_file serves every command).
  const std::string dir = lmstack::test::temp_dir("cli_dir_input");
  for (const std::string& cmd :
       {"tokenize " + cl100k() + " --file " + dir,
        "train-tokenizer --input " + dir + " --vocab-size 300 --out " + dir + "/t.json"}) {
    EXPECT_NE(lmstack(cmd, &out), 0) << cmd;
    EXPECT_NE(out.find(dir + ": is a directory"), std::string::npos) << cmd << ": " << out;
  }
}

TEST(Cli, TokenizeLinesStatsAndJson) {
  const std::string dir = lmstack::test::temp_dir("cli_tok");
  const std::string f = dir + "/in.txt";
  write_file_atomic(f, "one two\n\xE4\xB8\xAD\xE6\x96\x87\n");
  std::string out;
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --file " + f + " --lines", &out), 0) << out;
  EXPECT_EQ(test::split_lines(out).size(), 2u);
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --file " + f + " --stats --json", &out), 0);
  const Json j = parse_json(out, "out");
  EXPECT_EQ(j["stats"]["words"], 3);
  EXPECT_EQ(j["stats"]["cjk_chars"], 2);
  EXPECT_EQ(j["stats"]["bytes"], 15);
  EXPECT_EQ(j["ids"].size(), j["tokens"].get<size_t>());
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --file " + f + " --stats", &out), 0);
  EXPECT_NE(out.find("tokens/CJK char"), std::string::npos) << out;
}

TEST(Cli, TokenizeSpecialModes) {
  std::string out;
  EXPECT_EQ(lmstack("tokenize " + cl100k() + " --text 'a<|endoftext|>'", &out), 1);
  EXPECT_NE(out.find("special token '<|endoftext|>' at byte 1"), std::string::npos) << out;
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text 'a<|endoftext|>' --special allow", &out), 0);
  EXPECT_EQ(out, "64 100257\n");
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --text 'a<|endoftext|>' --special text", &out), 0);
  EXPECT_EQ(out.find("100257"), std::string::npos);
}

TEST(Cli, TokenizeInvalidUtf8FileIsEncodedAsBytes) {
  const std::string dir = lmstack::test::temp_dir("cli_bad");
  const std::string f = dir + "/bad.bin";
  const std::string bytes = "caf\xE9 \xFF\xFE ok\n";
  write_file_atomic(f, bytes);
  std::string out;
  ASSERT_EQ(lmstack("tokenize " + cl100k() + " --file " + f + " --json", &out), 0) << out;
  EXPECT_NE(out.find("3 invalid UTF-8 byte(s), the first at byte 3"), std::string::npos) << out;
  const Json j = parse_json(out.substr(out.find('{')), "out");
  const auto ids = j["ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(test::cached("cl100k_base").decode(ids), bytes);
}

TEST(Cli, TrainTokenizerThenTokenize) {
  const std::string dir = lmstack::test::temp_dir("cli_train");
  std::string out;
  ASSERT_EQ(lmstack("train-tokenizer --input " + data_path("fuzz_cases.txt") +
                        " --vocab-size 600 --pattern o200k --special '<|endoftext|>,<|x|>' --out " +
                        dir + "/t.json",
                    &out),
            0)
      << out;
  EXPECT_NE(out.find("vocabulary   600 tokens"), std::string::npos) << out;
  ASSERT_EQ(
      lmstack("tokenize --tokenizer " + dir + "/t.json --text 'a<|x|>' --special allow", &out), 0)
      << out;
  EXPECT_EQ(out, "97 599\n");
  EXPECT_NE(lmstack("train-tokenizer --input " + dir + "/missing.txt --vocab-size 300 --out " +
                        dir + "/u.json",
                    &out),
            0);
  EXPECT_NE(out.find("missing.txt"), std::string::npos) << out;
}

TEST(Cli, BenchTokenizer) {
  std::string out;
  ASSERT_EQ(lmstack("bench tokenizer --tokenizer " + data_path("o200k_base.tiktoken") + " --file " +
                        data_path("fuzz_cases.txt") + " --threads 2 --runs 2 --json",
                    &out),
            0)
      << out;
  const Json j = parse_json(out, "bench output");
  EXPECT_GT(j["mb_s"].get<double>(), 0);
  EXPECT_GT(j["mb_per_cpu_s"].get<double>(), 0);
  EXPECT_GT(j["warm_mb_per_cpu_s"].get<double>(), 0);
  EXPECT_GT(j["batch"]["mb_s"].get<double>(), 0);
  EXPECT_EQ(j["tokens"], 7096) << "o200k tokens of fuzz_cases.txt as one text (tiktoken)";
}

}  // namespace
}  // namespace lmstack::tokenizer
