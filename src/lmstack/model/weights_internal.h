// Helpers shared by the weight loaders (weights.cc: llama family; weights_gpt2.cc: GPT-2).
// Internal to model/: not a public contract. Every fetch checks the tensor against the shape
// the config implies and that its dtype is a float type, throwing FormatError naming the
// file and tensor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lmstack/model/model_dir.h"

namespace lmstack::model::detail {

// A float matrix (or embedding) as stored: a mapped view when the file's layout fits.
Tensor fetch_matrix(const SafetensorsSet& tensors, const std::string& name, const Shape& shape);
// A norm weight or bias, converted to f32 (a mapped view when already f32).
Tensor fetch_small(const SafetensorsSet& tensors, const std::string& name, const Shape& shape);
// FormatError if any tensor named "<prefix><i>.…" has i >= config.num_layers: the files hold
// a deeper model than config.json describes.
void check_layer_count(const SafetensorsSet& tensors, const std::string& prefix, int num_layers);
// A copy of a float tensor in another float dtype (a plain copy when `to` == its dtype).
Tensor convert_float(const Tensor& t, DType to, MemoryCategory category);
// [rows, cols] -> [cols, rows] in the same dtype, allocated under `category`.
Tensor transpose_2d(const Tensor& t, MemoryCategory category);

ModelWeights load_gpt2_weights(const ModelConfig& config, const SafetensorsSet& tensors);
std::vector<HfTensorSpec> gpt2_tensor_specs(const ModelConfig& config);
std::vector<std::pair<std::string, Tensor>> gpt2_to_hf_tensors(const ModelConfig& config,
                                                               const ModelWeights& weights,
                                                               DType small_dtype);

// weights_moe.cc: layer `layer`'s MLA attention tensors (when config.mla is enabled) and MoE
// block tensors (when the layer is sparse), which replace the llama table's self_attn.* and
// mlp.* rows: their specs, their loading into `l` (l.moe / l.mla created), their HF export.
void append_moe_mla_specs(const ModelConfig& config, int layer, std::vector<HfTensorSpec>& specs);
void load_moe_mla_layer(const ModelConfig& config, const SafetensorsSet& tensors, int layer,
                        LayerWeights& l);
void moe_mla_layer_to_hf(const ModelConfig& config, const LayerWeights& l, int layer,
                         DType small_dtype, std::vector<std::pair<std::string, Tensor>>& out);

}  // namespace lmstack::model::detail
