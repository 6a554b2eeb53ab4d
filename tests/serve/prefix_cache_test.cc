// PrefixCache: block-granular matches, edge splits, explanations, LRU eviction of unshared
// tails, and the pool being whole again after clear().
#include "lmstack/serve/prefix_cache.h"

#include <numeric>

#include <gtest/gtest.h>

namespace lmstack::serve {
namespace {

std::vector<int32_t> range(int from, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::vector<int32_t> take(BlockManager& bm, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(*bm.allocate());
  return v;
}

TEST(PrefixCache, MatchesWholeBlocksOnly) {
  BlockManager bm(16, 4);
  PrefixCache cache(bm);
  const auto tokens = range(100, 10);  // 2 full blocks + 2 tokens
  auto blocks = take(bm, 2);
  cache.insert(tokens, blocks);
  EXPECT_EQ(bm.ref_count(blocks[0]), 2);

  PrefixMatch m = cache.match(range(100, 12), 100);
  EXPECT_EQ(m.num_tokens, 8);
  EXPECT_EQ(m.blocks, blocks);
  EXPECT_NE(m.explanation.find("no cached continuation after token 8"), std::string::npos)
      << m.explanation;

  m = cache.match(range(100, 7), 100);  // only one full block of the query exists
  EXPECT_EQ(m.num_tokens, 4);
  EXPECT_NE(m.explanation.find("only 3 tokens"), std::string::npos) << m.explanation;

  m = cache.match(range(100, 8), 7);  // the cap keeps the last token out
  EXPECT_EQ(m.num_tokens, 4);
  EXPECT_NE(m.explanation.find("capped"), std::string::npos) << m.explanation;

  auto other = range(100, 8);
  other[6] = 7;
  m = cache.match(other, 100);
  EXPECT_EQ(m.num_tokens, 4);
  EXPECT_NE(m.explanation.find("diverged at token 6"), std::string::npos) << m.explanation;

  m = cache.match(range(0, 8), 100);
  EXPECT_EQ(m.num_tokens, 0);
  EXPECT_NE(m.explanation.find("no cached prefix"), std::string::npos);
  bm.release_all(blocks);
}

TEST(PrefixCache, InsertSplitsAnEdgeAndSharesTheCommonPart) {
  BlockManager bm(16, 2);
  PrefixCache cache(bm);
  auto a_blocks = take(bm, 3);
  cache.insert(range(0, 6), a_blocks);
  auto b_tokens = range(0, 6);
  b_tokens[4] = 50;  // shares 2 blocks with a, then differs
  auto b_blocks = take(bm, 3);
  cache.insert(b_tokens, b_blocks);
  EXPECT_EQ(bm.ref_count(b_blocks[0]), 1) << "the common part keeps a's blocks";
  EXPECT_EQ(bm.ref_count(b_blocks[2]), 2) << "b's own last block is cached";
  EXPECT_EQ(cache.stats().num_cached_blocks, 4);
  EXPECT_EQ(cache.match(b_tokens, 100).blocks,
            (std::vector<int32_t>{a_blocks[0], a_blocks[1], b_blocks[2]}));
  EXPECT_EQ(cache.match(range(0, 6), 100).blocks, a_blocks);
  bm.release_all(a_blocks);
  bm.release_all(b_blocks);
  cache.clear();
  EXPECT_EQ(bm.num_free(), 16);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedUnsharedTailsFirst) {
  BlockManager bm(8, 2);
  PrefixCache cache(bm);
  auto a = take(bm, 2);
  auto b = take(bm, 2);
  cache.insert(range(0, 4), a);
  cache.insert(range(10, 4), b);
  bm.release_all(b);               // only the cache holds b now
  bm.release(a[1]);                // a[0] is still in use by a "sequence"
  cache.match(range(10, 4), 4);    // b becomes the most recent
  ASSERT_TRUE(cache.evict_one());  // a's unshared tail goes first (LRU)
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_EQ(cache.match(range(0, 4), 4).num_tokens, 2);
  ASSERT_TRUE(cache.evict_one());  // then b, whole
  EXPECT_EQ(bm.num_free(), 7);
  EXPECT_FALSE(cache.evict_one()) << "a[0] is held by its sequence";
  bm.release(a[0]);
  EXPECT_TRUE(cache.make_free(8));
  EXPECT_EQ(cache.stats().num_evicted_blocks, 4);
}

TEST(PrefixCache, RecordsHitRate) {
  BlockManager bm(4, 2);
  PrefixCache cache(bm);
  cache.record_query(10, 4);
  cache.record_query(6, 0);
  EXPECT_EQ(cache.stats().num_queries, 2);
  EXPECT_EQ(cache.stats().num_query_tokens, 16);
  EXPECT_EQ(cache.stats().num_hit_tokens, 4);
}

}  // namespace
}  // namespace lmstack::serve
