// The one forward path of lmstack (DESIGN principle 3): a decoder-only transformer run over
// a flattened batch of tokens from any number of sequences, each with its own positions and
// KV block table. Prefill (many tokens of a sequence), decode (one token per sequence),
// chunked prefill and any mix of them are the same call. Every architecture of config.h
// (Llama/Mistral/Qwen2/Qwen3/GPT-2) runs here from its config flags.
//
// Thread safety: a Decoder owns scratch buffers; one forward at a time per Decoder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/kv_cache.h"
#include "lmstack/model/mla.h"
#include "lmstack/model/moe.h"
#include "lmstack/model/tensor_parallel_group.h"
#include "lmstack/model/weights.h"

namespace lmstack::model {

// Sequences s = 0..S-1 own token rows [query_start[s], query_start[s+1]).
struct ForwardBatch {
  std::vector<int32_t> tokens;       // [T] token ids
  std::vector<int32_t> positions;    // [T] absolute positions
  std::vector<int32_t> slots;        // [T] KV slot each token is written to
  std::vector<int32_t> query_start;  // [S + 1]
  std::vector<int32_t> context_len;  // [S] tokens in the KV cache after this step
  std::vector<int32_t> block_table;  // [S * max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  std::vector<int32_t> logit_rows;  // rows of [0, T) whose logits are wanted, in output order

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_seqs() const { return static_cast<int>(context_len.size()); }
  // Appends a sequence whose first `num_cached` tokens are already in the cache and whose
  // `new_tokens` are computed now; `blocks` must cover num_cached + new_tokens.size()
  // tokens. When want_logits is set, the last new token's row joins logit_rows (all rows
  // when all_logits is set).
  void add_sequence(const std::vector<int32_t>& new_tokens, int num_cached,
                    const std::vector<int32_t>& blocks, int block_size, bool want_logits,
                    bool all_logits = false);
};

// Per-layer observation for `generate --trace`: hidden-state L2 norm of the first logit row
// after the layer, and the layer's wall time.
struct LayerTrace {
  int layer;
  double ms;
  double hidden_norm;
};
using TraceFn = std::function<void(const LayerTrace&)>;

// The inputs of each group of linear layers that read the same activations: q/k/v (after the
// attention norm), o (the attention output), gate/up (after the MLP norm), down (the MLP's
// hidden activations). Observed by AWQ calibration (model/quantize_awq.h).
enum class LinearInput : uint8_t { kQkv, kO, kGateUp, kDown };
inline constexpr int kNumLinearInputs = 4;
using LinearInputObserver =
    std::function<void(int layer, LinearInput site, const float* x, int64_t rows, int64_t width)>;
// Sees each MoE layer's routing of the batch's rows (chosen[rows * k], best first).
using RouterObserver = std::function<void(int layer, const MoeRouting& routing, int64_t rows)>;

class Decoder {
 public:
  // The decoder keeps references to config and weights: they must outlive it.
  Decoder(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool);

  // Runs the batch, writing its K/V into `cache`, and returns logits for batch.logit_rows:
  // [logit_rows.size(), vocab_size] row-major in `logits` (resized). Throws RequestError for
  // a token id outside the vocabulary or a position past max_position (GPT-2).
  void forward(const ForwardBatch& batch, KvCache& cache, std::vector<float>& logits,
               const TraceFn& trace = nullptr);

  // Optional: during forward, `fn` sees every linear group's f32 input [rows, width] before
  // the group runs, on the calling thread. nullptr removes it.
  void set_linear_input_observer(LinearInputObserver fn) { observer_ = std::move(fn); }

  // Optional: during forward, `fn` sees every MoE layer's routing. nullptr removes it.
  void set_router_observer(RouterObserver fn) { router_observer_ = std::move(fn); }
  // MoE counters since construction (expert bytes read, tokens per expert); zero for dense models.
  const MoeStats& moe_stats() const { return moe_stats_; }
  // Tensor parallelism (tp_inference.h): config and weights are this rank's slice; the forward
  // all-reduces the row-parallel outputs and the embedding and gathers the logits' vocabulary
  // slices through `group`'s hooks. Logits then have vocab_size() = T x the local vocabulary.
  void set_tensor_parallel(TensorParallelGroup group) { tp_ = std::move(group); }
  const TensorParallelGroup& tensor_parallel() const { return tp_; }
  // Columns of the logits forward returns (the whole vocabulary, also under TP).
  int vocab_size() const { return config_.vocab_size * tp_.size; }
  // MLA: which form of attention each sequence uses (kAuto: absorbed for decode rows).
  void set_mla_mode(MlaMode mode) { mla_.mode = mode; }

  const ModelConfig& config() const { return config_; }
  // Bytes of the scratch activations currently held.
  int64_t activation_bytes() const;

 private:
  void ensure_scratch(int64_t tokens);
  void embed(const ForwardBatch& batch, float* x);
  void attention_block(int layer, const ForwardBatch& batch, KvCache& cache, float* x);
  void mlp_block(int layer, int64_t tokens, float* x);
  void embed_vocab_parallel(const ForwardBatch& batch, float* x);
  void row_parallel_add(float* x, const float* in, const Tensor& w, const Tensor& bias, int64_t t);
  void lm_head(std::vector<float>& logits, const float* h, int64_t rows);
  void norm(float* y, const float* x, const Tensor& weight, const Tensor& bias, int64_t rows);
  void observe(int layer, LinearInput site, const float* x, int64_t rows, int64_t width) {
    if (observer_) observer_(layer, site, x, rows, width);
  }

  const ModelConfig& config_;
  const ModelWeights& weights_;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;
  int64_t scratch_tokens_ = 0;
  HostBuffer x_, h_, q_, k_, v_, attn_, gate_, up_;  // x_: the residual stream
  LinearInputObserver observer_;
  RouterObserver router_observer_;
  MoeScratch moe_scratch_;
  MoeStats moe_stats_;
  MlaState mla_;
  TensorParallelGroup tp_;
  std::vector<float> tp_local_logits_, tp_gathered_;
};

}  // namespace lmstack::model
