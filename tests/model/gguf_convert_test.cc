// lmstack convert round trips: a seeded HF model of every architecture written as GGUF loads
// back to the same logits (F32 and F16 equal; Q8_0 close), its tokenizer encodes like the
// directory's, a GGUF-to-GGUF conversion keeps the vocabulary, and the CLI path (convert, then
// generate --model FILE.gguf) gives the directory's greedy text. tools/ref/check_gguf.py checks
// the same files with gguf-py's reader. Sliding windows (every layer, and Qwen2's per-layer
// pattern) survive the conversion.
#include <filesystem>

#include <gtest/gtest.h>

#include "gguf_test_util.h"
#include "lmstack/core/memory.h"
#include "lmstack/model/gguf_model.h"
#include "lmstack/model/presets.h"
#include "lmstack/tokenizer/chat_template.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::model {
namespace {

using gguf_test::golden;
using gguf_test::logits_of;
using gguf_test::make_reference;
using gguf_test::max_abs;
using gguf_test::sample_tokens;

std::string convert(const ModelDir& m, const std::string& source, DType type,
                    const std::string& name) {
  const std::string path = test::temp_dir("gguf_convert") + "/" + name + ".gguf";
  GgufWriteOptions o;
  o.matrix_dtype = type;
  o.num_threads = 2;
  write_gguf_model(path, m.config, m.weights, source, o);
  return path;
}

class ConvertRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertRoundTrip, SameLogitsAfterLoading) {
  const std::string preset = GetParam();
  const Json cfg = find_model_preset(preset, "").config;
  for (const auto& [type, tol] :
       {std::pair{DType::kF32, 0.0}, std::pair{DType::kF16, 0.0}, std::pair{DType::kQ8_0, 0.02}}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    // F16 files are compared with the F16 directory (the same rounding); Q8_0 with F32.
    const DType ref_type = type == DType::kF16 ? DType::kF16 : DType::kF32;
    const ModelDir ref =
        make_reference(cfg, ref_type, preset + "_" + std::string(dtype_name(type)));
    const std::string path = convert(ref, ref.path, type, preset + dtype_name(type).data());
    const ModelDir g = load_model_dir(path);
    EXPECT_EQ(g.config.num_parameters(), ref.config.num_parameters());
    EXPECT_EQ(g.config.rope_scaling.type, ref.config.rope_scaling.type);
    const std::vector<float> want = logits_of(ref.config, ref.weights, sample_tokens());
    const std::vector<float> got = logits_of(g.config, g.weights, sample_tokens());
    EXPECT_TRUE(test::all_close(got, want, 0, tol * max_abs(want) + 1e-6 * max_abs(want)));
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, ConvertRoundTrip,
                         ::testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3",
                                           "tiny-gpt2"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// A llama GGUF's Q and K rows are un-permuted into copies (gguf_load.cc); the mapped originals
// leave the memory ledger, so the weights are held once: the file's bytes, give or take the
// pages a tensor shares with its neighbours, not the file plus a second Q and K.
TEST(GgufConvert, LlamaQAndKAreHeldOnce) {
  Json cfg = find_model_preset("tiny-llama", "").config;
  cfg["hidden_size"] = 256;  // Q and K over many pages each
  const ModelDir ref = make_reference(cfg, DType::kF32, "held_once");
  const std::string path = convert(ref, ref.path, DType::kF32, "held_once");
  const int64_t before = memory_snapshot().held(MemoryCategory::kWeights);
  const ModelDir g = load_model_dir(path);
  const int64_t held = memory_snapshot().held(MemoryCategory::kWeights) - before;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  int64_t qk_bytes = 0;
  for (const LayerWeights& l : g.weights.layers) qk_bytes += l.wq.nbytes() + l.wk.nbytes();
  const int64_t slack = 2 * 2 * 4096 * g.config.num_layers;  // two partial pages per tensor
  ASSERT_GT(qk_bytes, 4 * slack);
  EXPECT_LE(held, file_bytes + slack) << "Q and K: " << qk_bytes << " bytes";
}

TEST(GgufConvert, TokenizerEncodesLikeTheDirectory) {
  const Json cfg = find_model_preset("tiny-qwen2", "").config;
  const ModelDir ref =
      make_reference(cfg, DType::kF32, "tok_ref", golden("bpe_qwen2.tokenizer.json"));
  const std::string path = convert(ref, ref.path, DType::kF32, "tok");
  const auto a = tokenizer::Tokenizer::load(ref.path);
  const auto b = tokenizer::Tokenizer::load(path);
  const Json goldens = read_json_file(golden("tokenizer_goldens.json"));
  for (const Json& t : goldens["texts"]) {
    const std::string text = t.get<std::string>();
    EXPECT_EQ(b.encode(text, tokenizer::SpecialMode::kAllow),
              a.encode(text, tokenizer::SpecialMode::kAllow))
        << text;
  }
  // The directory has no tokenizer_config.json: bos/eos come from config.json's ids.
  EXPECT_EQ(b.bos_id(), ref.config.bos_token_id);
  ASSERT_FALSE(ref.config.eos_token_ids.empty());
  EXPECT_EQ(b.eos_id(), ref.config.eos_token_ids[0]);
  EXPECT_EQ(b.add_bos_token(), a.add_bos_token());
  const GgufFile f(path);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
}

TEST(GgufConvert, NamedChatTemplatesRoundTrip) {
  // tokenizer_config.json holds [{default}, {tool_use}] (transformers' named templates):
  // written as gguf-py does (tokenizer.chat_template + .tool_use) and read back by name.
  Json cfg = find_model_preset("tiny-llama", "").config;
  cfg["vocab_size"] = 512;
  const ModelDir ref = make_reference(
      cfg, DType::kF32, "tok_named",
      test::source_path("tests/data/tokenizer/chat_layouts/config_named/tokenizer.json"));
  const std::string path = convert(ref, ref.path, DType::kF32, "named");
  const GgufFile f(path);
  EXPECT_EQ(f.get_strings("tokenizer.chat_templates"), std::vector<std::string>{"tool_use"});
  const auto a = tokenizer::Tokenizer::load(ref.path);
  const auto b = tokenizer::Tokenizer::load(path);
  ASSERT_EQ(tokenizer::chat_templates(a).size(), 2u);
  EXPECT_EQ(tokenizer::chat_templates(b), tokenizer::chat_templates(a));
  EXPECT_EQ(b.chat_template(), a.chat_template());
}

TEST(GgufConvert, GgufToGgufKeepsVocabularyAndWeights) {
  const std::string src = golden("llama_f16_spm.gguf");
  const ModelDir m = load_model_dir(src);
  const std::string path = convert(m, src, DType::kF32, "regguf");
  const ModelDir g = load_model_dir(path);
  EXPECT_TRUE(test::all_close(logits_of(g.config, g.weights, sample_tokens()),
                              logits_of(m.config, m.weights, sample_tokens()), 0, 0));
  const auto a = tokenizer::Tokenizer::load(src);
  const auto b = tokenizer::Tokenizer::load(path);
  EXPECT_EQ(b.encode("Hello world, it's 12:34."), a.encode("Hello world, it's 12:34."));
}

TEST(GgufConvert, SlidingWindowsSurviveTheConversion) {
  Json mistral = find_model_preset("tiny-mistral", "").config;
  mistral["sliding_window"] = 5;
  Json qwen2 = find_model_preset("tiny-qwen2", "").config;
  qwen2["use_sliding_window"] = true;
  qwen2["sliding_window"] = 5;
  qwen2["max_window_layers"] = 1;
  struct Case {
    Json config;
    std::string name, key;  // Mistral is written as llama.cpp's "llama"
  };
  for (const Case& c : {Case{mistral, "swa_mistral", "llama.attention.sliding_window"},
                        Case{qwen2, "swa_qwen2", "qwen2.attention.sliding_window"}}) {
    SCOPED_TRACE(c.name);
    const ModelDir ref = make_reference(c.config, DType::kF32, c.name);
    ASSERT_NE(ref.config.attention_window(ref.config.num_layers - 1), 0);
    const std::string path = convert(ref, ref.path, DType::kF32, c.name);
    EXPECT_EQ(GgufFile(path).get_int(c.key), 5);
    const ModelDir g = load_model_dir(path);
    for (int l = 0; l < ref.config.num_layers; ++l)
      EXPECT_EQ(g.config.attention_window(l), ref.config.attention_window(l)) << "layer " << l;
    // 20 tokens, four windows: the logits past the window match only with the window applied.
    EXPECT_TRUE(test::all_close(logits_of(g.config, g.weights, sample_tokens()),
                                logits_of(ref.config, ref.weights, sample_tokens()), 0, 0));
  }
}

TEST(GgufConvert, CliConvertThenGenerate) {
  const Json cfg = find_model_preset("tiny-llama", "").config;
  const ModelDir ref = make_reference(cfg, DType::kF32, "cli_ref");
  const std::string out = test::temp_dir("gguf_cli") + "/m.gguf";
  const std::string bin = test::lmstack_binary();
  std::string log;
  ASSERT_EQ(
      test::run_command(
          bin + " convert --model " + ref.path + " --out " + out + " --type f32 --threads 2", &log),
      0)
      << log;
  EXPECT_NE(log.find("wrote " + out), std::string::npos) << log;
  const std::string gen =
      " generate --prompt 'hello there' --max-tokens 12 --temperature 0 "
      "--ignore-eos --threads 2 --model ";
  std::string from_dir, from_gguf;
  ASSERT_EQ(test::run_command(bin + gen + ref.path, &from_dir, false), 0) << from_dir;
  ASSERT_EQ(test::run_command(bin + gen + out, &from_gguf, false), 0) << from_gguf;
  EXPECT_EQ(from_gguf.substr(0, from_gguf.find('\n')), from_dir.substr(0, from_dir.find('\n')));
  std::string bad;
  EXPECT_NE(test::run_command(bin + " convert --model " + ref.path + " --out /tmp/x.bin", &bad), 0);
  EXPECT_NE(bad.find("--out must end in .gguf"), std::string::npos) << bad;
}

}  // namespace
}  // namespace lmstack::model
