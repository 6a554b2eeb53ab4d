// Quantization quality on a trained model, through the `lmstack` binary: the built-in default
// model (models/default; skipped with a message when absent) converted to bf16 and quantized
// to q8_0, q4_0, q4_k, int4_g128 (RTN and AWQ), each scored by `lmstack perplexity` on a
// held-out text and asked for a greedy continuation. Asserted (docs/formats/quantization.md):
// q8_0's perplexity within 1% of bf16's; every type's first greedy tokens equal bf16's; AWQ
// below RTN at int4_g128; and every quantized model is smaller than the bf16 one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

constexpr int kSameTokens = 4;  // greedy tokens that must match bf16's

struct Variant {
  std::string name, args;
};

class QuantizeQuality : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::source_path("models/default");
    if (!file_exists(model_ + "/config.json"))
      GTEST_SKIP() << "models/default is absent (train it with tools/train/train_default_model.sh)";
    dir_ = test::temp_dir("quant_quality");
  }

  Json run_json(const std::string& args) {
    std::string out;
    const int rc = test::run_command(test::lmstack_binary() + " " + args, &out, false);
    EXPECT_EQ(rc, 0) << args << "\n" << out;
    return rc == 0 ? parse_json(out, args) : Json();
  }

  double perplexity(const std::string& dir) {
    const Json j =
        run_json("perplexity -m " + dir + " --file " + held_out_ + " --ctx 256 --json -t 2");
    return j.is_object() ? j["perplexity"].get<double>() : NAN;
  }

  std::vector<int> greedy(const std::string& dir) {
    const Json j = run_json("generate -m " + dir +
                            " --prompt 'Captain, the ship' --max-tokens 8 --temperature 0 "
                            "--ignore-eos --json -t 2");
    return j.is_object() ? j["tokens"].get<std::vector<int>>() : std::vector<int>();
  }

  std::string model_, dir_;
  const std::string held_out_ = test::source_path("tests/data/model/heldout_startrek.txt");
  const std::string calib_ = test::source_path("tests/data/model/calib_linuxcookie.txt");
};

TEST_F(QuantizeQuality, PerplexityAndGreedyTokensAgainstBf16) {
  const std::vector<Variant> variants = {
      {"bf16", "--type bf16"},
      {"q8_0", "--type q8_0"},
      {"q4_0", "--type q4_0"},
      {"q4_k", "--type q4_k"},
      {"int4_g128_rtn", "--type int4-g128"},
      {"int4_g128_awq", "--type int4_g128 --method awq --calibration " + calib_},
  };
  std::map<std::string, double> ppl;
  std::map<std::string, std::vector<int>> tokens;
  std::map<std::string, uintmax_t> bytes;
  for (const Variant& v : variants) {
    const std::string out = dir_ + "/" + v.name;
    run_json("quantize -m " + model_ + " " + v.args + " --json -t 2 --out " + out);
    ppl[v.name] = perplexity(out);
    tokens[v.name] = greedy(out);
    bytes[v.name] = std::filesystem::file_size(out + "/model.safetensors");
    std::printf("%-14s ppl %.4f  (%+.2f%% vs bf16)  %.2f MB\n", v.name.c_str(), ppl[v.name],
                100 * (ppl[v.name] / ppl["bf16"] - 1), static_cast<double>(bytes[v.name]) / 1e6);
  }
  const double base = ppl["bf16"];
  ASSERT_TRUE(std::isfinite(base));
  EXPECT_LT(std::fabs(ppl["q8_0"] / base - 1), 0.01) << ppl["q8_0"] << " vs " << base;
  EXPECT_LT(ppl["int4_g128_awq"], ppl["int4_g128_rtn"]);
  ASSERT_GE(tokens["bf16"].size(), static_cast<size_t>(kSameTokens));
  const std::vector<int> want(tokens["bf16"].begin(), tokens["bf16"].begin() + kSameTokens);
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    ASSERT_GE(tokens[v.name].size(), static_cast<size_t>(kSameTokens));
    EXPECT_EQ(std::vector<int>(tokens[v.name].begin(), tokens[v.name].begin() + kSameTokens), want);
    EXPECT_GT(ppl[v.name], 1.0);
    if (v.name != "bf16") {
      EXPECT_LT(bytes[v.name], bytes["bf16"]);
    }
  }
}

}  // namespace
}  // namespace lmstack::model
