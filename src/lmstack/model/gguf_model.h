// Models in GGUF files (llama.cpp's format; container in core/gguf.h): the llama family
// (general.architecture "llama", "qwen2", "qwen3") and "gpt2", loaded into ModelConfig +
// ModelWeights and written back. Tensor names are llama.cpp's (token_embd, output_norm, output,
// blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, attn_q_norm, attn_k_norm, ffn_norm,
// ffn_gate, ffn_up, ffn_down} (+ .bias); gpt2: position_embd, attn_qkv, LayerNorm biases).
// Key layout and the Q/K row permutation are described in docs/formats/gguf.md.
#pragma once

#include <string>

#include "lmstack/core/gguf.h"
#include "lmstack/model/model_dir.h"

namespace lmstack::model {

// The ModelConfig a GGUF file describes. Throws FormatError naming the file and key for a
// missing or mistyped required key ({arch}.embedding_length, .block_count,
// .feed_forward_length, .attention.head_count, .context_length, the norm epsilon) and
// ConfigError for an unsupported architecture, partial rotary, yarn RoPE scaling or a
// rope_freqs table that is not Llama 3 scaling.
ModelConfig gguf_model_config(const GgufFile& file);

// The weights of a GGUF file as ModelWeights. Matrices are views of the mapping in their
// stored type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), except for architecture "llama", whose
// attn_q/attn_k rows llama.cpp's converter permuted for interleaved RoPE: those two matrices
// (and their biases) are copied once with the rows put back in Hugging Face order, a load-time
// cost of one pass over (q_dim + kv_dim) x hidden of each layer. Norms and biases become f32.
// GPT-2's attn_qkv is split into row views. Throws FormatError naming the file and tensor for
// a missing, mis-shaped, unusable-typed or unexpected tensor.
ModelWeights load_gguf_weights(const ModelConfig& config, const GgufFile& file);

// load_model_dir for a .gguf path: config, weights, and tokenizer_path = the file itself
// (Tokenizer::load reads its tokenizer.* keys). No tokenizer/generation config JSON.
ModelDir load_gguf_model(const std::string& path);

// Options of write_gguf_model.
struct GgufWriteOptions {
  DType matrix_dtype = DType::kF16;  // 2-D weights; 1-D norms and biases are always F32
  std::string name;                  // general.name (default: the HF class name)
  int num_threads = 0;               // for quantizing (ThreadPool default when <= 0)
};

// Writes `config` + `weights` as a GGUF file llama.cpp reads, with the tokenizer keys taken
// from `tokenizer_source`: a tokenizer.json path (byte-level BPE: written as the "gpt2"
// model, its pre-tokenizer named by its split regex) or a .gguf file (tokenizer.* keys copied).
// Quantized matrix types need whole blocks per row: a matrix whose row length is not a
// multiple of the block falls back to Q8_0, then F16 (logged). Throws ConfigError for what
// GGUF or llama.cpp cannot express (a tokenizer.json whose pre-tokenizer has no llama.cpp
// name). A sliding window is written as <arch>.attention.sliding_window (plus
// .sliding_window_pattern, one bool per layer, when only some layers are windowed).
void write_gguf_model(const std::string& path, const ModelConfig& config,
                      const ModelWeights& weights, const std::string& tokenizer_source,
                      const GgufWriteOptions& options);

namespace detail {
// llama.cpp's convert permutes each head's rows from halves (i, i + D/2) to pairs (2i, 2i+1);
// `to_hf` undoes it. Works on whole rows of any dtype; `rows` = heads * head_dim (checked).
Tensor permute_rope_rows(const Tensor& t, int heads, bool to_hf);
// The llama3 RopeScaling that reproduces llama.cpp's rope_freqs table (factors[i] divides
// inv_freq[i]); ConfigError naming `source` when none does.
RopeScaling llama3_scaling_from_factors(const std::vector<float>& factors, int head_dim,
                                        float theta, const std::string& source);
// The rope_freqs table llama.cpp's converter writes for llama3 scaling.
std::vector<float> llama3_rope_factors(const RopeScaling& s, int head_dim, float theta);
}  // namespace detail

}  // namespace lmstack::model
