// GGUF for the mixture-of-experts and latent-attention models (llama.cpp's "llama" with
// experts, "qwen2moe", "qwen3moe", "deepseek2"). The goldens in tests/data/model/gguf_moe were
// written by gguf-py from the transformers checkpoints in tests/data/model/moe_compat
// (tools/ref/gen_gguf_moe_golden.py): loading one gives transformers' logits (1e-4 of their
// scale, as moe_compat_test.cc) and its 32 greedy tokens. lmstack convert of the same
// checkpoints writes the golden's keys, tensor names, shapes and types (bf16: the same bytes),
// and loads back to the directory's logits exactly (f32). Q8_0 experts (3-D quantized stacks)
// match gguf-py's blocks and stay within moe_quantize_test.cc's Q8_0 bound. Older DeepSeek
// files with a whole attn_kv_b load to the same logits. Keys lmstack does not run and YaRN are
// refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "lmstack/core/npy.h"
#include "lmstack/model/generate.h"
#include "lmstack/model/gguf_model.h"
#include "logits_util.h"
#include "test_util.h"

namespace lmstack::model {
namespace {

using test_logits::rel_rms;

const char* kRegenerate = "regenerate: tools/ref/gen_gguf_moe_golden.py (docstring)";

std::string case_dir(const std::string& name) {
  return test::source_path("tests/data/model/moe_compat/" + name);
}
std::string golden(const std::string& name) {
  return test::source_path("tests/data/model/gguf_moe/" + name + ".gguf");
}
std::vector<int32_t> prompt_of(const std::string& name) {
  return read_npy(case_dir(name) + "/tokens.npy").i32;
}

using test::max_abs;
using test_logits::logits_of;

std::string convert(const ModelDir& m, const std::string& name, DType type) {
  const std::string path = test::temp_dir("gguf_moe") + "/" + name + ".gguf";
  GgufWriteOptions o;
  o.matrix_dtype = type;
  o.num_threads = 2;
  // The checkpoints have no tokenizer; the golden (no tokenizer.* keys either) stands in.
  write_gguf_model(path, m.config, m.weights, golden("mixtral_bf16"), o);
  return path;
}

// The {arch}.* keys of a file, each with its value type and value as text (general.* differ
// by design: name, file_type).
std::map<std::string, std::string> arch_keys(const GgufFile& f) {
  std::map<std::string, std::string> out;
  const std::string a = f.get_string("general.architecture") + ".";
  for (const auto& [key, v] : f.metadata()) {
    if (key.rfind(a, 0) != 0) continue;
    const bool real = v.type == GgufValueType::kF32 || v.type == GgufValueType::kF64;
    out[key] = std::string(gguf_value_type_name(v.type)) + " " +
               (real ? std::to_string(static_cast<float>(v.number)) : std::to_string(v.integer));
  }
  return out;
}

// Every tensor of `mine` equals the golden's: name, ne, type and bytes.
void expect_same_tensors(const GgufFile& mine, const GgufFile& gold) {
  ASSERT_EQ(mine.tensors().size(), gold.tensors().size());
  for (const GgufTensorInfo& t : gold.tensors()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(mine.has_tensor(t.name));
    const GgufTensorInfo& m = mine.tensor_info(t.name);
    EXPECT_EQ(m.ne, t.ne);
    EXPECT_EQ(m.ggml_type, t.ggml_type);
    ASSERT_EQ(m.bytes, t.bytes);
    const Tensor a = mine.tensor(t.name), b = gold.tensor(t.name);  // const: mapped, read-only
    EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(t.bytes)));
  }
}

class GgufMoe : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufMoe, GoldenGivesTransformersLogitsAndGreedyTokens) {
  const std::string name = GetParam();
  const ModelDir g = load_model_dir(golden(name + "_bf16"));
  const ModelDir hf = load_model_dir(case_dir(name) + "/tf5_bf16");
  Json got = g.config.to_json(), want = hf.config.to_json();
  for (const char* k : {"bos_token_id", "eos_token_id"}) {  // GGUF keeps them with the tokenizer
    got.erase(k);
    want.erase(k);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(g.config.moe.sparse, hf.config.moe.sparse);
  const std::vector<int32_t> prompt = prompt_of(name);
  const NpyArray ref = read_npy(case_dir(name) + "/tf5_bf16.logits.npy");
  const std::vector<float> logits = logits_of(g.config, g.weights, prompt);
  EXPECT_TRUE(test::all_close(logits, ref.f32, 0, 1e-4 * max_abs(ref.f32))) << kRegenerate;
  ThreadPool pool(2);
  Generator gen(g.config, g.weights, pool, static_cast<int>(prompt.size()) + 32, 4);
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 32;
  EXPECT_EQ(gen.generate(prompt, greedy, {}, {}).tokens,
            read_npy(case_dir(name) + "/tf5_bf16.greedy.npy").i32)
      << kRegenerate;
}

TEST_P(GgufMoe, ConvertWritesTheGoldensLayoutAndLoadsBackExactly) {
  const std::string name = GetParam();
  const GgufFile gold(golden(name + "_bf16"));
  // bf16 from the bf16 checkpoint: every tensor as gguf-py wrote it, byte for byte.
  const std::string bf16 =
      convert(load_model_dir(case_dir(name) + "/tf5_bf16"), name + "_b", DType::kBF16);
  const GgufFile mine(bf16);
  EXPECT_EQ(mine.get_string("general.architecture"), gold.get_string("general.architecture"));
  EXPECT_EQ(arch_keys(mine), arch_keys(gold));
  expect_same_tensors(mine, gold);
  // f32 from the f32 checkpoint: the directory's logits exactly.
  const ModelDir hf = load_model_dir(case_dir(name) + "/tf457");
  const ModelDir back = load_model_dir(convert(hf, name + "_f", DType::kF32));
  EXPECT_EQ(back.config.num_parameters(), hf.config.num_parameters());
  const std::vector<int32_t> prompt = prompt_of(name);
  EXPECT_EQ(logits_of(back.config, back.weights, prompt), logits_of(hf.config, hf.weights, prompt));
}

INSTANTIATE_TEST_SUITE_P(Cases, GgufMoe,
                         ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2",
                                           "deepseek_v3"));

// Quantized 3-D expert stacks: gguf-py's Q8_0 Mixtral is within 0.04 of the f32 logits at the
// median position (relative RMS: a router whose top-k flips under the rounding moves a token
// to another expert, so neither a per-element nor an overall bound holds), and lmstack's own Q8_0
// conversion holds the same blocks (down_proj's 24-wide rows as F16, as convert falls back).
TEST(GgufMoeQuantized, Q8_0ExpertsMatchGgufPyAndStayCloseToF32) {
  const ModelDir hf = load_model_dir(case_dir("mixtral") + "/tf5");
  const std::vector<int32_t> prompt = prompt_of("mixtral");
  const std::vector<float> want = logits_of(hf.config, hf.weights, prompt);
  const ModelDir gold = load_model_dir(golden("mixtral_q8_0"));
  ASSERT_EQ(gold.weights.layers[0].moe->w_gate[1].dtype(), DType::kQ8_0);
  ASSERT_EQ(gold.weights.layers[0].moe->w_down[1].dtype(), DType::kF16);
  const std::vector<float> got = logits_of(gold.config, gold.weights, prompt);
  const auto errs = test_logits::sorted_position_errors(got, want, got.size() / prompt.size());
  EXPECT_LT(errs[errs.size() / 2], 0.04) << errs[errs.size() / 2];
  EXPECT_GT(errs.back(), 0.0);  // really quantized
  const std::string path = convert(hf, "mixtral_q", DType::kQ8_0);
  expect_same_tensors(GgufFile(path), GgufFile(golden("mixtral_q8_0")));
  const ModelDir mine = load_model_dir(path);
  EXPECT_EQ(logits_of(mine.config, mine.weights, prompt), got);
}

// DeepSeek files written before llama.cpp split kv_b_proj (2025): attn_kv_b whole, and
// key_length / value_length the per-head dims with head_count_kv = heads. The same model as
// the split golden, so the same logits.
TEST(GgufMoeMla, FilesWithTheWholeKvBLoadToo) {
  const GgufFile f(golden("deepseek_v3_bf16"));
  const ModelDir hf = load_model_dir(case_dir("deepseek_v3") + "/tf5_bf16");
  const ModelConfig& c = hf.config;
  GgufWriter w;
  for (const auto& [k, v] : f.metadata())
    if (k.find("_mla") == std::string::npos) w.set(k, v);
  w.set("deepseek2.attention.head_count_kv", GgufValue::u32(c.num_heads));
  w.set("deepseek2.attention.key_length", GgufValue::u32(c.mla.qk_head_dim()));
  w.set("deepseek2.attention.value_length", GgufValue::u32(c.mla.v_head_dim));
  for (const GgufTensorInfo& t : f.tensors())
    if (t.name.find("attn_k_b") == std::string::npos &&
        t.name.find("attn_v_b") == std::string::npos)
      w.add_tensor(t.name, f.tensor(t.name));
  for (int i = 0; i < c.num_layers; ++i)
    w.add_tensor("blk." + std::to_string(i) + ".attn_kv_b.weight",
                 hf.weights.layers[static_cast<size_t>(i)].mla->kv_b);
  const std::string path = test::temp_dir("gguf_moe_kvb") + "/old.gguf";
  w.write(path);
  const ModelDir old = load_model_dir(path), split = load_model_dir(golden("deepseek_v3_bf16"));
  EXPECT_EQ(old.config.to_json(), split.config.to_json());
  EXPECT_EQ(old.weights.layers[1].mla->kv_b.dtype(), DType::kBF16);  // viewed, not rebuilt
  const std::vector<int32_t> prompt = prompt_of("deepseek_v3");
  const std::vector<float> want = logits_of(split.config, split.weights, prompt);
  EXPECT_TRUE(
      test::all_close(logits_of(old.config, old.weights, prompt), want, 0, 1e-5 * max_abs(want)));
}

// The golden with one key added (and every tensor kept).
std::string with_key(const std::string& name, const std::string& key, GgufValue value) {
  const GgufFile f(golden(name));
  GgufWriter w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  w.set(key, std::move(value));
  for (const GgufTensorInfo& t : f.tensors()) w.add_tensor(t.name, f.tensor(t.name));
  const std::string path = test::temp_dir("gguf_moe_bad") + "/" + name + ".gguf";
  w.write(path);
  return path;
}

void expect_refused(const std::string& path, const std::string& what) {
  try {
    (void)gguf_model_config(GgufFile(path));
    FAIL() << "accepted " << what;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GgufMoeErrors, UnsupportedKeysAreRefusedByName) {
  expect_refused(
      with_key("deepseek_v3_bf16", "deepseek2.rope.scaling.type", GgufValue::string("longrope")),
      "'longrope' is not supported");
  expect_refused(with_key("deepseek_v3_bf16", "deepseek2.nextn_predict_layers", GgufValue::u32(1)),
                 "'deepseek2.nextn_predict_layers' is not supported");
  expect_refused(
      with_key("qwen2_moe_bf16", "qwen2moe.expert_chunk_feed_forward_length", GgufValue::u32(8)),
      "qwen2moe.expert_chunk_feed_forward_length");
  expect_refused(with_key("deepseek_v2_bf16", "deepseek2.expert_gating_func", GgufValue::u32(3)),
                 "expert_gating_func 3");
}

}  // namespace
}  // namespace lmstack::model
