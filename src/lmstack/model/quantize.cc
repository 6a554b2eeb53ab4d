// Model quantization (see quantize.h) and the quantized model directory writer. Type choices
// follow llama.cpp's defaults for its Q4_0/Q4_K_M/Q8_0 files (output.weight in Q6_K beside
// 4-bit weights, token embeddings left alone here); the on-disk layout is
// docs/formats/quantization.md.
#include "lmstack/model/quantize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/timer.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/model/init_model.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/weights_internal.h"
#include "lmstack/tokenizer/chat_template.h"

namespace lmstack::model {
namespace {

constexpr const char* kQuantTypes =
    "q8_0, q4_0, q4_k, q6_k, int4_g128 (or int4-g128), int4_g64, int4_g32; bf16, f16, f32 convert";

// The next type of the same family with a smaller block, if any.
bool smaller_block(DType t, DType* next) {
  switch (t) {
    case DType::kQ4_K:
      *next = DType::kQ4_0;
      return true;
    case DType::kQ6_K:
      *next = DType::kQ8_0;
      return true;
    case DType::kInt4G128:
      *next = DType::kInt4G64;
      return true;
    case DType::kInt4G64:
      *next = DType::kInt4G32;
      return true;
    default:
      return false;
  }
}

// A layer's matrices by HF suffix (the llama family's names; weights.cc has the full table).
struct MatrixField {
  const char* suffix;
  Tensor LayerWeights::*member;
};
constexpr MatrixField kMatrices[] = {
    {"self_attn.q_proj.weight", &LayerWeights::wq},  {"self_attn.k_proj.weight", &LayerWeights::wk},
    {"self_attn.v_proj.weight", &LayerWeights::wv},  {"self_attn.o_proj.weight", &LayerWeights::wo},
    {"mlp.gate_proj.weight", &LayerWeights::w_gate}, {"mlp.up_proj.weight", &LayerWeights::w_up},
    {"mlp.down_proj.weight", &LayerWeights::w_down},
};
constexpr Tensor LayerWeights::*kSmall[] = {
    &LayerWeights::attn_norm, &LayerWeights::attn_norm_bias,
    &LayerWeights::bq,        &LayerWeights::bk,
    &LayerWeights::bv,        &LayerWeights::bo,
    &LayerWeights::q_norm,    &LayerWeights::k_norm,
    &LayerWeights::mlp_norm,  &LayerWeights::mlp_norm_bias,
    &LayerWeights::b_up,      &LayerWeights::b_down,
};

Tensor to_f32(const Tensor& t) {
  if (!t.defined()) return t;
  return detail::convert_float(t, DType::kF32, MemoryCategory::kBuffers);
}

// A writable f32 copy of every layer tensor (AWQ edits matrices, norms and biases in place);
// the embedding and lm_head are shared (only read).
ModelWeights f32_working_copy(const ModelWeights& w) {
  ModelWeights out;
  out.embed = w.embed;
  out.pos_embed = w.pos_embed;
  out.final_norm = w.final_norm;
  out.final_norm_bias = w.final_norm_bias;
  out.lm_head = w.lm_head;
  out.layers.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    for (const MatrixField& f : kMatrices) out.layers[l].*f.member = to_f32(w.layers[l].*f.member);
    for (Tensor LayerWeights::*m : kSmall) out.layers[l].*m = to_f32(w.layers[l].*m);
  }
  return out;
}

// Quantizes one f32 matrix to type_for_width(want, K, keep) and records the line.
Tensor quantize_one(ThreadPool& pool, const std::string& name, const Tensor& f32, DType want,
                    DType keep, QuantizeReport* report) {
  const int64_t n = f32.dim(0), k = f32.dim(1);
  const DType t = type_for_width(want, k, keep);
  QuantizedTensor line{name, keep, t, 0};
  Tensor out;
  if (!is_quantized(t)) {
    out = detail::convert_float(f32, t, MemoryCategory::kWeights);
  } else {
    out = kernels::quantize_matrix(pool, f32.data<float>(), n, k, t, MemoryCategory::kWeights);
    std::vector<float> back(static_cast<size_t>(n * k));
    kernels::dequantize_rows(out, 0, n, back.data());
    double err = 0, norm = 0;
    const float* w = f32.data<float>();
    for (size_t i = 0; i < back.size(); ++i) {
      err += (static_cast<double>(back[i]) - w[i]) * (static_cast<double>(back[i]) - w[i]);
      norm += static_cast<double>(w[i]) * w[i];
    }
    line.rel_rms_error = std::sqrt(err / std::max(norm, 1e-30));
  }
  if (report) report->tensors.push_back(line);
  return out;
}

// The stored embedding: the target dtype of a plain conversion; beside quantized matrices,
// bf16 from an f32 source (half the bytes, bf16's 2^-9 rounding), otherwise unchanged.
Tensor embedding_for(const Tensor& embed, DType weight_type) {
  const DType want = !is_quantized(weight_type)     ? weight_type
                     : embed.dtype() == DType::kF32 ? DType::kBF16
                                                    : embed.dtype();
  return want == embed.dtype() ? embed
                               : detail::convert_float(embed, want, MemoryCategory::kWeights);
}

// Experts (and shared experts) and MLA's projections are quantized like the other matrices;
// routers, the V3 score bias, Qwen2-MoE's shared-expert gate and the latent norms stay f32
// (tiny, and a router's top-k is sensitive to rounding).
void quantize_moe_mla(ThreadPool& pool, const LayerWeights& src, const std::string& prefix,
                      DType want, LayerWeights& dst, QuantizeReport* report) {
  const auto q = [&](const Tensor& t, const std::string& name) {
    return t.defined() ? quantize_one(pool, prefix + name, to_f32(t), want, t.dtype(), report) : t;
  };
  if (src.moe) {
    auto m = std::make_shared<MoeLayerWeights>(*src.moe);
    m->router = to_f32(src.moe->router);
    for (size_t e = 0; e < m->w_gate.size(); ++e) {
      const std::string x = "experts." + std::to_string(e) + ".";
      m->w_gate[e] = q(src.moe->w_gate[e], x + "gate");
      m->w_up[e] = q(src.moe->w_up[e], x + "up");
      m->w_down[e] = q(src.moe->w_down[e], x + "down");
    }
    m->shared_gate = q(src.moe->shared_gate, "shared.gate");
    m->shared_up = q(src.moe->shared_up, "shared.up");
    m->shared_down = q(src.moe->shared_down, "shared.down");
    dst.moe = std::move(m);
  }
  if (src.mla) {
    auto a = std::make_shared<MlaLayerWeights>(*src.mla);
    a->q_a = q(src.mla->q_a, "self_attn.q_a_proj");
    a->kv_a = q(src.mla->kv_a, "self_attn.kv_a_proj_with_mqa");
    a->kv_b = q(src.mla->kv_b, "self_attn.kv_b_proj");
    dst.mla = std::move(a);
  }
}

}  // namespace

DType parse_quant_type(std::string_view name) {
  std::string norm(name);
  for (char& ch : norm)
    ch = ch == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* t :
       {"q8_0", "q4_0", "q4_k", "q6_k", "int4_g32", "int4_g64", "int4_g128", "bf16", "f16", "f32"})
    if (norm == t) return parse_dtype(norm);
  throw_error<RequestError>("quantize: unknown type '{}' (known: {})", name, kQuantTypes);
}

QuantMethod parse_quant_method(std::string_view name) {
  if (name == "rtn") return QuantMethod::kRtn;
  if (name == "awq") return QuantMethod::kAwq;
  throw_error<RequestError>("quantize: unknown method '{}' (known: rtn, awq)", name);
}

std::string_view quant_method_name(QuantMethod m) { return m == QuantMethod::kAwq ? "awq" : "rtn"; }

DType default_output_type(DType weight_type) {
  return weight_type == DType::kQ8_0 || weight_type == DType::kQ6_K ? weight_type : DType::kQ6_K;
}

DType type_for_width(DType want, int64_t k, DType keep) {
  DType t = want;
  while (k % dtype_info(t).block_size != 0)
    if (!smaller_block(t, &t)) return keep;
  return t;
}

ModelWeights quantize_weights(ThreadPool& pool, const ModelConfig& config,
                              const ModelWeights& weights, const QuantizeOptions& options,
                              QuantizeReport* report) {
  if (config.arch == Arch::kGpt2)
    throw_error<RequestError>(
        "quantize: GPT-2 checkpoints (Conv1D layout) are not supported; the llama family is");
  if ((config.moe.enabled() || config.mla.enabled()) && options.method == QuantMethod::kAwq)
    throw_error<RequestError>(
        "quantize: --method awq is not implemented for {} (experts / latent attention); use rtn",
        config.architecture);
  if (options.method == QuantMethod::kAwq && options.calibration_tokens.size() < 2)
    throw_error<RequestError>("quantize: --method awq needs a --calibration text");
  Timer timer;
  ModelWeights work = f32_working_copy(weights);
  if (options.method == QuantMethod::kAwq) {
    const std::vector<AwqActivations> acts =
        collect_awq_activations(pool, config, work, options.calibration_tokens,
                                options.calibration_ctx, options.search_rows);
    auto type_of = [&](int64_t k) { return type_for_width(options.weight_type, k, DType::kF32); };
    std::vector<AwqLayerChoice> choices =
        apply_awq(pool, config, work, acts, type_of, options.grid);
    if (report) report->awq = std::move(choices);
  }
  ModelWeights out;
  out.embed = embedding_for(weights.embed, options.weight_type);
  out.pos_embed = weights.pos_embed;
  out.final_norm = weights.final_norm;
  out.final_norm_bias = weights.final_norm_bias;
  out.layers.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    for (const MatrixField& f : kMatrices) {
      const Tensor& src = weights.layers[l].*f.member;
      if (!src.defined()) continue;
      out.layers[l].*f.member = quantize_one(pool, prefix + f.suffix, work.layers[l].*f.member,
                                             options.weight_type, src.dtype(), report);
    }
    for (Tensor LayerWeights::*m : kSmall) out.layers[l].*m = work.layers[l].*m;
    quantize_moe_mla(pool, weights.layers[l], prefix, options.weight_type, out.layers[l], report);
  }
  const bool tied = weights.lm_head.raw_data() == weights.embed.raw_data();
  if (tied && !is_quantized(options.weight_type))  // a plain conversion keeps the tie
    out.lm_head = out.embed;
  else
    out.lm_head = quantize_one(pool, "lm_head.weight", to_f32(weights.lm_head), options.output_type,
                               weights.lm_head.dtype(), report);
  if (report) {
    report->bytes_before = weights.bytes();
    report->bytes_after = out.bytes();
    report->seconds = timer.seconds();
  }
  return out;
}

Json quantization_config_json(const QuantizeOptions& o) {
  const int group = dtype_info(o.weight_type).block_size;
  return {{"quant_method", "lmstack"},
          {"weight_type", std::string(dtype_name(o.weight_type))},
          {"output_type", std::string(dtype_name(o.output_type))},
          {"method", std::string(quant_method_name(o.method))},
          {"group_size", group},
          {"embedding", "bf16 (from f32) or as stored"},
          {"norms", "f32"}};
}

void write_quantized_model_dir(const std::string& out_dir, const ModelDir& source,
                               const ModelWeights& quantized, const QuantizeOptions& options) {
  ModelConfig config = source.config;
  const bool quantized_type = is_quantized(options.weight_type);
  // lm_head is its own tensor unless a plain conversion kept the tie.
  config.tie_word_embeddings = quantized.lm_head.raw_data() == quantized.embed.raw_data();
  if (!quantized_type) config.dtype = options.weight_type;
  const Json qconfig = quantization_config_json(options);
  Json config_json = config.to_json();
  Json metadata = {{"format", "pt"}};
  if (quantized_type) {
    config_json["quantization_config"] = qconfig;
    metadata["lmstack.quantization"] = qconfig.dump();
  }
  make_directories(out_dir);
  write_safetensors(path_join(out_dir, "model.safetensors"),
                    to_hf_tensors(config, quantized, DType::kF32), metadata);
  std::error_code ec;  // the loader prefers model.safetensors; drop a stale shard index
  std::filesystem::remove(path_join(out_dir, "model.safetensors.index.json"), ec);
  write_file_atomic(path_join(out_dir, "config.json"), config_json.dump(2) + "\n");
  if (!source.tokenizer_path.empty())
    write_file_atomic(path_join(out_dir, "tokenizer.json"), read_file(source.tokenizer_path));
  if (!source.tokenizer_config_path.empty())
    write_file_atomic(path_join(out_dir, "tokenizer_config.json"),
                      read_file(source.tokenizer_config_path));
  if (!source.generation_config.is_null())
    write_file_atomic(path_join(out_dir, "generation_config.json"),
                      source.generation_config.dump(2) + "\n");
  if (is_directory(source.path))  // chat_template.jinja outranks tokenizer_config's template
    for (const auto& [name, text] : tokenizer::chat_template_files(source.path)) {
      make_directories(std::filesystem::path(path_join(out_dir, name)).parent_path().string());
      write_file_atomic(path_join(out_dir, name), text);
    }
}

}  // namespace lmstack::model
