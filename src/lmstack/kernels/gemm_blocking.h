// What the two blocked GEMMs share (gemm_driver.cc / gemm.cc: f32 panels; gemm_bf16_driver.cc /
// gemm_bf16.cc: bf16 pair panels): BLAS beta handling before a product that only stores or
// adds, per-thread scratch for packed panels, and the split of C over threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmstack/core/thread_pool.h"

namespace lmstack::kernels {

// BLAS semantics for C = alpha * op(A) op(B) + beta * C ahead of the blocked product: false
// when there is none to run (k or alpha 0; C is then beta * C, and beta == 0 writes zeros
// without reading C); else C is scaled here unless beta is 0 or 1, and the product must add
// to C exactly when beta != 0.
inline bool prepare_c(int64_t m, int64_t n, int64_t k, float alpha, float beta, float* c,
                      int64_t ldc) {
  const bool product = k > 0 && alpha != 0.0f;
  if (beta != 1.0f && (beta != 0.0f || !product))
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  return product;
}

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
