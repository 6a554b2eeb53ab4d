// RlSession (session.h): model copies, the engine's f32 buffers and the weight sync.
#include "lmstack/rl/session.h"

#include <chrono>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/half.h"

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
  // The engine's own buffers, so the trainer can update its weights while nothing reads them
  // and sync_weights() publishes them in one place.
  if (options_.local_engine)
    replica_ = std::make_unique<EngineReplica>(config_, policy_->master(), pool, options_);
}

serve::Engine& RlSession::engine() { return replica().engine(); }

EngineReplica& RlSession::replica() {
  if (!replica_)
    throw_error<RequestError>("this RL session has no local engine (rollouts run on other ranks)");
  return *replica_;
}

double RlSession::optimizer_step() {
  const double norm = train::clip_grad_norm(pool_, policy_->params(), options_.grad_clip);
  adam_->step(pool_, options_.lr);
  policy_->zero_grads();
  return norm;
}

double RlSession::sync_weights() {
  const double start = seconds_now();
  replica().load(policy_->master());
  return seconds_now() - start;
}

namespace {

Tensor f32_copy(const Tensor& t) {
  if (t.dtype() == DType::kF32) return t.clone(MemoryCategory::kWeights);
  Tensor out = Tensor::zeros(t.shape(), DType::kF32, MemoryCategory::kWeights);
  if (t.dtype() == DType::kBF16)
    convert_bf16_to_f32(t.data<uint16_t>(), out.data<float>(), t.numel());
  else if (t.dtype() == DType::kF16)
    convert_f16_to_f32(t.data<uint16_t>(), out.data<float>(), t.numel());
  else
    throw_error<ConfigError>("rl: cannot roll out from a weight stored as {}",
                             dtype_name(t.dtype()));
  return out;
}

}  // namespace

EngineReplica::EngineReplica(const model::ModelConfig& config, const model::ModelWeights& init,
                             ThreadPool& pool, const SessionOptions& options)
    : tied_(config.tie_word_embeddings), weights_(init) {
  for (auto& [name, t] : train::weight_fields(weights_, tied_)) *t = f32_copy(*t);
  if (tied_) weights_.lm_head = weights_.embed;
  serve::EngineOptions e;
  e.block_size = options.block_size;
  e.num_blocks = (options.kv_tokens + e.block_size - 1) / e.block_size;
  e.max_context = options.max_context;
  e.scheduler.max_batch_tokens = options.max_batch_tokens;
  e.eos_ids = options.eos_ids;
  engine_ = std::make_unique<serve::Engine>(config, weights_, pool, e);
}

std::vector<std::pair<std::string, Tensor*>> EngineReplica::fields() {
  return train::weight_fields(weights_, tied_);
}

int64_t EngineReplica::load(const model::ModelWeights& src_weights) {
  model::ModelWeights src_handles = src_weights;  // handles only, for weight_fields
  auto src = train::weight_fields(src_handles, tied_);
  auto dst = fields();
  LMSTACK_CHECK(src.size() == dst.size(), "weight sync: {} vs {} tensors", src.size(), dst.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    LMSTACK_CHECK(src[i].second->nbytes() == dst[i].second->nbytes(), "weight sync: {}",
                  src[i].first);
    std::memcpy(dst[i].second->raw_data(), src[i].second->raw_data(),
                static_cast<size_t>(src[i].second->nbytes()));
    bytes += src[i].second->nbytes();
  }
  weights_changed();  // its KV came from the old weights
  return bytes;
}

void model_logprobs(train::TrainModel& model, const PackedBatch& b, float temperature,
                    std::vector<float>* logp, std::vector<float>* entropy) {
  std::vector<float> logits;
  model.logits(b.inputs.data(), b.batch, b.seq, logits);
  token_logprobs(logits.data(), b, model.config().vocab_size, temperature, logp, entropy);
}

}  // namespace lmstack::rl
