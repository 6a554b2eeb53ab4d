// What the two blocked GEMM drivers share (gemm_driver.cc: f32 panels; gemm_bf16_driver.cc:
// bf16 pair panels): per-thread scratch for packed panels, and the split of C over threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmstack/core/thread_pool.h"

namespace lmstack::kernels {

// A 64-byte aligned area of at least n elements in `buf`, reused by its thread across calls
// (allocating per call would page-fault megabytes each time) and kept for the thread's life.
template <class T>
T* gemm_scratch(std::vector<T>& buf, int64_t n) {
  const int64_t slack = 64 / sizeof(T);
  if (static_cast<int64_t>(buf.size()) < n + slack) buf.resize(static_cast<size_t>(n + slack));
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(T);
}

// Calls run_block(ip0, ip1, j0, j1) once per thread over C's mp panels of MR rows and np
// panels of NR columns (n columns): split N when every thread gets at least two panels (each
// thread then packs only its own slice of B), else split M (each thread packs all of B,
// which is then small).
template <class RunBlock>
void split_over_threads(ThreadPool& pool, int64_t mp, int64_t np, int64_t nr, int64_t n,
                        const RunBlock& run_block) {
  const int64_t threads = pool.num_threads();
  const bool split_n = np >= 2 * threads || mp < threads;
  pool.run_on_all([&](int t) {
    if (split_n) {
      const int64_t p0 = np * t / threads, p1 = np * (t + 1) / threads;
      if (p0 < p1) run_block(0, mp, p0 * nr, std::min(n, p1 * nr));
    } else {
      const int64_t p0 = mp * t / threads, p1 = mp * (t + 1) / threads;
      if (p0 < p1) run_block(p0, p1, int64_t{0}, n);
    }
  });
}

}  // namespace lmstack::kernels
