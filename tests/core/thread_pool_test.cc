// Thread pool: coverage of every index exactly once, chunking, exceptions, reuse.
#include "lmstack/core/thread_pool.h"

#include <atomic>
#include <numeric>
#include <stdexcept>

#include <gtest/gtest.h>

namespace lmstack {
namespace {

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
    }
  }
}

TEST(ThreadPool, GrainLimitsChunkCount) {
  ThreadPool pool(4);
  std::atomic<int> chunks{0};
  pool.parallel_for(
      10,
      [&](int64_t b, int64_t e) {
        chunks++;
        EXPECT_GE(e - b, 5);
      },
      5);
  EXPECT_EQ(chunks, 2);
}

TEST(ThreadPool, RunOnAllUsesEveryThread) {
  ThreadPool pool(3);
  std::vector<int> seen(3, 0);
  for (int rep = 0; rep < 1000; ++rep)
    pool.run_on_all([&](int t) { seen[static_cast<size_t>(t)]++; });
  EXPECT_EQ(seen, (std::vector<int>{1000, 1000, 1000}));
}

TEST(ThreadPool, ExceptionsPropagateAndPoolStaysUsable) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run_on_all([](int t) {
    if (t == 1) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  EXPECT_THROW(pool.run_on_all([](int t) {
    if (t == 0) throw std::runtime_error("caller failed");
  }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 4950);
}

TEST(ThreadPool, DefaultThreadsIsPositive) {
  EXPECT_GE(ThreadPool::default_num_threads(), 1);
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(), ThreadPool::default_num_threads());
}

}  // namespace
}  // namespace lmstack
