// Single-request generation on the one forward path: prefill the prompt in one batch, then
// decode one token per step, sampling each from the logits, until EOS, a stop string,
// max_tokens or the caller says stop. Text comes from the caller's incremental detokenizer,
// so this file knows token ids only. (Many requests at once is serve's Engine; this is the
// same Decoder::forward with a batch of one.)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lmstack/model/decoder.h"
#include "lmstack/model/sampler.h"

namespace lmstack::model {

struct GeneratedToken {
  int32_t token;
  std::string text;  // text released by this token (may be empty: partial UTF-8, held stop)
  SampleResult sample;
};

struct GenerateCallbacks {
  // Incremental detokenizer: text completed by this token (complete UTF-8 only).
  std::function<std::string(int32_t)> detokenize;
  // Called per generated token; return false to stop (e.g. Ctrl-C).
  std::function<bool(const GeneratedToken&)> on_token;
  // When set, receives the logits of every prompt position (after prefill) and of every
  // decode step, row by row ([vocab] floats each), for --dump-logits.
  std::function<void(const float* logits, int vocab)> on_logits;
  TraceFn trace;  // per-layer trace of the prefill (generate --trace)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (EOS excluded)
  std::string text;             // all emitted text
  std::string finish_reason;    // "stop" (EOS or stop string), "length", "cancelled"
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;  // of which reused from the previous call's KV
  double prefill_seconds = 0;
  double decode_seconds = 0;  // all decode steps, sampling included
  // MoE: bytes of expert matrices the decode steps read (each chosen expert once per step).
  int64_t decode_expert_bytes = 0;
  std::vector<float> last_logits;  // logits that chose the first generated token
};

class Generator {
 public:
  // Allocates a KV cache for `max_context` tokens (prompt + generated). Config and weights
  // must outlive the generator.
  // kv_dtype: the cache's element type (KvCache; ConfigError for anything but f32/bf16/int8).
  Generator(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
            int max_context, int block_size = 16, DType kv_dtype = DType::kF32);

  // Throws RequestError when prompt + max_tokens exceed max_context or the prompt is empty.
  // The KV of the longest prefix shared with the previous call's sequence is reused (a chat
  // re-renders the whole conversation each turn; only the new suffix is prefilled).
  GenerateResult generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                          const std::vector<int32_t>& eos_ids, const GenerateCallbacks& callbacks);

  // Tensor parallelism (tp_inference.h): config and weights are this rank's slice. Every rank
  // calls generate with the same prompt and parameters; rank 0's sampled token and its
  // on_token verdict are broadcast, so all ranks run the same steps and return the same tokens.
  void set_tensor_parallel(const TensorParallelGroup& group) {
    decoder_.set_tensor_parallel(group);
  }
  // Forgets the cached sequence (the next call prefills everything).
  void reset() { cached_tokens_.clear(); }
  // Tokens whose KV is in the cache (positions 0..n-1).
  int cached_tokens() const { return static_cast<int>(cached_tokens_.size()); }
  int max_context() const { return max_context_; }
  // Tokens the KV cache holds: max_context rounded up to whole blocks.
  int kv_capacity_tokens() const { return static_cast<int>(cache_.num_blocks()) * block_size_; }
  int64_t kv_cache_bytes() const { return cache_.bytes(); }
  DType kv_dtype() const { return cache_.dtype(); }
  const Decoder& decoder() const { return decoder_; }

 private:
  const ModelConfig& config_;
  Decoder decoder_;
  int max_context_;
  int block_size_;
  KvCache cache_;
  std::vector<int32_t> cached_tokens_;
};

}  // namespace lmstack::model
