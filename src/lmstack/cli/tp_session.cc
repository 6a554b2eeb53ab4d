// Entering tensor-parallel inference (see tp_session.h).
#include "lmstack/cli/tp_session.h"

#include <cstdio>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm.h"
#include "lmstack/model/tp_inference.h"
#include "lmstack/train/tensor_parallel.h"

namespace lmstack::cli {

TpSession enter_tensor_parallel(ModelSession& s, int tp) {
  TpSession t;
  if (tp <= 1) return t;
  model::check_tp_inference_config(s.model.config, tp);
  dist::Comm& world = dist::world();
  if (world.size() != tp)
    throw_error<ConfigError>("--tp {} needs {} ranks (mpirun -np {}), this run has {}", tp, tp, tp,
                             world.size());
  t.rank = world.rank(), t.size = tp;
  t.group = train::tp_group_of(world);
  t.whole_weight_bytes = s.model.weights.bytes();
  model::TpShard shard = model::tp_shard(s.model.config, s.model.weights, tp, t.rank);
  // Assigning drops the whole model's tensors (and with them its file mapping).
  s.model.config = std::move(shard.config);
  s.model.weights = std::move(shard.weights);
  return t;
}

void print_tp_rank_bytes(const TpSession& t, int64_t weight_bytes, int64_t kv_bytes) {
  if (t.size <= 1) return;
  std::fprintf(
      stderr, "tp rank %d of %d: weights %.2f MB (whole model %.2f MB), KV cache %.2f MB\n", t.rank,
      t.size, static_cast<double>(weight_bytes) / 1e6,
      static_cast<double>(t.whole_weight_bytes) / 1e6, static_cast<double>(kv_bytes) / 1e6);
}

}  // namespace lmstack::cli
