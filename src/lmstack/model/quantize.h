// Weight quantization of a loaded model (`lmstack quantize`): every attention and MLP matrix
// to a block-quantized type (q8_0, q4_0, q4_K, int4_g32/64/128; kernels/quant.h), the output
// projection to a higher-precision type (q6_K beside 4-bit types, llama.cpp's choice; q8_0
// beside q8_0), embeddings and norms kept as they are (bf16/f32: the embedding is a gather,
// not a bandwidth-bound matmul, and norms are tiny). Methods: round-to-nearest (RTN: the
// block quantizer alone) or AWQ (Lin et al. 2023, arXiv 2306.00978; model/quantize_awq.h).
// The output directory format is docs/formats/quantization.md. Llama family only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmstack/core/dtype.h"
#include "lmstack/core/json.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/quantize_awq.h"

namespace lmstack::model {

enum class QuantMethod : uint8_t { kRtn, kAwq };

struct QuantizeOptions {
  DType weight_type = DType::kQ8_0;  // attention and MLP matrices
  DType output_type = DType::kQ8_0;  // lm_head (see default_output_type)
  QuantMethod method = QuantMethod::kRtn;
  // AWQ only: calibration text as token ids, run in windows of `calibration_ctx` tokens.
  std::vector<int32_t> calibration_tokens;
  int calibration_ctx = 256;
  int search_rows = 256;  // activation rows per linear group the scale search scores
  int grid = 20;          // alpha = i / grid, i = 0 .. grid - 1
};

// "q8_0", "q4_0", "q4_k", "q6_k", "int4_g128" or "int4-g128" (g32/g64 too) -> DType.
// Throws RequestError naming the value and the accepted spellings.
DType parse_quant_type(std::string_view name);
// "rtn" | "awq"; RequestError otherwise.
QuantMethod parse_quant_method(std::string_view name);
std::string_view quant_method_name(QuantMethod m);
// q6_K for the 4-bit types, the type itself otherwise.
DType default_output_type(DType weight_type);

// The type a [N, K] matrix gets: `want` when K is a multiple of its block, else the nearest
// smaller-block type of the same family (q4_K -> q4_0, q6_K -> q8_0, int4_g128 -> g64 -> g32),
// else `keep` (the stored float dtype).
DType type_for_width(DType want, int64_t k, DType keep);

// One line of the report per quantized tensor group.
struct QuantizedTensor {
  std::string name;  // HF name
  DType from = DType::kF32, to = DType::kF32;
  double rel_rms_error = 0;  // ||dequant(Q(W)) - W|| / ||W|| over the stored (scaled) W
};
struct QuantizeReport {
  std::vector<QuantizedTensor> tensors;
  std::vector<AwqLayerChoice> awq;  // per layer, AWQ only
  int64_t bytes_before = 0, bytes_after = 0;
  double seconds = 0;
};

// Quantized copy of `weights` (allocated under MemoryCategory::kWeights). Tied embeddings
// stay tied to nothing: lm_head becomes its own quantized tensor and the embedding keeps its
// dtype. Throws RequestError for GPT-2 (Conv1D layout) or AWQ without calibration tokens.
ModelWeights quantize_weights(ThreadPool& pool, const ModelConfig& config,
                              const ModelWeights& weights, const QuantizeOptions& options,
                              QuantizeReport* report);

// config.json's "quantization_config" for these options (docs/formats/quantization.md).
Json quantization_config_json(const QuantizeOptions& options);

// Writes `out_dir`: config.json (tie_word_embeddings false, quantization_config added),
// model.safetensors (quantized tensors as U8 named in __metadata__), and the source's
// tokenizer.json, tokenizer_config.json and generation_config.json when present.
void write_quantized_model_dir(const std::string& out_dir, const ModelDir& source,
                               const ModelWeights& quantized, const QuantizeOptions& options);

}  // namespace lmstack::model
