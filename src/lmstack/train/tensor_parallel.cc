// TP slicing (see tensor_parallel.h).
#include "lmstack/train/tensor_parallel.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"

namespace lmstack::train {
namespace {

std::string field_of(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

bool is_kv(const std::string& f) { return f == "wk" || f == "wv" || f == "bk" || f == "bv"; }

void check_divides(int t, int n, const char* field) {
  if (n % t != 0) throw_error<ConfigError>("--tp {}: {} = {} is not a multiple of it", t, field, n);
}

}  // namespace

TpLayout tp_layout(const model::ModelConfig& c, int tp, int rank) {
  check_divides(tp, c.num_heads, "num_attention_heads");
  check_divides(tp, c.intermediate_size, "intermediate_size");
  check_divides(tp, c.vocab_size, "vocab_size");
  TpLayout t;
  t.tp = tp, t.rank = rank;
  t.heads = c.num_heads / tp;
  t.intermediate = c.intermediate_size / tp;
  t.vocab = c.vocab_size / tp;
  t.vocab_begin = rank * t.vocab;
  if (c.num_kv_heads % tp == 0) {
    t.kv_heads = c.num_kv_heads / tp;
    t.kv_head_begin = rank * t.kv_heads;
  } else if (tp % c.num_kv_heads == 0) {
    t.kv_heads = 1;
    t.kv_replicas = tp / c.num_kv_heads;
    t.kv_head_begin = rank / t.kv_replicas;
  } else {
    throw_error<ConfigError>(
        "--tp {}: num_key_value_heads = {} neither divides it nor is a "
        "multiple of it",
        tp, c.num_kv_heads);
  }
  return t;
}

TpSplit tp_split_of(const std::string& name) {
  const std::string f = field_of(name);
  if (f == "embed" || f == "lm_head" || f == "wq" || f == "bq" || is_kv(f) || f == "w_gate" ||
      f == "w_up")
    return TpSplit::kRows;
  if (f == "wo" || f == "w_down") return TpSplit::kCols;
  return TpSplit::kReplicated;
}

std::pair<int64_t, int64_t> tp_range(const std::string& name, int64_t full_dim, const TpLayout& t,
                                     int head_dim) {
  if (tp_split_of(name) == TpSplit::kReplicated) return {0, full_dim};
  if (is_kv(field_of(name))) {
    const int64_t rows = static_cast<int64_t>(t.kv_heads) * head_dim;
    return {t.kv_head_begin * static_cast<int64_t>(head_dim),
            t.kv_head_begin * static_cast<int64_t>(head_dim) + rows};
  }
  const int64_t per = full_dim / t.tp;
  return {t.rank * per, (t.rank + 1) * per};
}

TpBlock tp_block(const std::string& name, const Shape& full, const TpLayout& t, int head_dim) {
  const int64_t rows = full[0], cols = full.rank() == 2 ? full[1] : 1;
  const TpSplit split = tp_split_of(name);
  const auto [b, e] = tp_range(name, split == TpSplit::kCols ? cols : rows, t, head_dim);
  if (split == TpSplit::kCols) return {0, rows, b, e};
  return {b, e, 0, cols};
}

Shape tp_block_shape(const TpBlock& b, const Shape& full) {
  return full.rank() == 2 ? Shape{b.rows(), b.cols()} : Shape{b.rows()};
}

Tensor tp_slice(const std::string& name, const Tensor& full, const TpLayout& t, int head_dim) {
  const TpSplit split = tp_split_of(name);
  const int64_t rows = full.shape()[0];
  const int64_t cols = full.rank() == 2 ? full.shape()[1] : 1;
  const auto [b, e] = tp_range(name, split == TpSplit::kCols ? cols : rows, t, head_dim);
  std::vector<float> all(static_cast<size_t>(full.numel()));
  if (full.dtype() == DType::kF32)
    std::memcpy(all.data(), full.data<float>(), all.size() * sizeof(float));
  else if (full.dtype() == DType::kBF16)
    convert_bf16_to_f32(full.data<uint16_t>(), all.data(), full.numel());
  else if (full.dtype() == DType::kF16)
    convert_f16_to_f32(full.data<uint16_t>(), all.data(), full.numel());
  else
    throw_error<ConfigError>("cannot train {} stored as {}", name, dtype_name(full.dtype()));
  const int64_t out_rows = split == TpSplit::kCols ? rows : e - b;
  const int64_t out_cols = split == TpSplit::kCols ? e - b : cols;
  Tensor out = Tensor::zeros(full.rank() == 2 ? Shape{out_rows, out_cols} : Shape{out_rows},
                             DType::kF32, MemoryCategory::kWeights);
  float* dst = out.data<float>();
  for (int64_t r = 0; r < out_rows; ++r) {
    const float* src =
        split == TpSplit::kCols ? all.data() + r * cols + b : all.data() + (b + r) * cols;
    if (split == TpSplit::kReplicated) src = all.data() + r * cols;
    std::memcpy(dst + r * out_cols, src, static_cast<size_t>(out_cols) * sizeof(float));
  }
  return out;
}

model::ModelConfig tp_local_config(const model::ModelConfig& full, const TpLayout& t) {
  model::ModelConfig c = full;
  c.num_heads = t.heads;
  c.num_kv_heads = t.kv_heads;
  c.intermediate_size = t.intermediate;
  c.vocab_size = t.vocab;
  return c;
}

void check_model_parallel_config(const model::ModelConfig& c) {
  const char* why = c.norm != model::NormKind::kRmsNorm ? "LayerNorm"
                    : c.mlp != model::MlpKind::kSwiGlu  ? "a GELU MLP"
                    : c.learned_positions               ? "learned positions"
                    : c.qk_norm                         ? "per-head q/k norms (Qwen3)"
                    : c.o_bias || c.mlp_bias            ? "output/MLP biases"
                                                        : nullptr;
  if (why)
    throw_error<ConfigError>(
        "tensor/pipeline parallel training supports the llama family (RMSNorm, RoPE, SwiGLU); "
        "{} has {}: train it with --dp only",
        c.architecture, why);
}

}  // namespace lmstack::train
