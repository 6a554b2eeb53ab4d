// Scheduler: iteration-level continuous batching (Orca, Yu et al. 2022) with a token budget
// per step and chunked prefill (Sarathi, Agrawal et al. 2023). Each step it first gives every
// running sequence the tokens it still needs (a decode needs 1, plus its speculative draft,
// cut to the budget and dropped before anyone is preempted for it; a prompt being prefilled
// gets what the budget leaves), then admits waiting sequences first come, first served, each
// with its longest cached prefix. When the KV pool runs out it evicts unused cached prefixes,
// then preempts the most recently admitted sequence by recompute (its blocks are freed; it
// goes back to the front of the queue and later recomputes its tokens, sampling state intact).
//
// Thread safety: none; only the engine loop thread touches it.
// Invariants: a sequence is in exactly one of waiting() / running() or in neither (finished);
// running sequences hold blocks for all their computed tokens (but those released outside a
// sliding window, SchedulerOptions::kv_window).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "lmstack/serve/block_manager.h"
#include "lmstack/serve/prefix_cache.h"
#include "lmstack/serve/sequence.h"

namespace lmstack::serve {

struct SchedulerOptions {
  int max_batch_tokens = 512;  // tokens per forward step (the budget)
  int max_num_seqs = 256;      // running sequences at most
  // > 0 when every layer of the model attends to at most the last kv_window positions
  // (sliding-window attention): after each step a running sequence releases the blocks wholly
  // before its next token's window that it holds alone (never one shared with the prefix cache
  // or a sibling choice), leaving kReleasedBlock in its table. 0: keep every block.
  int kv_window = 0;
};

struct ScheduledSeq {
  Sequence* seq;
  int num_new_tokens;  // tokens [num_computed, num_computed + num_new_tokens) run this step
  bool wants_logits;   // the chunk reaches the end of the sequence: sample after the step
  // Speculative decoding: the last num_draft_tokens of the new tokens are seq->draft (a decode
  // step verifying a draft; logits are wanted for every new token). Their KV counts as
  // computed only once accepted (Engine), so commit() advances num_computed without them.
  int num_draft_tokens = 0;
};

// KV blocks held by running sequences, each physical block counted once (a prefix shared by
// many sequences is one set of blocks), and how many of their token slots hold computed KV:
// tokens_stored / token_slots is the KV utilisation (1 - internal fragmentation). Blocks the
// prefix cache alone retains are not counted: they belong to no running request.
struct KvOccupancy {
  int64_t blocks = 0;
  int64_t tokens_stored = 0;
  int64_t token_slots = 0;  // blocks × block_size
  double utilisation() const {
    return token_slots > 0 ? static_cast<double>(tokens_stored) / token_slots : 0.0;
  }
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;
  std::vector<std::pair<int32_t, int32_t>> copies;  // (src, dst) blocks to copy before the step
  std::vector<Sequence*> preempted;                 // moved back to waiting this step
  int num_tokens = 0;
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  // `cache` may be null (prefix caching off). Both must outlive the scheduler.
  Scheduler(const SchedulerOptions& options, BlockManager& blocks, PrefixCache* cache);

  void add(Sequence* seq);  // to the back of the queue
  // Adds a running sequence right behind `after` (n > 1 forks join in the same step).
  void add_running(Sequence* seq, Sequence* after);
  // Adds a running sequence whose first `num_computed` tokens' KV arrives from elsewhere
  // (disaggregated serving): gives it fresh blocks for them, evicting unused cached prefixes
  // if needed. False, and nothing changed, when the pool cannot supply them.
  bool add_prefilled(Sequence* seq, int num_computed);
  // Removes a sequence wherever it is and frees its blocks; its computed full blocks go to
  // the prefix cache first when `cache_blocks` is set.
  void finish(Sequence* seq, bool cache_blocks);
  // The next step's plan; the plan's sequences are running and hold their blocks.
  StepPlan schedule();
  // Called after the step ran: advances num_computed, caches newly completed prompt blocks.
  void commit(const StepPlan& plan);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // The running sequences' KV (see KvOccupancy). A block's stored tokens are the most any of
  // its holders has computed in it. O(blocks held); call between steps.
  KvOccupancy running_kv_occupancy() const;

 private:
  bool reserve(int64_t n);
  // Gives `seq` blocks for `tokens` tokens, copying a shared last block first. False (and
  // nothing changed) when the pool cannot supply them.
  bool grow(Sequence& seq, int tokens, StepPlan& plan);
  void preempt(Sequence* seq, StepPlan& plan);
  // Keeps at most max_tokens of the sequence's speculative draft.
  static void cut_draft(Sequence& seq, size_t max_tokens);
  void schedule_running(StepPlan& plan, int& budget);
  void schedule_waiting(StepPlan& plan, int& budget);
  void admit_prefix(Sequence& seq);
  void cache_full_blocks(Sequence& seq, int num_tokens);
  void release_outside_window(Sequence& seq);

  SchedulerOptions options_;
  BlockManager& blocks_;
  PrefixCache* cache_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order: the last is preempted first
  int64_t num_preemptions_ = 0;
  mutable std::vector<int32_t> block_fill_;  // running_kv_occupancy() scratch, -1 = not seen
};

}  // namespace lmstack::serve
