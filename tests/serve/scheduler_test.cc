// Scheduler without a model (nano-vllm style): token budget, chunked prefill beside decodes,
// FCFS admission, preemption by recompute when the pool runs dry, prefix reuse at admission
// and copy on write of a shared last block; release of blocks outside a sliding window. "Running
// the model" is commit() plus appending a token to sequences whose chunk reached their end.
// Speculative drafts: cut to the budget, dropped before preempting anyone.
#include "lmstack/serve/scheduler.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include <gtest/gtest.h>

namespace lmstack::serve {
namespace {

struct Fixture {
  Fixture(int64_t num_blocks, int block_size, int budget, bool with_cache, int kv_window = 0)
      : blocks(num_blocks, block_size),
        cache(with_cache ? std::make_unique<PrefixCache>(blocks) : nullptr),
        scheduler(SchedulerOptions{budget, 64, kv_window}, blocks, cache.get()) {}

  Sequence* add(int prompt_len, int first_token = 0) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
    std::iota(prompt.begin(), prompt.end(), first_token);
    seqs.push_back(std::make_unique<Sequence>(static_cast<int64_t>(seqs.size()), prompt,
                                              model::SamplingParams{}));
    scheduler.add(seqs.back().get());
    return seqs.back().get();
  }
  // Schedules, "runs" and appends token 7 to every sequence that was sampled.
  StepPlan step() {
    StepPlan plan = scheduler.schedule();
    scheduler.commit(plan);
    for (const auto& s : plan.seqs)
      if (s.wants_logits) s.seq->tokens.push_back(7);
    return plan;
  }

  BlockManager blocks;
  std::unique_ptr<PrefixCache> cache;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Sequence>> seqs;
};

TEST(Scheduler, ChunksALongPromptWhileDecodesKeepFlowing) {
  Fixture f(64, 4, /*budget=*/8, false);
  Sequence* a = f.add(3);
  StepPlan p = f.step();  // a: whole prompt
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_TRUE(p.seqs[0].wants_logits);
  Sequence* b = f.add(20);
  p = f.step();  // a decodes 1, b prefills 7 of 20
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].seq, a);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(p.seqs[1].seq, b);
  EXPECT_EQ(p.seqs[1].num_new_tokens, 7);
  EXPECT_FALSE(p.seqs[1].wants_logits);
  EXPECT_EQ(p.num_tokens, 8);
  p = f.step();
  EXPECT_EQ(p.seqs[1].num_new_tokens, 7);
  p = f.step();  // the last 6 prompt tokens: b samples
  EXPECT_EQ(p.seqs[1].num_new_tokens, 6);
  EXPECT_TRUE(p.seqs[1].wants_logits);
  EXPECT_EQ(b->num_computed, 20);
  EXPECT_EQ(static_cast<int64_t>(b->blocks.size()), f.blocks.blocks_for_tokens(20));
}

TEST(Scheduler, AdmitsFirstComeFirstServed) {
  Fixture f(4, 4, 64, false);  // 16 tokens of KV
  Sequence* a = f.add(10);
  Sequence* b = f.add(10);
  Sequence* c = f.add(2);
  StepPlan p = f.step();
  ASSERT_EQ(p.seqs.size(), 1u) << "b does not fit and c may not overtake it";
  EXPECT_EQ(p.seqs[0].seq, a);
  EXPECT_EQ(f.scheduler.waiting().front(), b);
  f.scheduler.finish(a, false);
  p = f.step();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].seq, b);
  EXPECT_EQ(p.seqs[1].seq, c);
}

TEST(Scheduler, PreemptsTheNewestByRecomputeWhenBlocksRunOut) {
  Fixture f(4, 4, 64, false);
  Sequence* a = f.add(7);
  Sequence* b = f.add(7);
  f.step();  // both admitted: 2 blocks each, pool empty
  EXPECT_EQ(f.blocks.num_free(), 0);
  f.step();               // both reach 8 tokens: still 2 blocks
  StepPlan p = f.step();  // a needs a third block: b is preempted
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(b->num_tokens(), 9) << "generated tokens are kept and recomputed";
  EXPECT_EQ(f.scheduler.waiting().front(), b);
  EXPECT_EQ(f.scheduler.num_preemptions(), 1);
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].seq, a);
  f.scheduler.finish(a, false);
  p = f.step();  // b recomputes prompt + its generated tokens in one chunk
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 9);
  EXPECT_TRUE(p.seqs[0].wants_logits);
}

TEST(Scheduler, ReusesCachedPrefixAndReportsIt) {
  Fixture f(32, 4, 64, true);
  Sequence* a = f.add(10, 100);
  f.step();
  f.scheduler.finish(a, true);
  Sequence* b = f.add(13, 100);  // shares a's first 10 tokens: 2 full blocks
  StepPlan p = f.step();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(b->num_cached_prompt, 8);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 5);
  EXPECT_EQ(f.cache->stats().num_hit_tokens, 8);
  f.scheduler.finish(b, false);
  f.cache->clear();
  EXPECT_EQ(f.blocks.num_free(), 32);
}

TEST(Scheduler, CopiesASharedLastBlockBeforeWritingIt) {
  Fixture f(16, 4, 64, false);
  Sequence* a = f.add(6);
  f.step();  // a: 6 computed + 1 sampled, blocks {x, y}; y is half full
  Sequence fork(99, a->tokens, model::SamplingParams{});
  fork.num_computed = a->num_computed;
  fork.blocks = a->blocks;
  for (int32_t blk : fork.blocks) f.blocks.add_ref(blk);
  f.scheduler.add_running(&fork, a);
  const int32_t shared = a->blocks[1];
  StepPlan p = f.step();
  ASSERT_EQ(p.copies.size(), 1u) << "the first writer copies; the last holder keeps the original";
  EXPECT_EQ(p.copies[0].first, shared);
  EXPECT_NE(a->blocks[1], fork.blocks[1]);
  EXPECT_EQ(a->blocks[0], fork.blocks[0]) << "full blocks stay shared";
  f.scheduler.finish(a, false);
  f.scheduler.finish(&fork, false);
  EXPECT_EQ(f.blocks.num_free(), 16);
}

int held_blocks(const Sequence& s) {
  return static_cast<int>(std::count_if(s.blocks.begin(), s.blocks.end(),
                                        [](int32_t b) { return b != kReleasedBlock; }));
}

TEST(Scheduler, ReleasesBlocksWhollyBeforeTheSlidingWindow) {
  Fixture f(64, 4, /*budget=*/64, false, /*kv_window=*/8);
  Sequence* a = f.add(20);
  f.step();  // 20 computed: the next query (position 20) reads 13..20, blocks 3 to 5
  ASSERT_EQ(a->blocks.size(), 5u);
  EXPECT_EQ(a->blocks[0], kReleasedBlock);
  EXPECT_EQ(a->blocks[2], kReleasedBlock);
  EXPECT_NE(a->blocks[3], kReleasedBlock);
  EXPECT_EQ(f.blocks.num_free(), 64 - 2);
  for (int i = 0; i < 30; ++i) {
    f.step();
    EXPECT_LE(held_blocks(*a), 3) << "8 keys span at most 3 blocks of 4";
  }
  f.scheduler.finish(a, true);
  EXPECT_EQ(f.blocks.num_free(), 64);
}

TEST(Scheduler, KeepsBlocksSharedWithThePrefixCache) {
  Fixture f(64, 4, /*budget=*/64, true, /*kv_window=*/8);
  Sequence* a = f.add(9);
  for (int i = 0; i < 20; ++i) f.step();
  // The prompt's two full blocks went to the prefix cache first: shared, never released.
  EXPECT_NE(a->blocks[0], kReleasedBlock);
  EXPECT_NE(a->blocks[1], kReleasedBlock);
  EXPECT_EQ(f.blocks.ref_count(a->blocks[0]), 2);
  EXPECT_EQ(a->blocks[2], kReleasedBlock);  // generated tokens 9..11 are out of the window
  f.scheduler.finish(a, true);  // a chain with a released block is not offered to the cache
  EXPECT_EQ(f.blocks.num_free() + f.cache->stats().num_cached_blocks, 64);
  // The cached prompt still serves a new request.
  Sequence* b = f.add(9);
  f.step();
  EXPECT_EQ(b->num_cached_prompt, 8);
}

// Speculative decoding: a decode's draft rides in its step, cut to what the budget leaves, and
// commit() counts only the decode token as computed (the engine adds the accepted drafts).
TEST(Scheduler, SpeculativeDraftIsCutToTheBudget) {
  Fixture f(64, 4, /*budget=*/4, false);
  Sequence* a = f.add(3);
  f.step();  // a: 4 tokens, 3 computed
  a->draft = {1, 2, 3, 4, 5};
  const StepPlan p = f.scheduler.schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 4);
  EXPECT_EQ(p.seqs[0].num_draft_tokens, 3);
  EXPECT_TRUE(p.seqs[0].wants_logits);
  EXPECT_EQ(a->draft, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(a->blocks.size(), 2u);  // KV slots for positions 3..6
  f.scheduler.commit(p);
  EXPECT_EQ(a->num_computed, 4);
}

TEST(Scheduler, DropsADraftRatherThanPreemptAnyone) {
  Fixture f(3, 4, /*budget=*/64, false);
  Sequence* a = f.add(2);
  f.step();
  Sequence* b = f.add(7);
  f.step();  // a: 4 tokens in block 0; b: 8 tokens in blocks 1-2; the pool is full
  ASSERT_EQ(f.blocks.num_free(), 0);
  a->draft = {1, 2, 3};  // positions 4..6 would need a fourth block
  const StepPlan p = f.scheduler.schedule();
  EXPECT_TRUE(p.preempted.empty());
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_EQ(p.seqs[0].seq, a);
  EXPECT_EQ(p.seqs[0].num_new_tokens, 1);
  EXPECT_EQ(p.seqs[0].num_draft_tokens, 0);
  EXPECT_TRUE(a->draft.empty());
  EXPECT_EQ(p.seqs[1].seq, b);
}

}  // namespace
}  // namespace lmstack::serve
