// `--tp T` for generate and serve (docs/serve.md "Tensor-parallel inference"): under
// `mpirun -np T`, each rank replaces its loaded model by its tensor-parallel slice
// (model/tp_inference.h) and gets the decoder's collectives over the MPI world.
#pragma once

#include <cstdint>

#include "lmstack/cli/model_session.h"
#include "lmstack/model/tensor_parallel_group.h"

namespace lmstack::cli {

struct TpSession {
  int rank = 0, size = 1;
  model::TensorParallelGroup group;  // size 1: no TP (the hooks are unset)
  int64_t whole_weight_bytes = 0;    // the unsplit model's, for the per-rank report
  bool leader() const { return rank == 0; }
};

// tp <= 1: nothing changes. Otherwise ConfigError unless the world has exactly tp ranks
// (mpirun -np tp) and the model can be split (check_tp_inference_config), then s.model's
// config and weights become this rank's slice; the whole weights are released.
TpSession enter_tensor_parallel(ModelSession& s, int tp);

// One line per rank on stderr: the bytes of weights and KV cache it holds.
void print_tp_rank_bytes(const TpSession& t, int64_t weight_bytes, int64_t kv_bytes);

}  // namespace lmstack::cli
