// init-model: every tiny preset written through the CLI loads back with the expected shapes;
// weights are the seeded normals fill_normal() defines (so any machine reproduces them), norms
// are 1/0, GPT-2 is stored in HF's Conv1D layout, the tokenizer loads in lmstack's tokenizer
// and round-trips bytes, and bad options fail with a clear message.
#include "lmstack/model/init_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lmstack/core/file.h"
#include "lmstack/core/half.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/presets.h"
#include "lmstack/tokenizer/chat_template.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

std::string init(const std::string& args, int* status = nullptr) {
  std::string out;
  const int rc = test::run_command(test::lmstack_binary() + " init-model " + args, &out);
  if (status)
    *status = rc;
  else
    EXPECT_EQ(rc, 0) << out;
  return out;
}

TEST(InitModel, EveryTinyPresetLoadsBack) {
  for (const std::string arch : {"llama", "mistral", "qwen2", "qwen3", "gpt2"}) {
    SCOPED_TRACE(arch);
    const std::string dir = test::temp_dir("init_" + arch);
    init("--preset tiny-" + arch + " --dtype f32 --seed 7 --threads 2 --out " + dir);
    const ModelDir m = load_model_dir(dir);
    const ModelPreset p = find_model_preset("tiny-" + arch, "");
    EXPECT_EQ(m.config.to_json()["architectures"], p.config["architectures"]);
    EXPECT_EQ(m.config.dtype, DType::kF32);
    EXPECT_EQ(m.weights.layers.size(), 2u);
    EXPECT_EQ(m.config.bos_token_id, 256);
    EXPECT_FALSE(m.tokenizer_path.empty());
    EXPECT_FALSE(m.generation_config.is_null());
    EXPECT_EQ(m.weights.bytes(), m.config.num_parameters() * 4);
    // Norms are exactly 1, and the weights are the documented normals.
    for (float v : m.weights.final_norm.to_f32_vector()) ASSERT_EQ(v, 1.0f);
    const Tensor& wv = m.weights.layers[1].wv;
    if (m.config.arch != Arch::kGpt2) {
      std::vector<float> want(static_cast<size_t>(wv.numel()));
      fill_normal(7, "model.layers.1.self_attn.v_proj.weight", 0.02f, want.data(), wv.numel());
      EXPECT_EQ(wv.to_f32_vector(), want);
    }
    double sum2 = 0;
    for (float v : m.weights.embed.to_f32_vector()) sum2 += double(v) * v;
    EXPECT_NEAR(std::sqrt(sum2 / static_cast<double>(m.weights.embed.numel())), 0.02, 0.001);
  }
}

TEST(InitModel, Gpt2IsWrittenInConv1dLayout) {
  const std::string dir = test::temp_dir("init_gpt2_layout");
  init("--preset tiny-gpt2 --dtype bf16 --out " + dir);
  const SafetensorsFile f(path_join(dir, "model.safetensors"));
  EXPECT_EQ(f.entry("transformer.h.0.attn.c_attn.weight").shape, (std::vector<int64_t>{64, 192}));
  EXPECT_EQ(f.entry("transformer.h.0.mlp.c_proj.weight").shape, (std::vector<int64_t>{256, 64}));
  EXPECT_FALSE(f.contains("lm_head.weight"));  // tied to wte
  EXPECT_EQ(f.entry("transformer.wte.weight").dtype_name, "BF16");
  const Json config = read_json_file(path_join(dir, "config.json"));
  EXPECT_EQ(config["model_type"], "gpt2");
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  // Conv1D element [i, j] of c_attn is the seeded normal at flat index i * 3C + j.
  std::vector<float> want(64 * 192);
  fill_normal(0, "transformer.h.0.attn.c_attn.weight", 0.02f, want.data(), 64 * 192);
  const ModelDir m = load_model_dir(dir);
  const Tensor& wk = m.weights.layers[0].wk;
  for (int64_t j : {0, 5, 63})
    for (int64_t i : {0, 17, 63})
      EXPECT_EQ(wk.at({j, i}), bf16_to_f32(f32_to_bf16(want[i * 192 + 64 + j])));
}

TEST(InitModel, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string a = test::temp_dir("init_seed_a"), b = test::temp_dir("init_seed_b"),
                    c = test::temp_dir("init_seed_c");
  init("--preset tiny-qwen2 --seed 3 --threads 1 --out " + a);
  init("--preset tiny-qwen2 --seed 3 --threads 2 --out " + b);
  init("--preset tiny-qwen2 --seed 4 --out " + c);
  const std::string fa = read_file(path_join(a, "model.safetensors"));
  EXPECT_EQ(fa, read_file(path_join(b, "model.safetensors")));
  EXPECT_NE(fa, read_file(path_join(c, "model.safetensors")));
}

TEST(InitModel, TokenizerLoadsAndRoundTrips) {
  const std::string dir = test::temp_dir("init_tok");
  init("--preset tiny-llama --out " + dir);
  const auto tok = tokenizer::Tokenizer::load(dir);
  const std::string text = "Hello, wörld! 123 \xf0\x9f\x98\x80\n\ttabs";
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids.size(), text.size());  // no merges: one token per byte
  EXPECT_EQ(ids[0], 'H');
  EXPECT_EQ(tok.decode(ids), text);
  const std::vector<int32_t> special =
      tok.encode("<|im_start|>user<|im_end|>", tokenizer::SpecialMode::kAllow);
  EXPECT_EQ(special.front(), 257);
  EXPECT_EQ(special.back(), 258);
  const auto chat = tokenizer::ChatTemplate::parse(tok.chat_template());
  const Json messages = Json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(tokenizer::render_chat(chat, messages, true, "<|endoftext|>", "<|im_end|>"),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(read_json_file(path_join(dir, "generation_config.json"))["eos_token_id"],
            Json::array({256, 258}));
}

TEST(InitModel, ConfigFileArchAndTokenizerCopy) {
  const std::string src = test::temp_dir("init_cfg_src");
  Json cfg = find_model_preset("tiny-llama", "").config;
  cfg.erase("architectures");
  write_file_atomic(path_join(src, "config.json"), cfg.dump());
  const std::string dir = test::temp_dir("init_cfg");
  init("--arch qwen3 --config " + path_join(src, "config.json") + " --out " + dir);
  EXPECT_EQ(load_model_dir(dir).config.arch, Arch::kQwen3);
  // Re-targeting a tiny preset, and copying the tokenizer of another model.
  const std::string g = test::temp_dir("init_retarget");
  init("--preset tiny --arch gpt2 --tokenizer " + path_join(dir, "tokenizer.json") + " --out " + g);
  const ModelDir m = load_model_dir(g);
  EXPECT_EQ(m.config.arch, Arch::kGpt2);
  EXPECT_EQ(m.config.hidden_size, 64);
  EXPECT_EQ(m.config.eos_token_ids, std::vector<int>{258});  // <|im_end|> from the copied config
  EXPECT_EQ(read_file(path_join(g, "tokenizer.json")), read_file(path_join(dir, "tokenizer.json")));
}

TEST(InitModel, BadOptionsFailClearly) {
  const std::string dir = test::temp_dir("init_bad");
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"--preset nope --out " + dir, "unknown preset 'nope'"},
      {"--preset gpt2 --arch llama --out " + dir, "applies only to --config or tiny presets"},
      {"--preset tiny-llama --arch falcon --out " + dir, "unknown --arch 'falcon'"},
      {"--preset tiny-llama --dtype q4_0 --out " + dir, "--dtype must be f32, bf16 or f16"},
      {"--preset tiny-llama", "--out DIR is required"},
      {"--out " + dir, "exactly one of --preset or --config"},
      {"--config /nonexistent/config.json --out " + dir, "/nonexistent/config.json"},
  };
  for (const Case& c : cases) {
    int status = 0;
    const std::string out = init(c.args, &status);
    EXPECT_NE(status, 0) << c.args;
    EXPECT_NE(out.find(c.needle), std::string::npos) << c.args << "\n" << out;
  }
  // A tokenizer larger than the model's vocabulary.
  const std::string small = test::temp_dir("init_small_vocab");
  Json cfg = find_model_preset("tiny-qwen2", "").config;
  cfg["vocab_size"] = 200;
  write_file_atomic(path_join(small, "config.json"), cfg.dump());
  int status = 0;
  const std::string out =
      init("--config " + path_join(small, "config.json") + " --out " + dir, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("vocab_size is 200"), std::string::npos) << out;
}

TEST(InitModel, ListsPresetsWithParameterCounts) {
  const std::string out = init("--list-presets");
  for (const char* name : {"gpt2", "smollm-135m", "smollm-360m", "tinyllama-1.1b", "qwen2.5-0.5b",
                           "llama-3.2-1b", "qwen3-0.6b", "tiny-gpt2"})
    EXPECT_NE(out.find(name), std::string::npos) << name;
  EXPECT_NE(out.find("124439808"), std::string::npos);   // GPT-2 small
  EXPECT_NE(out.find("1235814400"), std::string::npos);  // Llama 3.2 1B
  EXPECT_NE(out.find("1100048384"), std::string::npos);  // TinyLlama 1.1B
}

}  // namespace
}  // namespace lmstack::model
