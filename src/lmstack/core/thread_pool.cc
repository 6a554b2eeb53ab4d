// Thread pool (see thread_pool.h). One generation counter announces each job; workers spin
// on it for a short while, then sleep on a condition variable. run_on_all's jobs run once on
// every thread; parallel_for's chunks are claimed from a shared counter (dynamic scheduling,
// as OpenMP's schedule(dynamic)), so a descheduled worker's share is taken by the others.
#include "lmstack/core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace lmstack {
namespace {

constexpr int kSpinIterations = 20000;  // ~50-100 us of pause instructions
constexpr int kCallerSpins = 4000;      // the caller's wait for the workers, before yielding

// Spin, then yield: on a loaded machine a worker may have lost its core, and spinning on
// holds this one for a time slice per region. smollm-135m f16 decode on 2 cores beside a
// busy process: 1.5-2.1 tok/s spinning, 4.0-5.8 yielding (quiet: ~98).
template <class Done>
void wait_until(Done done) {
  for (int spins = 0; !done(); ++spins) {
    if (spins < kCallerSpins)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : default_num_threads()) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true);
    generation_.fetch_add(2);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      _mm_pause();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(wake_mu_);
      wake_cv_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    if (seen & 1) {
      run_claimed_chunks(seen);
      continue;
    }
    try {
      (*job_)(index);
    } catch (...) {
      record_error();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::record_error() {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!error_) error_ = std::current_exception();
}

void ThreadPool::announce(uint64_t generation) {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    generation_.store(generation, std::memory_order_release);
  }
  wake_cv_.notify_all();
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  std::lock_guard<std::mutex> call_lock(call_mu_);
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  error_ = nullptr;
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  announce((generation_.load() | 1) + 1);  // the next even value: a run_on_all job
  std::exception_ptr own_error;
  try {
    fn(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  wait_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
  job_ = nullptr;
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::run_claimed_chunks(uint64_t generation) {
  const uint64_t tag = (generation >> 1) & 0xffffffffu;
  uint64_t c = claim_.load(std::memory_order_acquire);
  while (c >> 32 == tag) {
    const int64_t chunks = static_cast<int64_t>((c >> 16) & 0xffffu);
    const int64_t next = static_cast<int64_t>(c & 0xffffu);
    if (next >= chunks) return;
    if (!claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    // The claim holds the caller in parallel_for until this chunk is done: range_job_ is live.
    const RangeJob& job = range_job_;
    try {
      (*job.fn)(job.n * next / job.chunks, job.n * (next + 1) / job.chunks);
    } catch (...) {
      record_error();
    }
    chunks_done_.fetch_add(1, std::memory_order_acq_rel);
    c = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks =
      std::min<int64_t>({int64_t{num_threads_} * kChunksPerThread, max_chunks, 0xffff});
  if (num_threads_ == 1 || chunks <= 1) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  error_ = nullptr;
  range_job_ = {&fn, n, chunks};
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = (generation_.load() | 1) + 2;  // the next odd value: a range job
  claim_.store((generation >> 1 & 0xffffffffu) << 32 | static_cast<uint64_t>(chunks) << 16,
               std::memory_order_release);
  announce(generation);
  run_claimed_chunks(generation);
  wait_until([&] { return chunks_done_.load(std::memory_order_acquire) == chunks; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

int ThreadPool::default_num_threads() {
  // Count distinct (package, core) pairs in sysfs; fall back to hardware_concurrency.
  std::set<std::pair<std::string, std::string>> cores;
  const unsigned logical = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned cpu = 0; cpu < logical; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
    std::string p, c;
    if (!(pkg >> p) || !(core >> c)) return static_cast<int>(logical);
    cores.insert({p, c});
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
}

}  // namespace lmstack
