// Continuous batching with chunked prefill, prefix reuse and preemption by recompute (see
// scheduler.h).
#include "lmstack/serve/scheduler.h"

#include <algorithm>
#include <span>

#include "lmstack/core/error.h"

namespace lmstack::serve {

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager& blocks, PrefixCache* cache)
    : options_(options), blocks_(blocks), cache_(cache) {
  LMSTACK_CHECK(options.max_batch_tokens > 0 && options.max_num_seqs > 0,
                "scheduler limits must be positive");
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::add_running(Sequence* seq, Sequence* after) {
  seq->status = SeqStatus::kRunning;
  auto it = std::find(running_.begin(), running_.end(), after);
  running_.insert(it == running_.end() ? it : it + 1, seq);
}

bool Scheduler::add_prefilled(Sequence* seq, int num_computed) {
  const int64_t n = blocks_.blocks_for_tokens(num_computed);
  if (!reserve(n)) return false;
  for (int64_t i = 0; i < n; ++i) seq->blocks.push_back(*blocks_.allocate());
  seq->num_computed = num_computed;
  seq->status = SeqStatus::kRunning;
  running_.push_back(seq);
  return true;
}

void Scheduler::cache_full_blocks(Sequence& seq, int num_tokens) {
  const size_t full = static_cast<size_t>(num_tokens / blocks_.block_size());
  if (cache_ == nullptr || full == 0) return;
  // A chain with a released block cannot enter the radix tree: that block's KV is gone.
  const auto chain = std::span<const int32_t>(seq.blocks).first(full);
  if (std::find(chain.begin(), chain.end(), kReleasedBlock) != chain.end()) return;
  cache_->insert(std::span<const int32_t>(seq.tokens).first(full * blocks_.block_size()),
                 std::span<const int32_t>(seq.blocks).first(full));
}

// Sliding window W on every layer: the next query sits at position num_computed and reads
// keys > num_computed - W, so block b is dead once (b + 1)·bs <= num_computed - W + 1. Only
// blocks this sequence holds alone are released: one shared with the prefix cache or a sibling
// choice (copy-on-write) may still be read by another holder, and the radix tree needs its
// whole chain. With the prefix cache on, nothing goes before the prompt was offered to it.
void Scheduler::release_outside_window(Sequence& seq) {
  if (options_.kv_window <= 0 || (cache_ != nullptr && !seq.prompt_in_cache)) return;
  const int64_t first_needed = int64_t{seq.num_computed} - options_.kv_window + 1;
  const auto dead =
      std::min(static_cast<size_t>(std::max<int64_t>(first_needed, 0) / blocks_.block_size()),
               seq.blocks.size());
  for (size_t b = 0; b < dead; ++b) {
    if (seq.blocks[b] == kReleasedBlock || blocks_.is_shared(seq.blocks[b])) continue;
    blocks_.release(seq.blocks[b]);
    seq.blocks[b] = kReleasedBlock;
  }
}

void Scheduler::finish(Sequence* seq, bool cache_blocks) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end())
    running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end())
    waiting_.erase(it);
  if (cache_blocks) cache_full_blocks(*seq, seq->num_computed);
  blocks_.release_all(seq->blocks);
  seq->status = SeqStatus::kFinished;
}

bool Scheduler::reserve(int64_t n) {
  if (blocks_.can_allocate(n)) return true;
  return cache_ != nullptr && cache_->make_free(n);
}

bool Scheduler::grow(Sequence& seq, int tokens, StepPlan& plan) {
  const int bs = blocks_.block_size();
  const int64_t missing =
      blocks_.blocks_for_tokens(tokens) - static_cast<int64_t>(seq.blocks.size());
  // The first block this step writes must be ours alone (copy on write): after an n > 1 fork
  // the prompt's last, partly filled block is shared by all choices.
  const size_t first = static_cast<size_t>(seq.num_computed / bs);
  const bool copy = first < seq.blocks.size() && blocks_.is_shared(seq.blocks[first]);
  if (!reserve(std::max<int64_t>(missing, 0) + (copy ? 1 : 0))) return false;
  if (copy) {
    const int32_t dst = *blocks_.allocate();
    plan.copies.emplace_back(seq.blocks[first], dst);
    blocks_.release(seq.blocks[first]);
    seq.blocks[first] = dst;
  }
  for (int64_t i = 0; i < missing; ++i) seq.blocks.push_back(*blocks_.allocate());
  return true;
}

void Scheduler::cut_draft(Sequence& seq, size_t max_tokens) {
  seq.draft.resize(std::min(seq.draft.size(), max_tokens));
  seq.draft_probs.resize(std::min(seq.draft_probs.size(), max_tokens));
}

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
  // Keep what was computed in the prefix cache: the recompute will likely find it there.
  cache_full_blocks(*seq, seq->num_computed);
  blocks_.release_all(seq->blocks);
  seq->num_computed = 0;
  cut_draft(*seq, 0);
  seq->status = SeqStatus::kWaiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  waiting_.push_front(seq);  // older victims are preempted later and land in front
  plan.preempted.push_back(seq);
}

void Scheduler::schedule_running(StepPlan& plan, int& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    // A speculative draft (decodes only) takes what the budget leaves after the decode token.
    if (seq->num_uncomputed() != 1) seq->draft.clear();
    cut_draft(*seq, static_cast<size_t>(budget - 1));
    int n = std::min(seq->num_uncomputed() + static_cast<int>(seq->draft.size()), budget);
    bool preempted_self = false;
    while (!grow(*seq, seq->num_computed + n, plan)) {
      if (!seq->draft.empty()) {  // a draft is never worth preempting anyone for
        cut_draft(*seq, 0);
        n = 1;
        continue;
      }
      Sequence* victim = running_.back();  // the newest; never one already in the plan
      preempt(victim, plan);
      if (victim == seq) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    plan.seqs.push_back(
        {seq, n, seq->num_computed + n >= seq->num_tokens(), static_cast<int>(seq->draft.size())});
    budget -= n;
    ++i;
  }
}

void Scheduler::admit_prefix(Sequence& seq) {
  if (cache_ == nullptr) return;
  // The last token is always computed: its logits choose the next token.
  const PrefixMatch m = cache_->match(seq.tokens, seq.num_tokens() - 1);
  for (int32_t b : m.blocks) blocks_.add_ref(b);
  seq.blocks = m.blocks;
  seq.num_computed = m.num_tokens;
}

void Scheduler::schedule_waiting(StepPlan& plan, int& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    admit_prefix(*seq);
    const int n = std::min(seq->num_uncomputed(), budget);
    if (!grow(*seq, seq->num_computed + n, plan)) {
      blocks_.release_all(seq->blocks);
      seq->num_computed = 0;
      break;  // FCFS: nobody overtakes the head of the queue
    }
    if (cache_ != nullptr) cache_->record_query(seq->num_tokens(), seq->num_computed);
    if (seq->num_preemptions == 0) seq->num_cached_prompt = seq->num_computed;
    waiting_.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    plan.seqs.push_back({seq, n, seq->num_computed + n == seq->num_tokens()});
    budget -= n;
  }
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int budget = options_.max_batch_tokens;
  schedule_running(plan, budget);
  // A step that had to preempt admits nobody new (the pool is short).
  if (plan.preempted.empty()) schedule_waiting(plan, budget);
  plan.num_tokens = options_.max_batch_tokens - budget;
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const ScheduledSeq& s : plan.seqs) {
    s.seq->num_computed += s.num_new_tokens - s.num_draft_tokens;
    if (!s.seq->prompt_in_cache && s.seq->num_computed >= s.seq->num_prompt_tokens) {
      cache_full_blocks(*s.seq, s.seq->num_prompt_tokens);
      s.seq->prompt_in_cache = true;
    }
    release_outside_window(*s.seq);
  }
}

KvOccupancy Scheduler::running_kv_occupancy() const {
  const int bs = blocks_.block_size();
  block_fill_.resize(static_cast<size_t>(blocks_.num_blocks()), -1);
  std::vector<int32_t> seen;
  for (const Sequence* s : running_) {
    for (size_t i = 0; i < s->blocks.size(); ++i) {
      if (s->blocks[i] == kReleasedBlock) continue;
      const int64_t in_block = static_cast<int64_t>(s->num_computed) - static_cast<int64_t>(i) * bs;
      const int32_t fill = static_cast<int32_t>(std::clamp<int64_t>(in_block, 0, bs));
      int32_t& slot = block_fill_[static_cast<size_t>(s->blocks[i])];
      if (slot < 0) seen.push_back(s->blocks[i]);
      slot = std::max(slot, fill);
    }
  }
  KvOccupancy o;
  for (int32_t b : seen) {
    o.tokens_stored += block_fill_[static_cast<size_t>(b)];
    block_fill_[static_cast<size_t>(b)] = -1;
  }
  o.blocks = static_cast<int64_t>(seen.size());
  o.token_slots = o.blocks * bs;
  return o;
}

}  // namespace lmstack::serve
