// RlSession: the three views of one model an RL run needs, in one process. The policy
// (train::TrainModel, f32 master weights and gradients), a frozen reference copy for the KL
// term, and a serving Engine that does the rollouts from its own f32 copy of the policy's
// weights (an EngineReplica). sync_weights() copies the trainer's weights into the engine's
// buffers in place (no file round-trip) and drops the prefix cache, whose KV was computed with
// the old weights. When the rollouts run on other ranks (remote.h), the trainer's session has
// no engine (SessionOptions::local_engine = false) and each rollout rank holds an
// EngineReplica alone. Not here: the algorithms (grpo.h, ppo.h, dpo.h), the run loop
// (driver.h). Thread safety: one thread drives a session; the engine is stepped, never
// start()ed.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"
#include "lmstack/rl/policy_loss.h"
#include "lmstack/serve/engine.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/model_train.h"

namespace lmstack::rl {

struct SessionOptions {
  int64_t kv_tokens = 32768;  // the engine's KV pool, in tokens
  int block_size = 16;
  int max_batch_tokens = 2048;  // the engine's token budget per forward step
  int max_context = 0;          // 0: the model's max_position
  float lr = 1e-5f;
  float grad_clip = 1.0f;                              // global L2 norm (0: off)
  train::AdamWConfig adam{0.9f, 0.999f, 1e-8f, 0.0f};  // TRL/verl RL defaults: no decay
  std::vector<int32_t> eos_ids;
  bool local_engine = true;  // false: rollouts on other ranks, no engine here (remote.h)
};

// A serving Engine over its own f32 copy of a model's weights, which load() overwrites in
// place (the engine's Decoder keeps references to these buffers, so nothing is re-created).
class EngineReplica {
 public:
  // `init` is converted to f32 tensor by tensor (the trainer's master dtype).
  EngineReplica(const model::ModelConfig& config, const model::ModelWeights& init, ThreadPool& pool,
                const SessionOptions& options);
  serve::Engine& engine() { return *engine_; }
  const model::ModelWeights& weights() const { return weights_; }
  // Every f32 buffer in train::weight_fields order (tied lm_head skipped): what a sync fills.
  std::vector<std::pair<std::string, Tensor*>> fields();
  // weights := src (same layout, f32), then prefix cache dropped. Returns the bytes copied.
  int64_t load(const model::ModelWeights& src);
  // Call after writing into fields() directly: the cached KV came from the old weights.
  void weights_changed() { engine_->clear_prefix_cache(); }

 private:
  bool tied_;
  model::ModelWeights weights_;
  std::unique_ptr<serve::Engine> engine_;
};

class RlSession {
 public:
  // `policy_init` becomes the policy (and the engine's weights); `ref_init` the frozen
  // reference (pass policy_init for the usual "reference = starting policy"). Both are copied.
  RlSession(const model::ModelConfig& config, const model::ModelWeights& policy_init,
            const model::ModelWeights& ref_init, ThreadPool& pool, SessionOptions options);

  train::TrainModel& policy() { return *policy_; }
  train::TrainModel& ref() { return *ref_; }
  serve::Engine& engine();  // the local engine (throws when local_engine is false)
  EngineReplica& replica();
  ThreadPool& pool() { return pool_; }
  const model::ModelConfig& config() const { return config_; }
  const SessionOptions& options() const { return options_; }
  const model::ModelWeights& engine_weights() { return replica().weights(); }

  // Clips the policy's accumulated gradients, takes one AdamW step at options().lr and zeroes
  // the gradients. Returns the gradient norm before clipping.
  double optimizer_step();
  // The engine's weights := the policy's (memcpy per tensor), prefix cache dropped. Seconds.
  double sync_weights();

 private:
  model::ModelConfig config_;
  ThreadPool& pool_;
  SessionOptions options_;
  std::unique_ptr<train::TrainModel> policy_, ref_;
  std::unique_ptr<train::AdamW> adam_;
  std::unique_ptr<EngineReplica> replica_;
};

// Log-probs (and entropies, when not null) of the response tokens of `b` under `model` at
// temperature τ, in token_logprobs' order: a forward without gradients.
void model_logprobs(train::TrainModel& model, const PackedBatch& b, float temperature,
                    std::vector<float>* logp, std::vector<float>* entropy);

// Seconds of monotonic time since `start` (a steady_clock reading in seconds).
double seconds_now();

}  // namespace lmstack::rl
