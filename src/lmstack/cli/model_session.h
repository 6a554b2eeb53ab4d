// What the model commands (generate, chat, perplexity, bench) share: resolving --model (or
// the built-in default), loading weights + tokenizer, the EOS ids, the chat prompt, this
// machine's measured limits, and the prediction/measurement summary they print at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lmstack/core/machine_probe.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::cli {

struct ModelSession {
  model::ModelDir model;
  tokenizer::Tokenizer tokenizer;
  std::vector<int32_t> eos_ids;  // config + generation_config + tokenizer eos, deduplicated
};

// The directory of the built-in default model, or "" when there is none.
std::string default_model_dir();
// Loads DIR (or the default model when DIR is empty; RequestError if there is none).
ModelSession load_session(const std::string& dir);

// Repacks the session's q4_0 matrices for the decode GEMV (model/repack.h), after any tensor
// parallel slicing and before a Decoder is built. LMSTACK_REPACK=0 in the environment keeps the
// file's layout (to compare the two).
void repack_for_decode(ModelSession& s, ThreadPool& pool);

// Prompt tokens for `text`: through the chat template as one user message when `chat`
// (ConfigError if the model has no template), with BOS prepended when the tokenizer asks.
std::vector<int32_t> encode_prompt(const ModelSession& s, const std::string& text, bool chat);

// This machine's doctor report: the file given, else ~/.cache/lmstack/doctor.json, else a
// quick probe (saved to that cache for next time).
MachineReport machine_report(const std::string& machine_file, int threads);

// Bytes a decode step reads: every weight matrix once (tied embeddings once) plus the KV of
// `context` tokens per sequence (MLA: the cached latent rows). MoE models read only the experts
// some token chose: `expert_bytes` per step when measured (>= 0), else every expert priced at
// calc's expected fraction touched by `batch` tokens, E·(1 − (1 − k/E)^batch) of E.
struct DecodeTraffic {
  double weight_bytes = 0;
  double kv_bytes = 0;
};
// The KV is priced in `kv_dtype` (KvCache::bytes_per_token: int8 scales included).
DecodeTraffic decode_traffic(const model::ModelConfig& c, const model::ModelWeights& w,
                             double context, double batch, double expert_bytes = -1,
                             DType kv_dtype = DType::kF32);
// calc's weight bytes one decode token reads: its active parameters (top-k of the routed
// experts, every other weight, not the untied embedding table) priced as
// predicted_weight_bytes prices them.
double predicted_decode_weight_bytes(const model::ModelConfig& c, const model::ModelWeights& w,
                                     const std::string& source);
// The weight bytes calc predicts for this model: calc's parameter count per part (embedding,
// attention Q/K/V/O, MLP, lm_head, norms) priced at the dtype of the loaded tensor it counts
// (block-quantized types at block_bytes / block_size per weight). Norms and biases are priced
// at the matrices' dtype for float models (as stored) and f32 beside quantized matrices (as
// `lmstack quantize` stores them). `source` names the model in errors.
double predicted_weight_bytes(const model::ModelConfig& c, const model::ModelWeights& w,
                              const std::string& source);
// Forward FLOPs per token at context `context`: 2 × matmul parameters + 4 × L × C_attn × ctx
// (QKᵀ and PV; the PaLM convention without the 1/2 for causality).
double forward_flops_per_token(const model::ModelConfig& c, double context);

void add_model_option(CLI::App& app, std::string& model_dir);
// --kv-dtype f32|bf16|int8: the KV cache's element type (model/kv_cache.h), shared by
// generate, chat, perplexity, serve and bench decode. Parse the value with
// model::parse_kv_dtype.
void add_kv_dtype_option(CLI::App& app, std::string& kv_dtype);

}  // namespace lmstack::cli
