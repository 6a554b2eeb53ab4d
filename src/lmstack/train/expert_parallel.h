// Expert parallelism (GShard, Lepikhin et al. 2020 §2.2; Switch Transformer, Fedus et al.
// 2021 §2.2; DeepSpeed-MoE): the E routed experts of every sparse layer are split over the
// `ep` ranks of an expert-parallel group, rank i holding experts [i·E/ep, (i+1)·E/ep). Each
// rank routes its own token rows (moe_train.h, unchanged); its (row, slot) pairs, already
// sorted by expert and so by owning rank, go to the owners with an all-to-all of counts and
// an all-to-all-v of rows (ep_dispatch); the owners run their experts on what they received
// and a second all-to-all-v returns every output row to the rank it came from (ep_return),
// where the weighted combine adds it to its token. The backward runs the same two exchanges
// on the gradients: ∂L/∂(expert output) out, ∂L/∂(expert input) back (the transpose).
// Dropless: every pair is sent (no capacity factor), so the result is the single-process one.
// Not here: the gradient reduction of the experts over the ranks that hold the same ones
// (expert_data_parallel.h). Tests: tests/train/expert_parallel_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/dist/comm.h"
#include "lmstack/model/config.h"
#include "lmstack/model/weights.h"
#include "lmstack/train/moe_train.h"

namespace lmstack::train {

// One exchange between the ranks of an expert-parallel group, planned from the pairs'
// expert offsets. Legend: ep ranks, El = E / ep experts per rank, P pairs sent, R received.
struct EpExchange {
  int ep = 1, num_local = 0;
  std::vector<int32_t> send_rows;  // [ep·El]: rows for expert q·El + j, sent to rank q
  std::vector<int32_t> recv_rows;  // [ep·El]: rows from rank q for local expert j (q·El + j)
  std::vector<int64_t> send_counts, recv_counts;  // [ep]: floats to / from each rank
  std::vector<int64_t> perm;  // [R]: expert-major received row i is source-major row perm[i]
  std::vector<int32_t> local_offsets;  // [El + 1]: local expert j's rows, expert-major
  int64_t num_recv_rows = 0;
  // Rows sent to the other ranks (what one exchange of C floats per row moves).
  int64_t rows_to_others(int rank) const;
};

// Collective over `ep`: each rank's offsets [E + 1] (moe_group_by_expert) -> the exchange,
// through one all_to_all of El int32 counts per rank pair.
EpExchange ep_plan(dist::Comm& ep, const std::vector<int32_t>& offsets, int64_t C);
// out[R, C] (expert-major: local expert 0's rows from ranks 0..ep-1, then expert 1's, ...) from
// rows[P, C] in expert order. Collective; scratch grows to R·C floats.
void ep_dispatch(dist::Comm& ep, const EpExchange& x, const float* rows, float* out, int64_t C,
                 std::vector<float>& scratch);
// The transpose of ep_dispatch: rows[P, C] (written) from in[R, C] expert-major.
void ep_return(dist::Comm& ep, const EpExchange& x, const float* in, float* rows, int64_t C,
               std::vector<float>& scratch);

// The MoeExpertRunner of expert parallelism: installed on a TrainModel whose sparse layers
// hold only this rank's experts (the others' tensors undefined), it runs the routed experts
// of every sparse layer through ep_dispatch / ep_return over `ep_comm`, saving per layer what
// the backward reads (the received rows, their gate, up and act).
// Thread safety: one call at a time, as TrainModel. `ep_comm` must outlive it.
class ExpertParallelMoe final : public MoeExpertRunner {
 public:
  // ConfigError when ep_comm.size() does not divide config.moe.num_experts.
  ExpertParallelMoe(dist::Comm& ep_comm, const model::ModelConfig& config);

  int first_expert() const { return first_; }
  int num_local_experts() const { return num_local_; }
  bool is_local(int expert) const { return expert >= first_ && expert < first_ + num_local_; }

  void forward(ThreadPool& pool, int layer, MoeActs& a, const model::MoeLayerWeights& w,
               int64_t C) override;
  void backward(ThreadPool& pool, int layer, MoeGradScratch& s, model::MoeLayerWeights& g,
                const MoeActs& a, const model::MoeLayerWeights& w, int64_t C) override;
  int64_t bytes() const override;

 private:
  struct Layer {
    EpExchange x;
    MoeActs acts;         // xe, gate, up, act, ye of the received rows (expert-major)
    MoeGradScratch grad;  // dxe, dye, dgate, dup, dact of the same rows
  };
  // w with only this rank's experts (index 0 = expert first_), sharing the tensors.
  model::MoeLayerWeights local_view(const model::MoeLayerWeights& w) const;

  dist::Comm& comm_;
  model::ModelConfig config_;
  int first_ = 0, num_local_ = 0;
  std::vector<Layer> layers_;
  std::vector<float> scratch_;
};

// Whether `name` (a weight_fields name) is a routed expert's tensor, and which expert it is
// ("layers.3.moe.experts.5.w_up" -> 5; -1 for every other tensor).
int expert_of(const std::string& name);

// `w` with the routed experts outside [first, first + count) of every sparse layer dropped
// (undefined), sharing the remaining tensors: what a rank of an expert-parallel group holds.
model::ModelWeights keep_experts(const model::ModelWeights& w, int first, int count);

}  // namespace lmstack::train
