// Thread pool: coverage of every index exactly once, chunking, exceptions, reuse, and
// run_on_all / parallel_for jobs interleaved many times (the claim protocol's stale workers).
#include "lmstack/core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

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

// Up to kChunksPerThread equal chunks per thread, disjoint and covering [0, n).
TEST(ThreadPool, ParallelForChunksAreEqualAndCover) {
  ThreadPool pool(3);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  pool.parallel_for(1000, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  ASSERT_EQ(ranges.size(), size_t{3 * ThreadPool::kChunksPerThread});
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (const auto& [b, e] : ranges) {
    EXPECT_EQ(b, at);
    EXPECT_NEAR(static_cast<double>(e - b), 1000.0 / ranges.size(), 1.0);
    at = e;
  }
  EXPECT_EQ(at, 1000);
}

// More threads than cores (2 in CI), so workers are often descheduled mid-protocol: a late
// worker must neither run a finished range job's chunk nor miss a run_on_all.
TEST(ThreadPool, InterleavedJobsRunExactlyOnce) {
  ThreadPool pool(5);
  std::vector<std::atomic<int>> hits(97);
  std::vector<int> per_thread(5, 0);
  const int reps = 1000;
  for (int rep = 0; rep < reps; ++rep) {
    pool.parallel_for(97, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    if (rep % 3 == 0) pool.run_on_all([&](int t) { per_thread[static_cast<size_t>(t)]++; });
  }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], reps) << i;
  EXPECT_EQ(per_thread, std::vector<int>(5, (reps + 2) / 3));
}

// A chunk's exception reaches the caller whichever thread ran it. For the worker's side the
// caller's chunks wait until a worker has run one (it is woken by the job itself, so it does).
TEST(ThreadPool, ParallelForRethrowsAChunksException) {
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  for (bool on_caller : {true, false}) {
    std::atomic<bool> worker_ran{false};
    EXPECT_THROW(pool.parallel_for(64,
                                   [&](int64_t, int64_t) {
                                     const bool mine = std::this_thread::get_id() == caller;
                                     if (!mine) worker_ran = true;
                                     if (mine == on_caller) throw std::runtime_error("chunk");
                                     if (mine)
                                       while (!worker_ran) std::this_thread::yield();
                                   }),
                 std::runtime_error)
        << (on_caller ? "caller's chunk" : "worker's chunk");
  }
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 4950);
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
