// Prefill + decode loop for one request (see generate.h).
#include "lmstack/model/generate.h"

#include <algorithm>
#include <numeric>

#include "lmstack/core/error.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/stop_matcher.h"

namespace lmstack::model {

Generator::Generator(const ModelConfig& config, const ModelWeights& weights, ThreadPool& pool,
                     int max_context, int block_size, DType kv_dtype)
    : config_(config),
      decoder_(config, weights, pool),
      max_context_(max_context),
      block_size_(block_size),
      cache_(config, (max_context + block_size - 1) / block_size, block_size, kv_dtype) {}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const SamplingParams& params,
                                   const std::vector<int32_t>& eos_ids,
                                   const GenerateCallbacks& cb) {
  params.validate();
  if (prompt.empty()) throw_error<RequestError>("the prompt is empty (no tokens)");
  const int total = static_cast<int>(prompt.size()) + params.max_tokens;
  if (total > max_context_)
    throw_error<RequestError>("prompt ({} tokens) + max_tokens ({}) = {} exceeds the context of {}",
                              prompt.size(), params.max_tokens, total, max_context_);
  // This generator owns the whole cache: the blocks are simply 0..n-1.
  std::vector<int32_t> blocks((total + block_size_ - 1) / block_size_);
  std::iota(blocks.begin(), blocks.end(), 0);
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(prompt.size());
  std::vector<int32_t> history = prompt;
  std::vector<float> logits;
  Sampler sampler(params);
  StopMatcher stops(params.stop);
  const int vocab = decoder_.vocab_size();
  const TensorParallelGroup& tp = decoder_.tensor_parallel();
  // Under TP rank 0 decides (sampling, cancellation); the other ranks follow its choice.
  const auto agree = [&](int32_t value) {
    if (tp.enabled()) tp.broadcast_i32(&value, 1);
    return value;
  };

  // Reuse the KV of the common prefix, but always compute at least the last prompt token.
  size_t cached = 0;
  while (cached + 1 < prompt.size() && cached < cached_tokens_.size() &&
         cached_tokens_[cached] == prompt[cached])
    ++cached;
  if (cb.on_logits) cached = 0;  // every prompt position's logits were asked for
  result.cached_prompt_tokens = static_cast<int>(cached);
  cached_tokens_.clear();

  Timer timer;
  ForwardBatch prefill;
  prefill.add_sequence(
      std::vector<int32_t>(prompt.begin() + static_cast<std::ptrdiff_t>(cached), prompt.end()),
      static_cast<int>(cached), blocks, block_size_, true, static_cast<bool>(cb.on_logits));
  decoder_.forward(prefill, cache_, logits, cb.trace);
  if (cb.on_logits)
    for (size_t r = 0; r < prefill.logit_rows.size(); ++r) cb.on_logits(&logits[r * vocab], vocab);
  std::span<float> next(logits.data() + logits.size() - vocab, static_cast<size_t>(vocab));
  result.last_logits.assign(next.begin(), next.end());
  result.prefill_seconds = timer.seconds();
  timer.reset();
  const int64_t expert_bytes_before = decoder_.moe_stats().expert_bytes_read;

  result.finish_reason = "length";
  for (int step = 0; step < params.max_tokens; ++step) {
    if (step > 0) {
      ForwardBatch decode;
      decode.add_sequence({history.back()}, static_cast<int>(history.size()) - 1, blocks,
                          block_size_, true);
      decoder_.forward(decode, cache_, logits, nullptr);
      if (cb.on_logits) cb.on_logits(logits.data(), vocab);
      next = std::span<float>(logits.data(), static_cast<size_t>(vocab));
    }
    GeneratedToken gen;
    gen.sample = sampler.sample(next, history);
    gen.token = gen.sample.token = agree(gen.sample.token);
    if (!params.ignore_eos &&
        std::find(eos_ids.begin(), eos_ids.end(), gen.token) != eos_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    history.push_back(gen.token);
    result.tokens.push_back(gen.token);
    gen.text = stops.push(cb.detokenize ? cb.detokenize(gen.token) : "");
    result.text += gen.text;
    const bool keep_going = agree(!cb.on_token || cb.on_token(gen) ? 1 : 0) != 0;
    if (stops.stopped()) {
      result.finish_reason = "stop";
      break;
    }
    if (!keep_going) {
      result.finish_reason = "cancelled";
      break;
    }
  }
  const std::string tail = stops.flush();
  if (!tail.empty()) {
    result.text += tail;
    if (cb.on_token) cb.on_token(GeneratedToken{-1, tail, {}});
  }
  result.decode_seconds = timer.seconds();
  result.decode_expert_bytes = decoder_.moe_stats().expert_bytes_read - expert_bytes_before;
  // Every token but the last sampled one went through the forward: its KV is valid.
  cached_tokens_ = history;
  if (!result.tokens.empty()) cached_tokens_.pop_back();
  return result;
}

}  // namespace lmstack::model
