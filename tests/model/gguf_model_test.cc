// GGUF models written by llama.cpp's gguf-py (tests/data/model/gguf, tools/ref/gen_gguf_golden.py)
// load into the same model lmstack builds from the seeded Hugging Face directory: F32 logits
// equal, F16 logits equal the F16 directory's (llama: Q/K rows un-permuted, Llama 3 RoPE scaling
// recovered from rope_freqs.weight), Q8_0/Q4_0 tensors byte-identical to kernels::quantize_row of
// the HF weights with logits close; malformed files are refused naming the key or tensor.
#include "lmstack/model/gguf_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "gguf_test_util.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"

namespace lmstack::model {
namespace {

using gguf_test::golden;
using gguf_test::logits_of;
using gguf_test::make_reference;
using gguf_test::max_abs;
using gguf_test::sample_tokens;

Json golden_config(const std::string& name) {
  return read_json_file(golden(name + ".config.json"));
}

void expect_same_shape_config(const ModelConfig& got, const ModelConfig& want) {
  EXPECT_EQ(got.arch == Arch::kMistral ? Arch::kLlama : got.arch, want.arch);
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.hidden_size, want.hidden_size);
  EXPECT_EQ(got.intermediate_size, want.intermediate_size);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.num_heads, want.num_heads);
  EXPECT_EQ(got.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(got.head_dim, want.head_dim);
  EXPECT_EQ(got.max_position, want.max_position);
  EXPECT_FLOAT_EQ(got.norm_eps, want.norm_eps);
  EXPECT_FLOAT_EQ(got.rope_theta, want.rope_theta);
  EXPECT_EQ(got.tie_word_embeddings, want.tie_word_embeddings);
  EXPECT_EQ(got.qkv_bias, want.qkv_bias);
  EXPECT_EQ(got.qk_norm, want.qk_norm);
  EXPECT_EQ(got.rope_scaling.type, want.rope_scaling.type);
}

void expect_logits_equal(const std::string& gguf_name, DType ref_dtype, double tol) {
  SCOPED_TRACE(gguf_name);
  const std::string stem = gguf_name.substr(0, gguf_name.size() - 5);
  const ModelDir ref = make_reference(golden_config(stem), ref_dtype, "ref_" + stem);
  const ModelDir g = load_model_dir(golden(gguf_name));
  expect_same_shape_config(g.config, ref.config);
  const std::vector<float> want = logits_of(ref.config, ref.weights, sample_tokens());
  const std::vector<float> got = logits_of(g.config, g.weights, sample_tokens());
  EXPECT_TRUE(test::all_close(got, want, 0, tol * max_abs(want)));
}

TEST(GgufModel, F32GoldenEqualsTheHfModel) {
  expect_logits_equal("qwen2_f32_bpe.gguf", DType::kF32, 1e-6);
}

TEST(GgufModel, F16GoldensEqualTheHfModelsStoredInF16) {
  // llama: interleaved Q/K rows and rope_freqs.weight; gpt2: fused attn_qkv, LayerNorm biases.
  expect_logits_equal("llama_f16_spm.gguf", DType::kF16, 1e-5);
  // gpt2's biases are random: F32 in the GGUF (llama.cpp keeps 1-D tensors F32), rounded to
  // F16 in the directory, a ~1e-4 relative difference in the logits.
  expect_logits_equal("gpt2_f16.gguf", DType::kF16, 1e-3);
  const ModelDir g = load_model_dir(golden("llama_f16_spm.gguf"));
  EXPECT_EQ(g.config.rope_scaling.type, "llama3");
  EXPECT_FLOAT_EQ(g.config.rope_scaling.factor, 4.0f);
  EXPECT_EQ(g.tokenizer_path, golden("llama_f16_spm.gguf"));
  EXPECT_TRUE(g.weights.layers[0].wv.is_mapped());   // zero-copy
  EXPECT_FALSE(g.weights.layers[0].wq.is_mapped());  // un-permuted copy
}

// Every quantized matrix of the GGUF equals lmstack's quantize_row of the HF weights (gguf-py
// and kernels/quant.h are both bit-exact ports of ggml's Q8_0/Q4_0 reference quantizers).
void expect_bytes_match_quantizer(const ModelWeights& g, const ModelWeights& ref) {
  auto check = [](const Tensor& q, const Tensor& f32, const char* what) {
    ASSERT_TRUE(is_quantized(q.dtype())) << what;
    ASSERT_EQ(q.shape(), f32.shape()) << what;
    std::vector<uint8_t> row(static_cast<size_t>(q.row_bytes()));
    for (int64_t r = 0; r < q.dim(0); ++r) {
      kernels::quantize_row(q.dtype(), f32.data<float>() + r * f32.dim(1), row.data(), f32.dim(1));
      ASSERT_EQ(
          std::memcmp(row.data(), static_cast<const uint8_t*>(q.raw_data()) + r * q.row_bytes(),
                      row.size()),
          0)
          << what << " row " << r;
    }
  };
  check(g.embed, ref.embed, "token_embd");
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerWeights &a = g.layers[i], &b = ref.layers[i];
    check(a.wq, b.wq, "attn_q");
    check(a.wk, b.wk, "attn_k");
    check(a.wv, b.wv, "attn_v");
    check(a.wo, b.wo, "attn_output");
    check(a.w_gate, b.w_gate, "ffn_gate");
    check(a.w_up, b.w_up, "ffn_up");
    check(a.w_down, b.w_down, "ffn_down");
  }
}

TEST(GgufModel, QuantizedGoldensHoldGgmlBytesAndCloseLogits) {
  // Bounds: max |logit difference| relative to max |logit| of the f32 model, measured 0.4%
  // (Q8_0) and 4% (Q4_0) on these models; the bounds leave 3x room.
  for (const auto& [name, stem, bound] : {std::tuple{"qwen3_q8_0.gguf", "qwen3_q8_0", 0.015},
                                          std::tuple{"qwen2_q4_0.gguf", "qwen2_q4_0", 0.15}}) {
    SCOPED_TRACE(name);
    const ModelDir ref =
        make_reference(golden_config(stem), DType::kF32, "ref_" + std::string(stem));
    const ModelDir g = load_model_dir(golden(name));
    expect_same_shape_config(g.config, ref.config);
    expect_bytes_match_quantizer(g.weights, ref.weights);
    const std::vector<float> want = logits_of(ref.config, ref.weights, sample_tokens());
    const std::vector<float> got = logits_of(g.config, g.weights, sample_tokens());
    EXPECT_TRUE(test::all_close(got, want, 0, bound * max_abs(want)));
  }
}

// A copy of golden `base` without `drop_key` / `drop_tensor`, plus what `extra` adds.
std::string rewrite(const std::string& base, const std::string& name, const std::string& drop_key,
                    const std::string& drop_tensor,
                    const std::function<void(GgufWriter&)>& extra = nullptr) {
  const GgufFile src(golden(base));
  GgufWriter w;
  for (const auto& [key, value] : src.metadata())
    if (key != drop_key) w.set(key, value);
  for (const GgufTensorInfo& t : src.tensors())
    if (t.name != drop_tensor) w.add_tensor(t.name, src.tensor(t.name));
  if (extra) extra(w);
  const std::string path = test::temp_dir("gguf_bad") + "/" + name + ".gguf";
  w.write(path);
  return path;
}

template <class E>
void expect_refused(const std::string& path, const std::string& what) {
  try {
    (void)load_model_dir(path);
    ADD_FAILURE() << path << " accepted";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(GgufModel, RefusesMissingOrInconsistentContent) {
  const std::string base = "qwen2_f32_bpe.gguf";
  expect_refused<FormatError>(rewrite(base, "nokey", "qwen2.block_count", ""),
                              "metadata key 'qwen2.block_count' is missing");
  expect_refused<FormatError>(rewrite(base, "notensor", "", "blk.0.ffn_up.weight"),
                              "missing tensor 'blk.0.ffn_up.weight'");
  expect_refused<FormatError>(
      rewrite(base, "extra", "", "",
              [](GgufWriter& w) {
                w.add_tensor("blk.1.attn_q.weight", Tensor::zeros(Shape{64, 64}, DType::kF32));
              }),
      "tensor 'blk.1.attn_q.weight' is not part of a qwen2 model");
  expect_refused<FormatError>(rewrite(base, "shape", "", "blk.0.attn_v.bias",
                                      [](GgufWriter& w) {
                                        w.add_tensor("blk.0.attn_v.bias",
                                                     Tensor::zeros(Shape{31}, DType::kF32));
                                      }),
                              "tensor 'blk.0.attn_v.bias' has shape [31]");
  expect_refused<ConfigError>(
      rewrite(base, "arch", "", "",
              [](GgufWriter& w) { w.set("general.architecture", GgufValue::string("mamba")); }),
      "general.architecture 'mamba' is not supported");
  expect_refused<FormatError>(
      rewrite(base, "eps", "", "",
              [](GgufWriter& w) {
                w.set("qwen2.attention.layer_norm_rms_epsilon", GgufValue::string("tiny"));
              }),
      "'qwen2.attention.layer_norm_rms_epsilon' is string, expected a number");
  expect_refused<ConfigError>(
      rewrite(base, "rotary", "", "",
              [](GgufWriter& w) { w.set("qwen2.rope.dimension_count", GgufValue::u32(8)); }),
      "partial rotary");
  expect_refused<ConfigError>(
      rewrite(
          "llama_f16_spm.gguf", "ropefreqs", "", "rope_freqs.weight",
          [](GgufWriter& w) {
            w.add_tensor("rope_freqs.weight", Tensor::from_f32(Shape{8}, {1, 3, 1, 2, 1, 1, 1, 1}));
          }),
      "not a Llama 3 RoPE scaling table");
}

TEST(GgufModel, WriterReproducesGgufPyBytes) {
  // Keys and tensors copied in file order: lmstack's writer must produce gguf-py's exact bytes
  // (header, value encodings, tensor infos, offsets, padding).
  for (const char* name : {"llama_f16_spm.gguf", "qwen2_q4_0.gguf", "gpt2_f16.gguf"}) {
    const GgufFile src(golden(name));
    GgufWriter w;
    for (const auto& [key, value] : src.metadata()) w.set(key, value);
    for (const GgufTensorInfo& t : src.tensors()) w.add_tensor(t.name, src.tensor(t.name));
    EXPECT_TRUE(w.serialize() == read_file(golden(name))) << name;
  }
}

TEST(GgufModel, RopeRowPermutationIsLlamaCppsAndInverts) {
  // One head of dim 4 over 1 column: HF rows (0, 1 | 2, 3) -> GGUF pairs (0, 2), (1, 3).
  const Tensor hf = Tensor::from_f32(Shape{4, 1}, {0, 1, 2, 3});
  const Tensor g = detail::permute_rope_rows(hf, 1, false);
  EXPECT_EQ(g.to_f32_vector(), (std::vector<float>{0, 2, 1, 3}));
  std::vector<float> v(8 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const Tensor m = Tensor::from_f32(Shape{8, 6}, v);
  EXPECT_EQ(
      detail::permute_rope_rows(detail::permute_rope_rows(m, 2, false), 2, true).to_f32_vector(),
      v);
}

TEST(GgufModel, Llama3RopeScalingIsRecoveredFromItsTable) {
  struct Case {
    int head_dim;
    float theta, factor, low, high;
    int orig;
  };
  for (const Case& k : {Case{64, 500000, 32, 1, 4, 8192}, Case{128, 500000, 8, 1, 4, 8192},
                        Case{16, 10000, 4, 1, 4, 64}, Case{16, 10000, 4, 1, 4, 4096},
                        Case{32, 10000, 2, 1, 2, 200}}) {
    RopeScaling s;
    s.type = "llama3";
    s.factor = k.factor;
    s.low_freq_factor = k.low;
    s.high_freq_factor = k.high;
    s.original_max_position = k.orig;
    const std::vector<float> table = detail::llama3_rope_factors(s, k.head_dim, k.theta);
    const RopeScaling fit = detail::llama3_scaling_from_factors(table, k.head_dim, k.theta, "t");
    std::vector<float> want(static_cast<size_t>(k.head_dim / 2)), got(want.size());
    kernels::rope_inv_freq(want.data(), k.head_dim, k.theta, "llama3", s.factor, s.low_freq_factor,
                           s.high_freq_factor, s.original_max_position);
    kernels::rope_inv_freq(got.data(), k.head_dim, k.theta, fit.type.c_str(), fit.factor,
                           fit.low_freq_factor, fit.high_freq_factor, fit.original_max_position);
    EXPECT_TRUE(test::all_close(got, want, 1e-5, 0))
        << "head_dim " << k.head_dim << " orig " << k.orig;
  }
}

}  // namespace
}  // namespace lmstack::model
