// TP training's view of the slicing rules: the layout and slicers live in model/tensor_parallel.h
// (shared with TP inference); what only training refuses is here, and the bridge from a
// dist::Comm to the hooks a TP Decoder calls (this layer sees both model/ and dist/).
#pragma once

#include "lmstack/dist/comm.h"
#include "lmstack/model/config.h"
#include "lmstack/model/tensor_parallel.h"
#include "lmstack/model/tensor_parallel_group.h"

namespace lmstack::train {

using model::tp_block;
using model::tp_block_shape;
using model::tp_layout;
using model::tp_local_config;
using model::tp_range;
using model::tp_slice;
using model::tp_split_of;
using model::TpBlock;
using model::TpLayout;
using model::TpSplit;

// ConfigError unless TP/PP training supports the architecture: the llama family (RMSNorm,
// RoPE, SwiGLU, optional q/k/v biases, sliding windows). GPT-2 (LayerNorm, GELU, learned
// positions) and Qwen3's per-head q/k norms are refused by name.
void check_model_parallel_config(const model::ModelConfig& c);

// A TP decoder's collectives (model/tensor_parallel_group.h) over `comm`, which must outlive
// the returned group: f32 sum all-reduce, all-gather, and int32 broadcast from rank 0.
model::TensorParallelGroup tp_group_of(dist::Comm& comm);

}  // namespace lmstack::train
