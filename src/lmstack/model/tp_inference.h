// Tensor-parallel inference (Shoeybi et al. 2019, "Megatron-LM", §3): T ranks each hold one
// slice of every matrix (model/tensor_parallel.h's rules, shared with TP training) and its KV
// heads' part of the cache, and run the same Decoder::forward. The decoder sums the partial
// outputs of the row-parallel Wo and Wdown (one all-reduce per block half), of the
// vocabulary-parallel embedding (each rank looks up its own rows, zeros elsewhere), and gathers
// the lm_head's vocabulary slices of the logit rows. model/ knows no Comm (DESIGN rule 2): the
// caller (cli) fills TensorParallelGroup's hooks from its dist::Comm, tests from LocalComm.
// Serving: rank 0 owns the scheduler and block manager and mirrors each ForwardBatch to the
// other ranks (tp_send_batch), which run it on their own caches (tp_follow) until shutdown.
#pragma once

#include <utility>
#include <vector>

#include "lmstack/model/config.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/kv_cache.h"
#include "lmstack/model/tensor_parallel.h"
#include "lmstack/model/tensor_parallel_group.h"
#include "lmstack/model/weights.h"

namespace lmstack::model {

// ConfigError naming the field unless TP inference supports `c` at `tp` ranks: heads,
// intermediate and vocab sizes divisible by tp, KV heads divisible by tp or dividing it
// (replicated), a dense model (no MoE, no MLA).
void check_tp_inference_config(const ModelConfig& c, int tp);

// One rank's part of a model: its config (heads, KV heads, intermediate and vocab per rank;
// hidden size whole) and owned copies of its weight slices in their stored dtype (f32, bf16 or
// f16; ConfigError naming the tensor for block-quantized weights). Norms are replicated.
// The caller drops `whole` afterwards, so the rank holds only its slice.
struct TpShard {
  ModelConfig config;
  ModelWeights weights;
  TpLayout layout;
};
TpShard tp_shard(const ModelConfig& full, const ModelWeights& whole, int tp, int rank);

// Serve's mirroring: rank 0 sends each forward's batch, each step's copy-on-write block
// copies (before the forward that reads them) and finally a shutdown; each is two broadcasts,
// a header of kind and sizes, then the int32 arrays in one buffer.
void tp_send_batch(const TensorParallelGroup& g, const ForwardBatch& batch);
void tp_send_block_copies(const TensorParallelGroup& g,
                          const std::vector<std::pair<int32_t, int32_t>>& copies);
void tp_send_shutdown(const TensorParallelGroup& g);
// A follower rank's loop: run each batch on `cache` and each block copy in it, until rank 0
// sends shutdown. `cache` must have rank 0's num_blocks and block size. Returns the forwards run.
int64_t tp_follow(Decoder& decoder, KvCache& cache, const TensorParallelGroup& g);

}  // namespace lmstack::model
