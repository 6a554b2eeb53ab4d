// Rollouts through the serving Engine: every prompt is one request with n choices, so the
// engine batches them continuously and the n samples of a prompt share its KV blocks (forked
// after the prompt's prefill; repeated prompts also hit the radix prefix cache). Each sampled
// token comes back with the engine's log-probability of it under the tempered distribution
// (model/sampler.h: log softmax(logits / T), before top-k/top-p truncation), which the
// trainer's recomputation must match (mismatch_stats).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/model/sampler.h"
#include "lmstack/serve/engine.h"

namespace lmstack::rl {

struct Rollout {
  int group = 0;                       // index of its prompt: the GRPO group
  std::vector<int32_t> prompt;         // prompt token ids
  std::vector<int32_t> response;       // sampled ids; ends with the EOS when it ended on one
  std::vector<float> engine_logprobs;  // [response.size()]: the engine's log p of each
  std::string finish_reason;           // "stop" (EOS) or "length"
  double reward = 0;
};

// Runs `prompts` × n samples to completion on `engine` (not start()ed) and returns them in
// prompt order, choice order within a prompt. Choice c of prompt i samples with seed
// params.seed + 1000003·(first_index + i) + c and is in group first_index + i: a rollout
// rank that runs prompts [first_index, ...) of a step draws what one process would.
// Throws RequestError when the engine refuses a request or fails one.
std::vector<Rollout> generate_rollouts(serve::Engine& engine,
                                       const std::vector<std::vector<int32_t>>& prompts, int n,
                                       const model::SamplingParams& params,
                                       int64_t first_index = 0);

// |trainer log p − engine log p| over every response token.
struct MismatchStats {
  double max_gap = 0, mean_gap = 0;
  int64_t num_tokens = 0;
};
// `trainer_logprobs[i]` is parallel to rollouts[i].response.
MismatchStats mismatch_stats(const std::vector<Rollout>& rollouts,
                             const std::vector<std::vector<float>>& trainer_logprobs);

}  // namespace lmstack::rl
