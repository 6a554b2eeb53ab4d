// TP slicing (see tensor_parallel.h).
#include "lmstack/model/tensor_parallel.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"

namespace lmstack::model {
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

TpLayout tp_layout(const ModelConfig& c, int tp, int rank) {
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
  // b_up (GPT-2's c_fc bias) follows its column-parallel matrix; bo and b_down stay whole
  // (added once after the row-parallel reduction).
  if (f == "embed" || f == "lm_head" || f == "wq" || f == "bq" || is_kv(f) || f == "w_gate" ||
      f == "w_up" || f == "b_up")
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

Tensor tp_slice_stored(const std::string& name, const Tensor& full, const TpLayout& t, int head_dim,
                       MemoryCategory category) {
  const DType dt = full.dtype();
  if (dt != DType::kF32 && dt != DType::kBF16 && dt != DType::kF16)
    throw_error<ConfigError>("--tp: {} is stored as {}; tensor parallelism slices f32, bf16 or f16",
                             name, dtype_name(dt));
  const TpSplit split = tp_split_of(name);
  const int64_t rows = full.shape()[0];
  const int64_t cols = full.rank() == 2 ? full.shape()[1] : 1;
  const auto [b, e] = tp_range(name, split == TpSplit::kCols ? cols : rows, t, head_dim);
  const int64_t out_rows = split == TpSplit::kCols ? rows : e - b;
  const int64_t out_cols = split == TpSplit::kCols ? e - b : cols;
  Tensor out =
      Tensor::zeros(full.rank() == 2 ? Shape{out_rows, out_cols} : Shape{out_rows}, dt, category);
  const int64_t es = dtype_bytes(dt, 1);
  const auto* src = static_cast<const uint8_t*>(full.raw_data());
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t r = 0; r < out_rows; ++r) {
    const int64_t first = split == TpSplit::kCols   ? r * cols + b
                          : split == TpSplit::kRows ? (b + r) * cols
                                                    : r * cols;
    std::memcpy(dst + r * out_cols * es, src + first * es, static_cast<size_t>(out_cols * es));
  }
  return out;
}

Tensor tp_slice(const std::string& name, const Tensor& full, const TpLayout& t, int head_dim) {
  if (full.dtype() == DType::kF32) return tp_slice_stored(name, full, t, head_dim);
  const Tensor s = tp_slice_stored(name, full, t, head_dim, MemoryCategory::kActivations);
  Tensor out = Tensor::zeros(s.shape(), DType::kF32, MemoryCategory::kWeights);
  if (s.dtype() == DType::kBF16)
    convert_bf16_to_f32(s.data<uint16_t>(), out.data<float>(), s.numel());
  else
    convert_f16_to_f32(s.data<uint16_t>(), out.data<float>(), s.numel());
  return out;
}

ModelConfig tp_local_config(const ModelConfig& full, const TpLayout& t) {
  ModelConfig c = full;
  c.num_heads = t.heads;
  c.num_kv_heads = t.kv_heads;
  c.intermediate_size = t.intermediate;
  c.vocab_size = t.vocab;
  return c;
}

}  // namespace lmstack::model
