// generate_rollouts and the log-prob mismatch figures (rollout.h).
#include "lmstack/rl/rollout.h"

#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"

namespace lmstack::rl {
namespace {

// Moves one finished request's events into its n rollouts.
void collect(serve::RequestStream& stream, int group, const std::vector<int32_t>& prompt, int n,
             std::vector<Rollout>& out) {
  const size_t first = out.size();
  for (int c = 0; c < n; ++c) out.push_back({group, prompt, {}, {}, "", 0});
  while (auto e = stream.next(std::chrono::milliseconds(0))) {
    using Kind = serve::StreamEvent::Kind;
    Rollout& r = out[first + static_cast<size_t>(e->choice)];
    if (e->kind == Kind::kError)
      throw_error<RequestError>("rollout of prompt {} failed: {}", group, e->error);
    if (e->kind == Kind::kDone) return;
    if (e->kind == Kind::kFinish) r.finish_reason = e->finish_reason;
    if (e->token.token < 0) continue;  // held-back text, or a finish without an EOS
    r.response.push_back(e->token.token);
    r.engine_logprobs.push_back(e->token.sample.logprob);
  }
  throw_error<RequestError>("rollout of prompt {}: the engine left the request unfinished", group);
}

}  // namespace

std::vector<Rollout> generate_rollouts(serve::Engine& engine,
                                       const std::vector<std::vector<int32_t>>& prompts, int n,
                                       const model::SamplingParams& params, int64_t first_index) {
  std::vector<std::shared_ptr<serve::RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    serve::EngineRequest req;
    req.prompt = prompts[i];
    req.params = params;
    req.n = n;
    const uint64_t index = static_cast<uint64_t>(first_index) + i;
    req.params.seed = params.seed + 1000003ull * index;  // choice c samples with seed + c
    auto stream = engine.submit(std::move(req));
    if (!stream) throw_error<RequestError>("rollout: the engine queue refused prompt {}", index);
    streams.push_back(*stream);
  }
  engine.run_until_idle();
  std::vector<Rollout> out;
  for (size_t i = 0; i < prompts.size(); ++i)
    collect(*streams[i], static_cast<int>(first_index + static_cast<int64_t>(i)), prompts[i], n,
            out);
  return out;
}

MismatchStats mismatch_stats(const std::vector<Rollout>& rollouts,
                             const std::vector<std::vector<float>>& trainer_logprobs) {
  LMSTACK_CHECK(rollouts.size() == trainer_logprobs.size(), "{} rollouts, {} log-prob rows",
                rollouts.size(), trainer_logprobs.size());
  MismatchStats s;
  double sum = 0;
  for (size_t i = 0; i < rollouts.size(); ++i) {
    const auto& e = rollouts[i].engine_logprobs;
    LMSTACK_CHECK(e.size() == trainer_logprobs[i].size(), "rollout {}: {} vs {} tokens", i,
                  e.size(), trainer_logprobs[i].size());
    for (size_t t = 0; t < e.size(); ++t) {
      const double gap = std::abs(static_cast<double>(e[t]) - trainer_logprobs[i][t]);
      s.max_gap = std::max(s.max_gap, gap);
      sum += gap;
      ++s.num_tokens;
    }
  }
  s.mean_gap = s.num_tokens ? sum / static_cast<double>(s.num_tokens) : 0;
  return s;
}

}  // namespace lmstack::rl
