// Expert + data parallelism's expert half (contracts in expert_data_parallel.h). Group
// layout, as Megatron orders its expert groups: EP innermost (ranks [g·ep, (g+1)·ep) form an
// expert-parallel group, a node's fast links carry the all-to-alls), the expert-data groups
// across them (ranks with equal r mod ep hold the same experts).
#include "lmstack/train/expert_data_parallel.h"

#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"

namespace lmstack::train {

EpPlacement ep_placement(const model::ModelConfig& config, int world, int rank, int ep) {
  const int E = config.moe.num_experts;
  if (!config.moe.enabled() || E <= 0)
    throw_error<ConfigError>("--ep {}: expert parallelism needs a mixture-of-experts model", ep);
  if (ep < 1 || world % ep != 0)
    throw_error<ConfigError>("--ep {} does not divide the {} ranks (mpirun -np)", ep, world);
  if (E % ep != 0)
    throw_error<ConfigError>("--ep {} does not divide the model's {} routed experts", ep, E);
  return {(rank % ep) * (E / ep), E / ep};
}

ExpertDataParallel::ExpertDataParallel(TrainModel& model, dist::Comm& world, int ep,
                                       ThreadPool& pool, const AdamWConfig& adam)
    : model_(model), pool_(pool) {
  placement_ = ep_placement(model.config(), world.size(), world.rank(), ep);
  const int r = world.rank();
  ep_comm_ = world.split(r / ep, r);
  expert_dp_comm_ = world.split(r % ep, r);
  runner_ = std::make_unique<ExpertParallelMoe>(*ep_comm_, model.config());
  LMSTACK_CHECK(runner_->first_expert() == placement_.first, "expert placement {} vs {}",
                runner_->first_expert(), placement_.first);
  for (ParamRef& p : model.params()) {
    const int e = expert_of(p.name);
    if (e < 0) continue;
    LMSTACK_CHECK(e >= placement_.first && e < placement_.first + placement_.count,
                  "rank {} holds {}, not one of its experts", r, p.name);
    params_.push_back(p);
  }
  opt_ = std::make_unique<AdamW>(params_, adam);
  model.set_moe_runner(runner_.get());
}

ExpertDataParallel::~ExpertDataParallel() { model_.set_moe_runner(nullptr); }

void ExpertDataParallel::zero_grads() {
  for (ParamRef& p : params_)
    std::memset(p.grad->raw_data(), 0, static_cast<size_t>(p.grad->nbytes()));
}

void ExpertDataParallel::finish_gradients() {
  if (expert_dp_comm_->size() == 1) return;
  int64_t n = 0;
  for (const ParamRef& p : params_) n += p.grad->numel();
  flat_.resize(static_cast<size_t>(n));
  int64_t at = 0;
  for (const ParamRef& p : params_) {
    std::memcpy(flat_.data() + at, p.grad->raw_data(), static_cast<size_t>(p.grad->nbytes()));
    at += p.grad->numel();
  }
  expert_dp_comm_->all_reduce(flat_.data(), n, DType::kF32);
  at = 0;
  for (ParamRef& p : params_) {
    std::memcpy(p.grad->raw_data(), flat_.data() + at, static_cast<size_t>(p.grad->nbytes()));
    at += p.grad->numel();
  }
}

double ExpertDataParallel::sum_squares_share() const {
  if (expert_dp_comm_->rank() != 0) return 0;
  double s = 0;
  for (const ParamRef& p : params_) s += sum_squares(pool_, p.grad->data<float>(), p.grad->numel());
  return s;
}

void ExpertDataParallel::scale_grads(float coef) {
  for (ParamRef& p : params_) {
    float* g = p.grad->data<float>();
    for (int64_t i = 0; i < p.grad->numel(); ++i) g[i] *= coef;
  }
}

void ExpertDataParallel::optimizer_step(float lr) { opt_->step(pool_, lr); }

int64_t ExpertDataParallel::weight_bytes() const {
  int64_t b = 0;
  for (const ParamRef& p : params_) b += p.value->nbytes();
  return b;
}

std::vector<WholeShardTensor> ExpertDataParallel::checkpoint_tensors() const {
  // Shapes are the same for every expert of a layer: take them from this rank's first one.
  std::vector<WholeShardTensor> out;
  const int E = model_.config().moe.num_experts, local = placement_.count;
  const bool writer = expert_dp_comm_->rank() == 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const int mine = expert_of(p.name);
    if (mine != placement_.first) continue;
    const std::string key = ".moe.experts." + std::to_string(mine) + ".";
    const size_t cut = p.name.find(key);
    for (int e = 0; e < E; ++e) {
      WholeShardTensor w;
      w.name = p.name.substr(0, cut) + ".moe.experts." + std::to_string(e) + "." +
               p.name.substr(cut + key.size());
      w.shape = p.value->shape();
      w.rank = e / local;  // world rank e / local is in expert-data group 0 and holds e
      out.push_back(std::move(w));
    }
  }
  // This rank's own tensors carry their data when it writes them.
  for (WholeShardTensor& w : out) {
    if (!writer) break;
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == w.name) {
        w.value = params_[i].value->data<float>();
        w.exp_avg = opt_->exp_avg()[i].data<float>();
        w.exp_avg_sq = opt_->exp_avg_sq()[i].data<float>();
      }
  }
  return out;
}

void ExpertDataParallel::load(const CheckpointReader& reader, const std::string& dir) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamRef& p = params_[i];
    const int64_t n = p.value->numel();
    reader.read(StateKind::kWeights, p.name, 0, n, p.value->data<float>());
    reader.read(StateKind::kExpAvg, p.name, 0, n, opt_->exp_avg()[i].data<float>());
    reader.read(StateKind::kExpAvgSq, p.name, 0, n, opt_->exp_avg_sq()[i].data<float>());
  }
  const std::string path = path_join(dir, "trainer_state.json");
  opt_->set_steps_taken(require<int64_t>(read_json_file(path), "optimizer_steps", path));
}

}  // namespace lmstack::train
