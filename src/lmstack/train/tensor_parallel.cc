// What TP/PP training refuses, and a Comm as a TP decoder's hooks (see tensor_parallel.h).
#include "lmstack/train/tensor_parallel.h"

#include "lmstack/core/error.h"

namespace lmstack::train {

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

model::TensorParallelGroup tp_group_of(dist::Comm& comm) {
  model::TensorParallelGroup g;
  g.rank = comm.rank(), g.size = comm.size();
  g.all_reduce_sum = [&comm](float* buf, int64_t n) { comm.all_reduce(buf, n, DType::kF32); };
  g.all_gather = [&comm](const float* send, float* recv, int64_t n) {
    comm.all_gather(send, recv, n, DType::kF32);
  };
  g.broadcast_i32 = [&comm](int32_t* buf, int64_t n) { comm.broadcast(buf, n, DType::kI32, 0); };
  return g;
}

}  // namespace lmstack::train
