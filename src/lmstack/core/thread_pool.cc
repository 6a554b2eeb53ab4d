// Thread pool (see thread_pool.h). One generation counter announces each job; workers spin
// on it for a short while, then sleep on a condition variable.
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

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads : default_num_threads()) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    stop_.store(true);
    generation_.fetch_add(1);
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
    try {
      (*job_)(index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
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
  {
    std::lock_guard<std::mutex> lock(wake_mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_cv_.notify_all();
  std::exception_ptr own_error;
  try {
    fn(0);
  } catch (...) {
    own_error = std::current_exception();
  }
  // Spin for the usual short wait; past that a worker is most likely descheduled (another
  // process holds its core), and yielding lets it run instead of burning our time slice.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations)
      _mm_pause();
    else
      std::this_thread::yield();
  }
  job_ = nullptr;
  if (own_error) std::rethrow_exception(own_error);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t chunks = std::min<int64_t>(num_threads_, max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  run_on_all([&](int t) {
    if (t >= chunks) return;
    const int64_t begin = n * t / chunks;
    const int64_t end = n * (t + 1) / chunks;
    if (begin < end) fn(begin, end);
  });
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
