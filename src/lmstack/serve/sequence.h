// Sequence: one choice of one request as the scheduler sees it: its tokens (prompt, then
// generated), how many of them have KV in the cache, its block table, and the per-choice
// sampling and text state. A request with n > 1 has n sequences that share the prompt's
// blocks (forked after the prompt's prefill). Not here: HTTP, JSON, the queue of events.
//
// Thread safety: owned by the engine and touched only by its loop thread.
// Invariants: num_computed <= tokens.size(); blocks cover at least num_computed tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "lmstack/model/sampler.h"
#include "lmstack/model/stop_matcher.h"
#include "lmstack/serve/token_constraint.h"

namespace lmstack::serve {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  Sequence(int64_t seq_id, std::vector<int32_t> prompt, const model::SamplingParams& params)
      : id(seq_id),
        tokens(std::move(prompt)),
        num_prompt_tokens(static_cast<int>(tokens.size())),
        sampler(params),
        stops(params.stop),
        spec_rng(params.seed ^ 0x5DEECE66DULL) {}

  int64_t id;
  int64_t request_id = 0;
  int choice = 0;  // index among the request's n choices
  std::vector<int32_t> tokens;
  int num_prompt_tokens;
  int num_computed = 0;          // tokens [0, num_computed) have KV in `blocks`
  int num_cached_prompt = 0;     // prompt tokens found in the prefix cache at admission
  bool prompt_in_cache = false;  // the prompt's full blocks were offered to the cache
  std::vector<int32_t> blocks;   // the block table
  SeqStatus status = SeqStatus::kWaiting;
  int num_preemptions = 0;

  model::Sampler sampler;  // per-choice RNG (seed + choice)
  model::StopMatcher stops;
  std::function<std::string(int32_t)> detokenize;  // incremental, per choice
  std::unique_ptr<TokenConstraint> constraint;     // null: any token (structured output)

  // Speculative decoding (serve/speculative.h): tokens proposed to follow `tokens`, verified in
  // the next step, and the drafter's distribution q for each (empty: point masses). Set just
  // before scheduling, cut by the scheduler to what the step verifies (so during the step it
  // is exactly the scheduled draft), cleared on preemption and replaced at the next proposal.
  std::vector<int32_t> draft;
  std::vector<std::vector<float>> draft_probs;
  std::mt19937_64 spec_rng;  // draft draws and accept/reject coins; seeded from the request

  int num_tokens() const { return static_cast<int>(tokens.size()); }
  int num_generated() const { return num_tokens() - num_prompt_tokens; }
  // Tokens still to run through the model before the next sample.
  int num_uncomputed() const { return num_tokens() - num_computed; }
};

}  // namespace lmstack::serve
