// Expert parallelism combined with data parallelism (DeepSpeed-MoE's E + D layout; Rajbhandari
// et al. 2022 §4): N ranks, expert-parallel groups of `ep` consecutive ranks (ep divides N and
// the routed experts). Every rank is a data-parallel rank for the dense part (attention, norms,
// routers, shared experts, embeddings, head): DataParallel with DataParallelOptions::exclude
// reduces those over all N ranks. Rank r holds only the experts [i·E/ep, (i+1)·E/ep) of
// i = r mod ep, in every sparse layer; the N/ep ranks holding the same experts (the expert-data
// group: ranks with equal r mod ep) all-reduce the experts' gradients after the backward. This
// class owns the two sub-communicators, the MoE runner (expert_parallel.h) and the experts'
// AdamW; the trainer drives it beside its DataParallel (trainer.cc). Tests:
// tests/train/expert_parallel_test.cc (in-process ranks) and expert_parallel_mpitest.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lmstack/dist/comm.h"
#include "lmstack/train/adamw.h"
#include "lmstack/train/expert_parallel.h"
#include "lmstack/train/model_train.h"
#include "lmstack/train/sharded_checkpoint.h"

namespace lmstack::train {

// The experts rank `rank` of a world of `world` holds under --ep `ep`: [first, first + count).
// ConfigError naming the option when ep does not divide the world or the experts, or the model
// has none.
struct EpPlacement {
  int first = 0, count = 0;
};
EpPlacement ep_placement(const model::ModelConfig& config, int world, int rank, int ep);

class ExpertDataParallel {
 public:
  // `model` must hold exactly ep_placement(...)'s experts (keep_experts) and come before its
  // DataParallel (which must exclude is_expert_param). Installs the MoE runner on the model.
  // `world`, `model` and `pool` must outlive it. Collective (splits `world`).
  ExpertDataParallel(TrainModel& model, dist::Comm& world, int ep, ThreadPool& pool,
                     const AdamWConfig& adam);
  ~ExpertDataParallel();

  static bool is_expert_param(const std::string& name) { return expert_of(name) >= 0; }

  void zero_grads();
  // After the last micro-batch's backward: sums the expert gradients over the expert-data
  // group (one all-reduce of all of them; nothing when the group has one rank).
  void finish_gradients();
  // This rank's share of the global Σ g² of the experts: its experts' on expert-data rank 0,
  // 0 elsewhere, so that the sum over the world counts every expert once.
  double sum_squares_share() const;
  void scale_grads(float coef);
  void optimizer_step(float lr);

  int ep() const { return ep_comm_->size(); }
  const EpPlacement& placement() const { return placement_; }
  std::vector<ParamRef>& params() { return params_; }
  AdamW& optimizer() { return *opt_; }
  dist::Comm& ep_comm() { return *ep_comm_; }
  dist::Comm& expert_dp_comm() { return *expert_dp_comm_; }
  // Bytes of expert weights, gradients and optimizer state held here.
  int64_t weight_bytes() const;
  // Every routed expert tensor of the model for save_sharded_checkpoint: written whole by the
  // rank of expert-data group 0 (world ranks 0..ep-1) that holds it.
  std::vector<WholeShardTensor> checkpoint_tensors() const;
  // Reads this rank's experts (weights, m, v) and the step count from any checkpoint layout.
  void load(const CheckpointReader& reader, const std::string& dir);

 private:
  TrainModel& model_;
  ThreadPool& pool_;
  EpPlacement placement_;
  std::unique_ptr<dist::Comm> ep_comm_, expert_dp_comm_;
  std::unique_ptr<ExpertParallelMoe> runner_;
  std::vector<ParamRef> params_;
  std::unique_ptr<AdamW> opt_;
  std::vector<float> flat_;  // the all-reduce buffer
};

}  // namespace lmstack::train
