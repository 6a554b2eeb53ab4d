// A Hugging Face model directory: config.json, model.safetensors (or shards plus
// model.safetensors.index.json), tokenizer.json (+ tokenizer_config.json), and
// generation_config.json when present. Loading maps the weights and arranges them as
// ModelWeights (weights.h); writing produces the same layout transformers writes, GPT-2's
// Conv1D weights included, so `lmstack init-model` output loads in transformers unchanged.
// Not here: GGUF (model/gguf_model.h; load_model_dir dispatches .gguf paths there), quantized
// checkpoints, the tokenizer itself (tokenizer/).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/core/tensor.h"
#include "lmstack/model/config.h"
#include "lmstack/model/safetensors.h"
#include "lmstack/model/weights.h"

namespace lmstack::model {

struct ModelDir {
  std::string path;
  ModelConfig config;
  ModelWeights weights;
  std::string tokenizer_path;         // <dir>/tokenizer.json, "" when absent
  std::string tokenizer_config_path;  // <dir>/tokenizer_config.json, "" when absent
  Json tokenizer_config;              // its contents (null when absent)
  Json generation_config;             // generation_config.json (null when absent)
};

// Loads a model directory, or a GGUF file when `dir` ends in ".gguf" (see gguf_model.h). Throws
// IoError (unreadable), ConfigError (config.json: field, architecture) or FormatError (safetensors
// or index: names the file and the tensor or field: missing, mis-shaped, non-float dtype, more
// layers in the files than the config says). The returned weights keep their files mapped for as
// long as any tensor lives.
ModelDir load_model_dir(const std::string& dir);

// The tensors of a checkpoint as HF names them, with HF shapes (GPT-2's Conv1D weights as
// [in, out]), in a fixed order: embeddings, layers in order, final norm, lm_head (absent when
// tied). `is_norm` marks norm weights; `is_bias` biases (init-model initializes those apart).
struct HfTensorSpec {
  std::string name;
  Shape shape;
  bool is_norm = false;
  bool is_bias = false;
};
std::vector<HfTensorSpec> hf_tensor_specs(const ModelConfig& config);

// Arranges a checkpoint's tensors as ModelWeights: shapes checked against `config`, big
// float matrices kept as mapped views, norms and biases converted to f32, GPT-2's Conv1D
// weights transposed and c_attn split (allocated under MemoryCategory::kWeights).
ModelWeights load_weights(const ModelConfig& config, const SafetensorsSet& tensors);

// The inverse of load_weights: HF names and layouts (GPT-2 transposed back, c_attn fused),
// each matrix in its stored dtype and norms/biases in `small_dtype`. Used by the model
// writer, training checkpoints and quantize.
std::vector<std::pair<std::string, Tensor>> to_hf_tensors(const ModelConfig& config,
                                                          const ModelWeights& weights,
                                                          DType small_dtype = DType::kF32);

// Writes config.json, the weights (one model.safetensors, or shards named
// model-0000i-of-0000n.safetensors plus model.safetensors.index.json when their total passes
// `max_shard_bytes` > 0), tokenizer.json when `tokenizer_json` is not empty, and the other
// JSON files when not null. Creates `dir`. Each file is written atomically.
struct ModelDirFiles {
  std::string tokenizer_json;  // raw text of tokenizer.json
  Json tokenizer_config;       // tokenizer_config.json
  Json generation_config;      // generation_config.json
};
void write_model_dir(const std::string& dir, const ModelConfig& config,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const ModelDirFiles& files, int64_t max_shard_bytes = 0);
// The same files without the weights (config.json, tokenizer and generation files) into an
// existing `dir`: what a sharded checkpoint writes beside its own weight shards.
void write_model_files(const std::string& dir, const ModelConfig& config,
                       const ModelDirFiles& files);

}  // namespace lmstack::model
