// Where the run loop (driver.h) gets its rollouts and sends its weights: the step's only two
// contacts with the engines. LocalRollouts runs them on the session's own engine (one
// process, the default); RemoteRollouts (remote.h) on rollout ranks over a dist::Comm. The
// loop is the same for both, so a distributed run computes what the one-process run does.
#pragma once

#include <cstdint>
#include <vector>

#include "lmstack/model/sampler.h"
#include "lmstack/model/weights.h"
#include "lmstack/rl/rollout.h"
#include "lmstack/rl/session.h"

namespace lmstack::rl {

struct SyncStats {
  double seconds = 0;
  int64_t bytes = 0;  // f32 weight bytes copied (local) or broadcast by the trainer (remote)
};

class RolloutBackend {
 public:
  virtual ~RolloutBackend() = default;
  // `prompts` × n samples, as generate_rollouts returns them (order, seeds, groups).
  virtual std::vector<Rollout> generate(const std::vector<std::vector<int32_t>>& prompts, int n,
                                        const model::SamplingParams& params) = 0;
  // The engines' weights := `policy` (the trainer's f32 masters); prefix caches dropped.
  virtual SyncStats sync(const model::ModelWeights& policy) = 0;
};

// Rollouts on the session's own engine (the one-process layout).
class LocalRollouts : public RolloutBackend {
 public:
  explicit LocalRollouts(RlSession& s) : s_(s) {}
  std::vector<Rollout> generate(const std::vector<std::vector<int32_t>>& prompts, int n,
                                const model::SamplingParams& params) override {
    return generate_rollouts(s_.engine(), prompts, n, params);
  }
  SyncStats sync(const model::ModelWeights& policy) override {
    const double start = seconds_now();
    const int64_t bytes = s_.replica().load(policy);
    return {seconds_now() - start, bytes};
  }

 private:
  RlSession& s_;
};

}  // namespace lmstack::rl
