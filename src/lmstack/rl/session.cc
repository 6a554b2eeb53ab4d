// RlSession (session.h): model copies, the engine's f32 buffers and the weight sync.
#include "lmstack/rl/session.h"

#include <chrono>
#include <cstring>

#include "lmstack/core/error.h"

namespace lmstack::rl {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

RlSession::RlSession(const model::ModelConfig& config, const model::ModelWeights& policy_init,
                     const model::ModelWeights& ref_init, ThreadPool& pool, SessionOptions options)
    : config_(config), pool_(pool), options_(std::move(options)) {
  policy_ =
      std::make_unique<train::TrainModel>(config_, policy_init, pool, train::TrainModelOptions{});
  ref_ = std::make_unique<train::TrainModel>(config_, ref_init, pool, train::TrainModelOptions{});
  adam_ = std::make_unique<train::AdamW>(policy_->params(), options_.adam);
  // The engine's own buffers: clones of the f32 masters, so the trainer can update its
  // weights while nothing reads them and sync_weights() publishes them in one place.
  const bool tied = config_.tie_word_embeddings;
  engine_weights_ = policy_->master();
  for (auto& [name, t] : train::weight_fields(engine_weights_, tied))
    *t = t->clone(MemoryCategory::kWeights);
  if (tied) engine_weights_.lm_head = engine_weights_.embed;
  serve::EngineOptions e;
  e.block_size = options_.block_size;
  e.num_blocks = (options_.kv_tokens + e.block_size - 1) / e.block_size;
  e.max_context = options_.max_context;
  e.scheduler.max_batch_tokens = options_.max_batch_tokens;
  e.eos_ids = options_.eos_ids;
  engine_ = std::make_unique<serve::Engine>(config_, engine_weights_, pool, e);
}

double RlSession::optimizer_step() {
  const double norm = train::clip_grad_norm(pool_, policy_->params(), options_.grad_clip);
  adam_->step(pool_, options_.lr);
  policy_->zero_grads();
  return norm;
}

double RlSession::sync_weights() {
  const double start = seconds_now();
  const bool tied = config_.tie_word_embeddings;
  auto src = train::weight_fields(policy_->master(), tied);
  auto dst = train::weight_fields(engine_weights_, tied);
  LMSTACK_CHECK(src.size() == dst.size(), "weight sync: {} vs {} tensors", src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) {
    LMSTACK_CHECK(src[i].second->nbytes() == dst[i].second->nbytes(), "weight sync: {}",
                  src[i].first);
    std::memcpy(dst[i].second->raw_data(), src[i].second->raw_data(),
                static_cast<size_t>(src[i].second->nbytes()));
  }
  engine_->clear_prefix_cache();  // its KV came from the old weights
  return seconds_now() - start;
}

void model_logprobs(train::TrainModel& model, const PackedBatch& b, float temperature,
                    std::vector<float>* logp, std::vector<float>* entropy) {
  std::vector<float> logits;
  model.logits(b.inputs.data(), b.batch, b.seq, logits);
  token_logprobs(logits.data(), b, model.config().vocab_size, temperature, logp, entropy);
}

}  // namespace lmstack::rl
