// A fixed pool of worker threads with a blocking parallel-for. The caller's thread takes part,
// so ThreadPool(1) runs everything inline. Workers spin briefly before sleeping, because a
// decode step issues hundreds of short parallel regions per token and a futex wake-up per
// region would cost more than the work.
//
// Thread safety: parallel_for / run_on_all may be called from one thread at a time (they are
// serialized by a mutex); the functions they run execute concurrently on all threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lmstack {

class ThreadPool {
 public:
  // num_threads <= 0 means default_num_threads().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(thread_index) once on each of the num_threads() threads (index 0 is the caller)
  // and returns when all have finished. An exception thrown by fn is rethrown here (the first
  // one; the others are dropped).
  void run_on_all(const std::function<void(int thread_index)>& fn);

  // Splits [0, n) into equal contiguous chunks of at least `grain` items (up to
  // kChunksPerThread per thread) and calls fn(begin, end) once per chunk, on whichever thread
  // claims it first. The caller returns as soon as every chunk is done, without waiting for a
  // worker that claimed none (one that lost its core to another process, say).
  void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn,
                    int64_t grain = 1);

  static constexpr int kChunksPerThread = 4;

  // Physical cores of this machine (logical CPUs divided by SMT siblings), at least 1.
  static int default_num_threads();

 private:
  // A parallel_for in flight: chunk c covers [n * c / chunks, n * (c + 1) / chunks).
  struct RangeJob {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunks;
  };

  void worker_loop(int index);
  // Claims and runs chunks of the range job announced as `generation` until none is left.
  void run_claimed_chunks(uint64_t generation);
  void record_error();
  void announce(uint64_t generation);  // publishes a job and wakes sleeping workers

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serializes callers
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  const std::function<void(int)>* job_ = nullptr;  // run_on_all's function
  RangeJob range_job_{};                           // parallel_for's, read only after a claim
  // Each job bumps generation_ by 2; its low bit says which kind it is (1: a range job), so a
  // worker reads the kind and the job's identity in one load.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // run_on_all: workers still running
  // Range job claims: generation (32 bits) | chunks (16) | next unclaimed chunk (16). A worker
  // claims by compare-exchange; a claim on an older job fails, so a late worker never touches
  // a job whose caller has returned.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> chunks_done_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::mutex error_mu_;
};

}  // namespace lmstack
