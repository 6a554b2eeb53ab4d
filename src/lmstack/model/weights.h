// ModelWeights: every parameter of a decoder, as Tensors shaped like Hugging Face's
// nn.Linear weights ([out_features, in_features]). Large matrices are views of the
// memory-mapped safetensors file when its layout already fits (f32/bf16/f16, [out, in]);
// GPT-2's Conv1D weights ([in, out], fused c_attn) are transposed and split once at load.
// Norm weights and biases are always f32 (small; converted at load). Matrices (and the
// embedding) may also be block-quantized views (q8_0, q4_K, int4_g128, ...: a model written by
// `lmstack quantize`, docs/formats/quantization.md). Unused fields are undefined Tensors
// (Tensor::defined() == false).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/tensor.h"
#include "lmstack/model/config.h"

namespace lmstack::model {

struct MoeLayerWeights;  // model/moe.h
struct MlaLayerWeights;  // model/mla.h

// New handles to the same tensors (weights.cc, where both types are complete).
std::shared_ptr<MoeLayerWeights> clone_handles(const MoeLayerWeights& w);
std::shared_ptr<MlaLayerWeights> clone_handles(const MlaLayerWeights& w);

// A shared_ptr whose copies hold their own copy of the pointee (a struct of Tensor handles, so
// the copy is cheap and shares storage): copying a ModelWeights then never aliases another
// copy's MoE/MLA fields, as its plain Tensor fields never do. TrainModel's master, gradient and
// compute copies and the checkpoint writer's optimizer-state view rely on that.
template <class T>
class HandlesPtr : public std::shared_ptr<T> {
 public:
  HandlesPtr() = default;
  HandlesPtr(std::shared_ptr<T> p) : std::shared_ptr<T>(std::move(p)) {}  // NOLINT: implicit
  HandlesPtr(const HandlesPtr& o) : std::shared_ptr<T>(o ? clone_handles(*o) : nullptr) {}
  HandlesPtr(HandlesPtr&&) noexcept = default;
  HandlesPtr& operator=(const HandlesPtr& o) {
    if (this != &o) std::shared_ptr<T>::operator=(o ? clone_handles(*o) : nullptr);
    return *this;
  }
  HandlesPtr& operator=(HandlesPtr&&) noexcept = default;
  ~HandlesPtr() = default;
};

struct LayerWeights {
  Tensor attn_norm, attn_norm_bias;  // [C] f32 (bias: LayerNorm only)
  Tensor wq, wk, wv, wo;             // [H*D, C], [Hkv*D, C], [Hkv*D, C], [C, H*D]
  Tensor bq, bk, bv, bo;             // [H*D], [Hkv*D], [Hkv*D], [C] f32 when present
  Tensor q_norm, k_norm;             // [D] f32 (Qwen3)
  Tensor mlp_norm, mlp_norm_bias;    // [C] f32
  Tensor w_gate, w_up, w_down;       // [F, C], [F, C], [C, F] (GELU MLPs have no w_gate)
  Tensor b_up, b_down;               // [F], [C] f32 (GPT-2)
  // Sparse layers (config.moe.is_sparse): the MoE block replaces w_gate/w_up/w_down.
  HandlesPtr<MoeLayerWeights> moe;
  // MLA (config.mla.enabled()): wq is q_proj or q_b_proj, wo is o_proj, wk/wv are unused.
  HandlesPtr<MlaLayerWeights> mla;
};

struct ModelWeights {
  Tensor embed;      // [V, C]
  Tensor pos_embed;  // [max_position, C] (GPT-2 only)
  std::vector<LayerWeights> layers;
  Tensor final_norm, final_norm_bias;  // [C] f32
  Tensor lm_head;                      // [V, C]; shares embed's storage when embeddings are tied

  // Bytes of all parameter storage (mapped or allocated), counting tied tensors once.
  int64_t bytes() const;
};

}  // namespace lmstack::model
