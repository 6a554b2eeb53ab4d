// `train-tokenizer --out DIR` against transformers 5.24 (tests/data/tokenizer/trained/,
// tools/ref/gen_trained_tokenizer_hf.py): retraining with the same arguments writes the same
// bytes, and lmstack reads the bos/eos/pad tokens, their ids and the ids of each text as
// AutoTokenizer does. Then the rest of the pipeline takes the directory: prepare-data finds its
// EOS (and --eos names another), init-model --tokenizer DIR sizes the vocabulary from it. The
// role rule and bad --eos/--bos/--pad values are checked on the library call.
#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/tokenizer/bpe_trainer.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::tokenizer {
namespace {

const std::string kDir = "tests/data/tokenizer/trained/";

int lmstack(const std::string& args, std::string* out) {
  return test::run_command(test::lmstack_binary() + " " + args, out);
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

std::string train_args(const Json& c) {
  std::string args = "train-tokenizer --input " +
                     test::source_path("tests/data/tokenizer/fuzz_cases.txt") + " --vocab-size 400";
  for (const Json& a : c["args"]) args += " " + quote(a.get<std::string>());
  return args;
}

std::optional<int32_t> id_or_none(const Json& v) {
  return v.is_null() ? std::nullopt : std::optional<int32_t>(v.get<int32_t>());
}

TEST(TrainedTokenizer, DirectoryLoadsAsTransformersReadsIt) {
  const Json goldens = read_json_file(test::source_path(kDir + "goldens.json"));
  ASSERT_EQ(goldens.size(), 3u);
  for (const Json& c : goldens) {
    const std::string name = c["case"].get<std::string>();
    SCOPED_TRACE(name);
    const std::string dir = test::temp_dir("trained_" + name);
    std::string out;
    ASSERT_EQ(lmstack(train_args(c) + " --out " + dir, &out), 0) << out;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
      EXPECT_EQ(read_file(path_join(dir, file)),
                read_file(test::source_path(kDir + name + "/" + file)))
          << file << " differs from the committed one: regenerate the goldens";
    const Tokenizer tok = Tokenizer::load(dir);
    EXPECT_EQ(tok.vocab_size(), c["vocab_size"].get<int>());
    EXPECT_EQ(tok.eos_token(), c["eos_token"].get<std::string>());
    EXPECT_EQ(tok.eos_id(), id_or_none(c["eos_token_id"]));
    EXPECT_EQ(tok.bos_token(), c["bos_token"].get<std::string>());
    EXPECT_EQ(tok.bos_id(), id_or_none(c["bos_token_id"]));
    const Json config = read_json_file(path_join(dir, "tokenizer_config.json"));
    EXPECT_EQ(config["pad_token"], c["pad_token"]);
    for (size_t i = 0; i < c["texts"].size(); ++i)
      EXPECT_EQ(tok.encode(c["texts"][i].get<std::string>(), SpecialMode::kAllow),
                c["ids"][i].get<std::vector<int32_t>>())
          << c["texts"][i];
  }
}

TEST(TrainedTokenizer, PrepareDataAndInitModelTakeTheDirectory) {
  const std::string dir = test::temp_dir("trained_feeds");
  const std::string corpus = test::source_path("tests/data/tokenizer/fuzz_cases.txt");
  std::string out;
  ASSERT_EQ(
      lmstack("train-tokenizer --input " + corpus +
                  " --vocab-size 300 --special '<|endoftext|>,<|im_end|>' --out " + dir + "/tok",
              &out),
      0)
      << out;
  ASSERT_EQ(lmstack("prepare-data --tokenizer " + dir + "/tok --input " + corpus + " --out " + dir +
                        "/data",
                    &out),
            0)
      << out;
  EXPECT_EQ(read_json_file(dir + "/data/data.json")["eos_id"], 298);  // <|endoftext|>
  // A lone tokenizer.json has no tokenizer_config.json: --eos names the separator.
  ASSERT_EQ(lmstack("train-tokenizer --input " + corpus + " --vocab-size 300 --special " +
                        "'<|endoftext|>,<|im_end|>' --out " + dir + "/t.json",
                    &out),
            0)
      << out;
  EXPECT_FALSE(file_exists(dir + "/tokenizer_config.json"));
  EXPECT_NE(lmstack("prepare-data --tokenizer " + dir + "/t.json --input " + corpus + " --out " +
                        dir + "/d2",
                    &out),
            0);
  EXPECT_NE(out.find("--eos TOKEN"), std::string::npos) << out;
  ASSERT_EQ(lmstack("prepare-data --tokenizer " + dir + "/t.json --eos '<|im_end|>' --input " +
                        corpus + " --out " + dir + "/d2",
                    &out),
            0)
      << out;
  EXPECT_EQ(read_json_file(dir + "/d2/data.json")["eos_id"], 299);
  EXPECT_NE(lmstack("prepare-data --tokenizer " + dir + "/t.json --eos '<nope>' --input " + corpus +
                        " --out " + dir + "/d3",
                    &out),
            0);
  EXPECT_NE(out.find("--eos '<nope>' is not a token"), std::string::npos) << out;
  // init-model adopts the trained vocabulary (300 tokens instead of the preset's size).
  ASSERT_EQ(
      lmstack("init-model --preset tiny-llama --tokenizer " + dir + "/tok --out " + dir + "/model",
              &out),
      0)
      << out;
  EXPECT_EQ(read_json_file(dir + "/model/config.json")["vocab_size"], 300);
  EXPECT_EQ(read_json_file(dir + "/model/config.json")["eos_token_id"], 298);
  EXPECT_EQ(read_file(dir + "/model/tokenizer.json"), read_file(dir + "/tok/tokenizer.json"));
}

TEST(TrainedTokenizer, RolesFollowTheStatedRule) {
  const auto roles = [](std::vector<std::string> specials, SpecialTokenRoles given = {}) {
    const SpecialTokenRoles r = pick_special_roles(specials, given);
    return r.bos + "|" + r.eos + "|" + r.pad;
  };
  EXPECT_EQ(roles({}), "||");
  EXPECT_EQ(roles({"<|im_start|>", "<|im_end|>"}), "<|im_end|>|<|im_end|>|");
  EXPECT_EQ(roles({"<unk>", "<s>", "</s>", "<pad>"}), "<s>|</s>|<pad>");
  EXPECT_EQ(roles({"<a>", "<b>"}), "<a>|<a>|");  // no known name: the first special
  EXPECT_EQ(roles({"<a>", "<b>"}, {"", "<b>", "<a>"}), "<b>|<b>|<a>");
  try {
    pick_special_roles({"<a>"}, {"", "<z>", ""});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--eos '<z>'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmstack::tokenizer
