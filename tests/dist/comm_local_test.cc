// LocalComm (in-process ranks) and SelfComm: every collective of collective_checks.h on 1-4
// threads, plus what only this backend can show cheaply: a rank that throws ends the others'
// waits with an error naming it, and mismatched collectives are reported instead of hanging.
#include "lmstack/dist/comm_local.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

#include "collective_checks.h"
#include "lmstack/core/error.h"

namespace lmstack::dist {
namespace {

class LocalCollectives : public ::testing::TestWithParam<int> {};

TEST_P(LocalCollectives, AllReduceF32) { run_local(GetParam(), test::check_all_reduce_f32); }
TEST_P(LocalCollectives, AllReduceInt) { run_local(GetParam(), test::check_all_reduce_int); }
TEST_P(LocalCollectives, Bf16ReducedInF32) {
  run_local(GetParam(), test::check_bf16_reduced_in_f32);
}
TEST_P(LocalCollectives, ReduceScatter) { run_local(GetParam(), test::check_reduce_scatter); }
TEST_P(LocalCollectives, AllGather) { run_local(GetParam(), test::check_all_gather); }
TEST_P(LocalCollectives, Broadcast) { run_local(GetParam(), test::check_broadcast); }
TEST_P(LocalCollectives, AllToAll) { run_local(GetParam(), test::check_all_to_all); }
TEST_P(LocalCollectives, AllToAllV) { run_local(GetParam(), test::check_all_to_all_v); }
TEST_P(LocalCollectives, SendRecv) { run_local(GetParam(), test::check_send_recv); }
TEST_P(LocalCollectives, NonBlockingOverlap) {
  run_local(GetParam(), test::check_nonblocking_overlap);
}
TEST_P(LocalCollectives, Split) { run_local(GetParam(), test::check_split); }
TEST_P(LocalCollectives, Stats) { run_local(GetParam(), test::check_stats); }
TEST_P(LocalCollectives, AllInSequence) { run_local(GetParam(), test::check_all_collectives); }

INSTANTIATE_TEST_SUITE_P(Ranks, LocalCollectives, ::testing::Values(1, 2, 3, 4));

TEST(SelfComm, IsAWorldOfOne) {
  auto self = make_self_comm();
  EXPECT_EQ(self->backend(), "self");
  EXPECT_EQ(self->rank(), 0);
  EXPECT_EQ(self->size(), 1);
  test::check_all_collectives(*self);
}

TEST(World, WithoutLauncherIsSelf) {
  if (launched_by_mpi()) GTEST_SKIP() << "started by an MPI launcher";
  EXPECT_EQ(world().backend(), "self");
  EXPECT_EQ(world().size(), 1);
}

// Rank 2 throws before its all-reduce; ranks 0, 1 and 3 are blocked in it and must fail within
// a moment with a DistError naming rank 2, and run_local rethrows rank 2's own exception.
TEST(LocalFailure, ThrowingRankAbortsTheOthers) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> seen(4);
  try {
    run_local(4, [&](Comm& c) {
      if (c.rank() == 2) throw std::runtime_error("injected failure");
      std::vector<float> x(10, 1.0f);
      try {
        c.all_reduce(x.data(), 10, DType::kF32);
      } catch (const DistError& e) {
        seen[static_cast<size_t>(c.rank())] = e.what();
        throw;
      }
    });
    FAIL() << "run_local did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "injected failure");
  }
  for (int r : {0, 1, 3}) {
    EXPECT_NE(seen[r].find("rank 2 failed: injected failure"), std::string::npos) << seen[r];
    EXPECT_NE(seen[r].find("rank " + std::to_string(r) + " of 4"), std::string::npos) << seen[r];
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(LocalFailure, PendingRecvIsReleased) {
  EXPECT_THROW(run_local(2,
                         [](Comm& c) {
                           if (c.rank() == 0) throw ConfigError("bad config on rank 0");
                           int32_t x = 0;
                           c.recv(&x, 1, DType::kI32, 0);
                         }),
               ConfigError);
}

TEST(LocalErrors, MismatchedCollectivesAreNamed) {
  std::string msg;
  try {
    run_local(2, [](Comm& c) {
      std::vector<float> x(8);
      if (c.rank() == 0)
        c.all_reduce(x.data(), 8, DType::kF32);
      else
        c.broadcast(x.data(), 8, DType::kF32, 0);
    });
  } catch (const DistError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("collective #0"), std::string::npos) << msg;
}

TEST(LocalErrors, BadArgumentsThrow) {
  auto self = make_self_comm();
  float x = 0;
  EXPECT_THROW(self->send(&x, 1, DType::kF32, 1), DistError);
  EXPECT_THROW(self->broadcast(&x, 1, DType::kF32, -1), DistError);
  EXPECT_THROW(self->all_reduce(&x, 1, DType::kQ8_0), DistError);
  EXPECT_THROW(make_local_group(0), DistError);
}

TEST(CostModel, BytesPerRankMatchTheRingFormulas) {
  EXPECT_EQ(modeled_bytes_sent(CommKind::kAllReduce, 1000, 4), 1500);  // 2 * 3/4
  EXPECT_EQ(modeled_bytes_sent(CommKind::kReduceScatter, 1000, 4), 750);
  EXPECT_EQ(modeled_bytes_sent(CommKind::kAllGather, 1000, 4), 750);
  EXPECT_EQ(modeled_bytes_sent(CommKind::kAllToAll, 1000, 4), 750);
  EXPECT_EQ(modeled_bytes_sent(CommKind::kBroadcast, 1000, 4), 1000);
  EXPECT_EQ(modeled_bytes_sent(CommKind::kAllReduce, 1000, 1), 0);
}

}  // namespace
}  // namespace lmstack::dist
