// BlockManager: allocation until empty, reference counts, sharing and release order.
#include "lmstack/serve/block_manager.h"

#include <set>

#include <gtest/gtest.h>

namespace lmstack::serve {
namespace {

TEST(BlockManager, AllocatesEveryBlockOnceThenReportsEmpty) {
  BlockManager bm(8, 4);
  EXPECT_EQ(bm.blocks_for_tokens(0), 0);
  EXPECT_EQ(bm.blocks_for_tokens(4), 1);
  EXPECT_EQ(bm.blocks_for_tokens(5), 2);
  std::set<int32_t> seen;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(bm.can_allocate(1));
    const auto b = bm.allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_TRUE(seen.insert(*b).second) << "block " << *b << " handed out twice";
    EXPECT_EQ(bm.ref_count(*b), 1);
  }
  EXPECT_FALSE(bm.can_allocate(1));
  EXPECT_FALSE(bm.allocate().has_value());
  EXPECT_EQ(bm.num_free(), 0);
}

TEST(BlockManager, SharedBlockIsFreedByItsLastHolder) {
  BlockManager bm(2, 16);
  const int32_t b = *bm.allocate();
  bm.add_ref(b);
  EXPECT_TRUE(bm.is_shared(b));
  bm.release(b);
  EXPECT_FALSE(bm.is_shared(b));
  EXPECT_EQ(bm.num_free(), 1);
  bm.release(b);
  EXPECT_EQ(bm.num_free(), 2);
  EXPECT_EQ(bm.ref_count(b), 0);
}

TEST(BlockManager, ReleaseAllEmptiesTheTable) {
  BlockManager bm(4, 2);
  std::vector<int32_t> table{*bm.allocate(), *bm.allocate(), *bm.allocate()};
  bm.add_ref(table[0]);
  bm.release_all(table);
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(bm.num_free(), 3);  // table[0] is still held once
}

TEST(BlockManagerDeathTest, ReleasingAFreeBlockAborts) {
  BlockManager bm(2, 2);
  EXPECT_DEATH(bm.release(0), "release of free block");
}

}  // namespace
}  // namespace lmstack::serve
