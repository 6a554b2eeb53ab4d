// Rollouts and training on different ranks: the disaggregated layout of OpenRLHF or verl with
// separate rollout workers (verl's "hybrid" engine is the colocated one, rollout_backend.h's
// LocalRollouts). Rank 0 of `comm` trains (policy, reference, AdamW); ranks 1..R each hold an
// EngineReplica and run serve_rollouts(). Every call of rank 0 starts with a broadcast header,
// so the rollout ranks follow it in lockstep:
//   generate: the step's prompts (lengths + token ids) and sampling parameters are broadcast;
//     rollout rank w (1..R) runs the contiguous slice [P·(w−1)/R, P·w/R) of the P prompts with
//     the one-process seeds (rollout.h: first_index) and sends back to rank 0 each sample's
//     length and finish code, its token ids and the engine's log-probs; rank 0 puts them in
//     prompt order, so the step sees exactly what LocalRollouts returns.
//   sync: every f32 master tensor is broadcast into the replicas' buffers (one broadcast per
//     tensor, no packing copy), then each rollout rank drops its prefix cache.
//   stop: serve_rollouts returns.
// The prompts travel from the trainer (rather than each rank deriving them from the seed) so
// that --prompts files, evaluation prompts and any future prompt source work unchanged.
// Errors: a rollout rank's exception is rethrown naming the rank; the caller ends the job
// (dist::abort_all under MPI; run_local aborts an in-process group).
#pragma once

#include <functional>

#include "lmstack/dist/comm.h"
#include "lmstack/model/config.h"
#include "lmstack/rl/rollout_backend.h"

namespace lmstack::rl {

class RemoteRollouts : public RolloutBackend {
 public:
  // On rank 0 of `comm` (size >= 2); sends `initial` to the rollout ranks, so their engines
  // start from the trainer's f32 masters bit for bit.
  RemoteRollouts(dist::Comm& comm, const model::ModelConfig& config,
                 const model::ModelWeights& initial);
  ~RemoteRollouts() override;  // stop() unless unwinding (a failed job is aborted instead)
  std::vector<Rollout> generate(const std::vector<std::vector<int32_t>>& prompts, int n,
                                const model::SamplingParams& params) override;
  SyncStats sync(const model::ModelWeights& policy) override;
  // Ends serve_rollouts on every rollout rank; later calls are errors.
  void stop();

 private:
  dist::Comm& comm_;
  bool tied_;
  bool stopped_ = false;
};

// The loop of rollout ranks 1..R: answers rank 0's RemoteRollouts until its stop().
// `after_sync` (for tests) runs after each weight sync.
void serve_rollouts(dist::Comm& comm, EngineReplica& replica,
                    const std::function<void(const EngineReplica&)>& after_sync = {});

}  // namespace lmstack::rl
