// Shared by the GGUF model reader and writer (gguf_load.cc, gguf_write.cc) and their
// mixture-of-experts / latent-attention parts (gguf_moe.cc, gguf_moe_write.cc). Not a public
// interface: model/gguf_model.h is.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/gguf_model.h"

namespace lmstack::model::gguf_detail {

// llama.cpp's general.architecture for `a` ("llama" for Mistral and Mixtral, "deepseek2" for
// DeepSeek-V2 and V3).
const char* gguf_arch_name(Arch a);

// "blk.<i>.<suffix>", llama.cpp's per-layer tensor name.
inline std::string blk(int i, const char* suffix) {
  return "blk." + std::to_string(i) + "." + suffix;
}

// Fetches tensors by GGUF name, checking shape and type, and remembers which were used.
class TensorSource {
 public:
  explicit TensorSource(const GgufFile& f) : f_(f) {}
  // A 2-D weight in its stored type.
  Tensor matrix(const std::string& name, const Shape& shape);
  // A norm, bias or router: float types only, returned as f32.
  Tensor small(const std::string& name, const Shape& shape);
  // Any rank, in its stored type (3-D expert stacks, MLA's attn_k_b / attn_v_b).
  Tensor tensor(const std::string& name, const Shape& shape) { return fetch(name, shape); }
  bool has(const std::string& name) const { return f_.has_tensor(name); }
  Shape shape_of(const std::string& name) const { return f_.tensor_info(name).shape(); }
  const std::string& path() const { return f_.path(); }
  void mark_used(const std::string& name) { used_.insert(name); }
  // FormatError for a tensor nothing asked for (a deeper model or another architecture).
  void check_all_used(const std::string& arch) const;

 private:
  Tensor fetch(const std::string& name, const Shape& shape);
  const GgufFile& f_;
  std::set<std::string> used_;
};

// Loads layer i's attention in the llama layout (attn_q/k/v/output, optional biases and Q/K
// norms), undoing llama.cpp's Q/K row permutation when `permuted`.
void load_llama_attention(const ModelConfig& c, TensorSource& src, int i, bool permuted,
                          LayerWeights& l);
// Loads layer i's SwiGLU MLP of width `ffn` (ffn_gate/up/down).
void load_dense_mlp(const ModelConfig& c, TensorSource& src, int i, int64_t ffn, LayerWeights& l);

// The MoE / MLA architectures (llama with experts, qwen2moe, qwen3moe, deepseek2), in
// gguf_moe.cc. `j` already holds vocab/embedding/tie fields; these add the rest of the HF
// config.json the file stands for (and the class name in "architectures").
bool is_moe_gguf(const GgufFile& f);
void moe_config_fields(const GgufFile& f, Json& j);
// Every tensor of layer i of an MoE / MLA model.
void load_moe_mla_layer(const ModelConfig& c, TensorSource& src, int i, bool permuted,
                        LayerWeights& l);

// Converts matrices to the requested type (any float or quantized source, through f32 rows);
// a matrix whose rows are not whole blocks of the type falls back to Q8_0, then F16 (logged).
class MatrixConverter {
 public:
  MatrixConverter(DType target, int threads) : target_(target), pool_(threads) {}
  Tensor operator()(const Tensor& t, const std::string& name);

 private:
  DType target_;
  ThreadPool pool_;
};

Tensor as_f32(const Tensor& t);
// Rows of same-typed tensors stacked into one (GPT-2's attn_qkv, expert stacks).
Tensor concat_rows(const std::vector<Tensor>& parts);

// The llama-layout attention tensors of layer i (Q/K rows permuted when `permute`).
void add_llama_attention(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                         const LayerWeights& l, bool permute);
// In gguf_moe_write.cc: the keys and per-layer tensors of an MoE / MLA model as
// convert_hf_to_gguf.py writes them (called after the dense keys, which some replace).
void write_moe_mla_keys(GgufWriter& w, const ModelConfig& c);

// RoPE scaling <-> `<arch>.rope.scaling.*` keys (gguf_yarn.cc): linear and yarn; the writer
// refuses a yarn form llama.cpp would read differently; the reader returns a config.json
// rope_scaling object (null for none).
void write_rope_scaling_keys(GgufWriter& w, const std::string& a, const ModelConfig& c);
Json rope_scaling_from_gguf(const GgufFile& f, const std::string& a);
void add_moe_mla_layer(GgufWriter& w, MatrixConverter& conv, const ModelConfig& c, int i,
                       const LayerWeights& l);

}  // namespace lmstack::model::gguf_detail
