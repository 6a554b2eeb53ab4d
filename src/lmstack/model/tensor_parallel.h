// Tensor-parallel slicing of a decoder's weights (Shoeybi et al. 2019, "Megatron-LM", §3):
// which dimension of each tensor is split over the T ranks of a TP group and which slice rank
// t holds. Attention is split by heads (Wq/Wk/Wv column-parallel: rows of [out, in]; Wo
// row-parallel: columns), the MLP column then row (Wgate and Wup rows together, Wdown
// columns), the embedding and lm_head by vocabulary rows; norms are replicated. GQA: with T
// dividing Hkv each rank holds Hkv/T KV heads; with Hkv dividing T (T > Hkv) each KV head is
// replicated on T/Hkv consecutive ranks, the one their query heads read (Megatron's
// "num_query_groups < tp"); their gradients are summed over those replicas.
// Shared by TP training (train/parallel_stage*.cc runs the math on the slices) and TP inference
// (model/tp_inference.h), so it lives in model/ and knows nothing of dist/.
#pragma once

#include <string>
#include <utility>

#include "lmstack/core/tensor.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

enum class TpSplit { kReplicated, kRows, kCols };

struct TpLayout {
  int tp = 1, rank = 0;
  int heads = 0, kv_heads = 0, intermediate = 0, vocab = 0;  // per rank
  int kv_replicas = 1;  // ranks holding the same KV head (1: KV heads divided)
  int kv_head_begin = 0;
  int vocab_begin = 0;
  // Sequence parallelism (Korthikanti et al. 2022, §4.2.2): outside attention and the MLP
  // (norms, residual adds, the stage boundary) each rank holds only its N/T token rows; the
  // all-reduces become a reduce-scatter after the row-parallel output and an all-gather before
  // the column-parallel input (and the reverse in the backward).
  bool sequence_parallel = false;
};

// The layout of rank `rank` of `tp`. ConfigError naming the field when H, F or V is not a
// multiple of T, or neither of Hkv and T divides the other.
TpLayout tp_layout(const ModelConfig& c, int tp, int rank);

// How a field ("embed", "layers.3.wq", "final_norm", ...) is split.
TpSplit tp_split_of(const std::string& name);

// The range [begin, end) of the split dimension (rows for kRows, columns for kCols) that the
// layout's rank holds of `name`, whose full tensor has `full_dim` entries along it (kReplicated:
// [0, full_dim)). `head_dim` converts KV heads into rows.
std::pair<int64_t, int64_t> tp_range(const std::string& name, int64_t full_dim, const TpLayout& t,
                                     int head_dim);

// The block of a whole tensor of shape `full` (viewed as [rows, cols]; a 1-D tensor has one
// column) that the layout's rank holds of `name`: rows [row_begin, row_end) x columns
// [col_begin, col_end). A TP slice is always such a block (kRows: all columns; kCols: all rows).
struct TpBlock {
  int64_t row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;
  int64_t rows() const { return row_end - row_begin; }
  int64_t cols() const { return col_end - col_begin; }
};
TpBlock tp_block(const std::string& name, const Shape& full, const TpLayout& t, int head_dim);
// The shape of that block as the rank holds it ([rows, cols], or [rows] for a 1-D tensor).
Shape tp_block_shape(const TpBlock& b, const Shape& full);

// This rank's slice of `full` (any float dtype) as an owned f32 tensor.
Tensor tp_slice(const std::string& name, const Tensor& full, const TpLayout& t, int head_dim);
// The same slice as an owned tensor in `full`'s own dtype (f32, bf16 or f16; ConfigError naming
// `name` for block-quantized or integer dtypes), allocated under `category`.
Tensor tp_slice_stored(const std::string& name, const Tensor& full, const TpLayout& t, int head_dim,
                       MemoryCategory category = MemoryCategory::kWeights);

// The config of one TP rank's slice: heads, KV heads, intermediate size and vocabulary per rank.
ModelConfig tp_local_config(const ModelConfig& full, const TpLayout& t);

}  // namespace lmstack::model
