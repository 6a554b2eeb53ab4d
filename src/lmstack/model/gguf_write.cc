// Writing models as GGUF (see gguf_model.h): the keys and tensor names llama.cpp's
// convert_hf_to_gguf.py writes for LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and
// GPT2LMHeadModel, with Q/K rows permuted for architecture "llama" as that converter does,
// Llama 3 scaling as a rope_freqs.weight table, and GPT-2's q/k/v fused into attn_qkv. The
// tokenizer keys come from gguf_tokenizer_keys.cc.
#include <cstring>

#include "lmstack/core/log.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/model/gguf_internal.h"
#include "lmstack/model/gguf_tokenizer_keys.h"
#include "lmstack/model/weights_internal.h"

namespace lmstack::model {
namespace {

// llama.cpp's llama_ftype for a file whose matrices are `t` (LLAMA_FTYPE_ALL_F32 = 0,
// MOSTLY_F16 = 1, MOSTLY_Q4_0 = 2, MOSTLY_Q8_0 = 7, MOSTLY_Q4_K_S = 14, MOSTLY_Q6_K = 18,
// MOSTLY_BF16 = 32).
uint32_t file_type(DType t) {
  switch (t) {
    case DType::kF16:
      return 1;
    case DType::kQ4_0:
      return 2;
    case DType::kQ8_0:
      return 7;
    case DType::kQ4_K:
      return 14;
    case DType::kQ6_K:
      return 18;
    case DType::kBF16:
      return 32;
    default:
      return 0;
  }
}

// llama.cpp's keys: <arch>.attention.sliding_window (the window W), and, when only some layers
// are windowed (Qwen2 max_window_layers, layer_types), <arch>.attention.sliding_window_pattern
// as one bool per layer (llama.cpp's swa_layers array form). llama.cpp's llama and qwen2
// graphs may ignore them; lmstack's loader reads both back.
void write_sliding_window(GgufWriter& w, const std::string& a, const ModelConfig& c) {
  if (c.sliding_window <= 0) return;
  w.set(a + ".attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(c.sliding_window)));
  if (c.every_layer_windowed()) return;
  GgufValue pattern = GgufValue::i32_array({});
  pattern.array_type = GgufValueType::kBool;
  for (int l = 0; l < c.num_layers; ++l) pattern.integers.push_back(c.attention_window(l) > 0);
  pattern.array_size = pattern.integers.size();
  w.set(a + ".attention.sliding_window_pattern", pattern);
}

void write_config_keys(GgufWriter& w, const ModelConfig& c, const GgufWriteOptions& o) {
  const std::string a = gguf_detail::gguf_arch_name(c.arch);
  w.set("general.architecture", GgufValue::string(a));
  w.set("general.name", GgufValue::string(o.name.empty() ? c.architecture : o.name));
  w.set("general.file_type", GgufValue::u32(file_type(o.matrix_dtype)));
  if (is_quantized(o.matrix_dtype)) w.set("general.quantization_version", GgufValue::u32(2));
  auto u32 = [&](const char* key, int64_t v) {
    w.set(a + "." + key, GgufValue::u32(static_cast<uint32_t>(v)));
  };
  u32("vocab_size", c.vocab_size);
  u32("context_length", c.max_position);
  u32("embedding_length", c.hidden_size);
  u32("block_count", c.num_layers);
  u32("feed_forward_length", c.intermediate_size);
  u32("attention.head_count", c.num_heads);
  if (c.arch == Arch::kGpt2) {
    w.set(a + ".attention.layer_norm_epsilon", GgufValue::f32(c.norm_eps));
    return;
  }
  u32("attention.head_count_kv", c.num_kv_heads);
  w.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.norm_eps));
  w.set(a + ".rope.freq_base", GgufValue::f32(c.rope_theta));
  u32("rope.dimension_count", c.head_dim);
  u32("attention.key_length", c.head_dim);
  u32("attention.value_length", c.head_dim);
  gguf_detail::write_rope_scaling_keys(w, a, c);
  write_sliding_window(w, a, c);
}

}  // namespace

namespace gguf_detail {

const char* gguf_arch_name(Arch a) {
  switch (a) {
    case Arch::kLlama:
    case Arch::kMistral:
      return "llama";
    case Arch::kQwen2:
      return "qwen2";
    case Arch::kQwen3:
      return "qwen3";
    case Arch::kGpt2:
      return "gpt2";
    case Arch::kMixtral:  // llama.cpp runs Mixtral as llama with experts
      return "llama";
    case Arch::kQwen2Moe:
      return "qwen2moe";
    case Arch::kQwen3Moe:
      return "qwen3moe";
    case Arch::kDeepseekV2:
    case Arch::kDeepseekV3:
      return "deepseek2";
  }
  return "llama";
}

Tensor MatrixConverter::operator()(const Tensor& t, const std::string& name) {
  DType to = target_;
  const int64_t k = t.dim(1);
  if (k % dtype_info(to).block_size != 0) {
    to = k % dtype_info(DType::kQ8_0).block_size == 0 ? DType::kQ8_0 : DType::kF16;
    log_warn("convert: {} rows of {} are not whole {} blocks; stored as {}", name, k,
             dtype_name(target_), dtype_name(to));
  }
  if (t.dtype() == to) return t;
  std::vector<float> f32(static_cast<size_t>(t.numel()));
  kernels::dequantize_rows(t, 0, t.dim(0), f32.data());
  if (is_quantized(to)) return kernels::quantize_matrix(pool_, f32.data(), t.dim(0), k, to);
  return detail::convert_float(Tensor::from_f32(t.shape(), f32, MemoryCategory::kBuffers), to,
                               MemoryCategory::kBuffers);
}

Tensor as_f32(const Tensor& t) {
  return t.dtype() == DType::kF32 ? t
                                  : detail::convert_float(t, DType::kF32, MemoryCategory::kBuffers);
}

Tensor concat_rows(const std::vector<Tensor>& parts) {
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += p.dim(0);
  Shape shape = parts[0].rank() == 1 ? Shape{rows} : Shape{rows, parts[0].dim(1)};
  Tensor out = Tensor::zeros(shape, parts[0].dtype(), MemoryCategory::kBuffers);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (const Tensor& p : parts) {
    LMSTACK_CHECK(p.dtype() == out.dtype(), "concat_rows: {} vs {}", p.summary(), out.summary());
    std::memcpy(dst, p.raw_data(), static_cast<size_t>(p.nbytes()));
    dst += p.nbytes();
  }
  return out;
}

void add_llama_attention(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                         const LayerWeights& l, bool permute) {
  auto qk = [&](const Tensor& t, int heads) {
    return permute ? detail::permute_rope_rows(t, heads, false) : t;
  };
  auto mat = [&](const char* s, const Tensor& t) { w.add_tensor(blk(i, s), conv(t, blk(i, s))); };
  w.add_tensor(blk(i, "attn_q.weight"), qk(conv(l.wq, blk(i, "attn_q.weight")), c.num_heads));
  w.add_tensor(blk(i, "attn_k.weight"), qk(conv(l.wk, blk(i, "attn_k.weight")), c.num_kv_heads));
  mat("attn_v.weight", l.wv);
  mat("attn_output.weight", l.wo);
  if (l.bq.defined()) {
    w.add_tensor(blk(i, "attn_q.bias"), qk(as_f32(l.bq), c.num_heads));
    w.add_tensor(blk(i, "attn_k.bias"), qk(as_f32(l.bk), c.num_kv_heads));
    w.add_tensor(blk(i, "attn_v.bias"), as_f32(l.bv));
  }
  if (l.bo.defined()) w.add_tensor(blk(i, "attn_output.bias"), as_f32(l.bo));
  if (l.q_norm.defined()) {
    w.add_tensor(blk(i, "attn_q_norm.weight"), as_f32(l.q_norm));
    w.add_tensor(blk(i, "attn_k_norm.weight"), as_f32(l.k_norm));
  }
}

}  // namespace gguf_detail

namespace {

using gguf_detail::as_f32;
using gguf_detail::blk;
using gguf_detail::concat_rows;
using gguf_detail::MatrixConverter;

bool is_gguf_matrix_dtype(DType t) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K,
                  DType::kQ6_K})
    if (t == d) return true;
  return false;
}

void add_llama_layer(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                     const LayerWeights& l) {
  auto mat = [&](const char* s, const Tensor& t) { w.add_tensor(blk(i, s), conv(t, blk(i, s))); };
  w.add_tensor(blk(i, "attn_norm.weight"), as_f32(l.attn_norm));
  if (c.moe.enabled() || c.mla.enabled()) {
    gguf_detail::add_moe_mla_layer(w, conv, c, i, l);
    return;
  }
  gguf_detail::add_llama_attention(w, conv, c, i, l,
                                   gguf_detail::gguf_arch_name(c.arch) == std::string("llama"));
  w.add_tensor(blk(i, "ffn_norm.weight"), as_f32(l.mlp_norm));
  mat("ffn_gate.weight", l.w_gate);
  mat("ffn_up.weight", l.w_up);
  mat("ffn_down.weight", l.w_down);
}

void add_gpt2_layer(GgufWriter& w, MatrixConverter& conv, int i, const LayerWeights& l) {
  w.add_tensor(blk(i, "attn_norm.weight"), as_f32(l.attn_norm));
  w.add_tensor(blk(i, "attn_norm.bias"), as_f32(l.attn_norm_bias));
  const std::string qkv = blk(i, "attn_qkv.weight");
  w.add_tensor(qkv, concat_rows({conv(l.wq, qkv), conv(l.wk, qkv), conv(l.wv, qkv)}));
  w.add_tensor(blk(i, "attn_qkv.bias"), concat_rows({as_f32(l.bq), as_f32(l.bk), as_f32(l.bv)}));
  w.add_tensor(blk(i, "attn_output.weight"), conv(l.wo, blk(i, "attn_output.weight")));
  w.add_tensor(blk(i, "attn_output.bias"), as_f32(l.bo));
  w.add_tensor(blk(i, "ffn_norm.weight"), as_f32(l.mlp_norm));
  w.add_tensor(blk(i, "ffn_norm.bias"), as_f32(l.mlp_norm_bias));
  w.add_tensor(blk(i, "ffn_up.weight"), conv(l.w_up, blk(i, "ffn_up.weight")));
  w.add_tensor(blk(i, "ffn_up.bias"), as_f32(l.b_up));
  w.add_tensor(blk(i, "ffn_down.weight"), conv(l.w_down, blk(i, "ffn_down.weight")));
  w.add_tensor(blk(i, "ffn_down.bias"), as_f32(l.b_down));
}

}  // namespace

void write_gguf_model(const std::string& path, const ModelConfig& c, const ModelWeights& wts,
                      const std::string& tokenizer_source, const GgufWriteOptions& o) {
  const DType t = o.matrix_dtype;
  if (!is_gguf_matrix_dtype(t))
    throw_error<ConfigError>(
        "convert: type {} cannot be written to GGUF (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K)",
        dtype_name(t));
  GgufWriter w;
  write_config_keys(w, c, o);
  if (c.moe.enabled() || c.mla.enabled()) gguf_detail::write_moe_mla_keys(w, c);
  add_tokenizer_keys(w, c, tokenizer_source);
  MatrixConverter conv(t, o.num_threads);
  w.add_tensor("token_embd.weight", conv(wts.embed, "token_embd.weight"));
  if (c.arch == Arch::kGpt2)
    w.add_tensor("position_embd.weight", conv(wts.pos_embed, "position_embd.weight"));
  if (c.rope_scaling.type == "llama3") {
    const std::vector<float> f =
        detail::llama3_rope_factors(c.rope_scaling, c.head_dim, c.rope_theta);
    w.add_tensor("rope_freqs.weight", Tensor::from_f32(Shape{static_cast<int64_t>(f.size())}, f,
                                                       MemoryCategory::kBuffers));
  }
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerWeights& l = wts.layers[static_cast<size_t>(i)];
    if (c.arch == Arch::kGpt2)
      add_gpt2_layer(w, conv, i, l);
    else
      add_llama_layer(w, conv, c, i, l);
  }
  w.add_tensor("output_norm.weight", as_f32(wts.final_norm));
  if (c.arch == Arch::kGpt2) w.add_tensor("output_norm.bias", as_f32(wts.final_norm_bias));
  if (!c.tie_word_embeddings) w.add_tensor("output.weight", conv(wts.lm_head, "output.weight"));
  w.write(path);
}

}  // namespace lmstack::model
