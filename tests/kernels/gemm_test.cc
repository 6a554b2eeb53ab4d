// gemm_f32(): every supported variant against the double-accumulating reference, over the
// four transpose combinations, alpha/beta (including beta == 0 over NaN-filled C), padded
// leading dimensions, odd shapes and tails, 1 and 2 threads.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemm_check.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;  // extra elements per row of A, B and C
};

void check(const KernelVariant<GemmF32Fn>& v, ThreadPool& pool, const Problem& p,
           std::mt19937& rng) {
  const int64_t lda = (p.ta ? p.m : p.k) + p.pad, ldb = (p.tb ? p.k : p.n) + p.pad;
  const int64_t ldc = p.n + p.pad;
  const std::vector<float> a = random_vec((p.ta ? p.k : p.m) * lda, rng);
  const std::vector<float> b = random_vec((p.tb ? p.n : p.k) * ldb, rng);
  std::vector<float> c0 = random_vec(p.m * ldc, rng);
  if (p.beta == 0.0f)
    for (auto& e : c0) e = NAN;  // BLAS: beta == 0 means C is write-only
  std::vector<float> want = c0, got = c0;
  ref::gemm_f32(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), lda, b.data(), ldb, p.beta,
                want.data(), ldc);
  v.fn(pool, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), lda, b.data(), ldb, p.beta, got.data(),
       ldc);
  const std::string what = std::string(v.name) + " ta=" + std::to_string(p.ta) +
                           " tb=" + std::to_string(p.tb) + " m=" + std::to_string(p.m) +
                           " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) +
                           " alpha=" + std::to_string(p.alpha) + " beta=" + std::to_string(p.beta);
  test::expect_gemm_c(c0, want, got, p.m, p.n, p.k, ldc, p.alpha, p.beta, what);
}

TEST(GemmF32, EveryVariantMatchesReference) {
  std::mt19937 rng(99);
  ThreadPool pool1(1), pool2(2);
  const int64_t sizes[][3] = {
      {1, 1, 1},    {1, 17, 33},   {3, 5, 7},      {7, 33, 100},
      {16, 32, 64}, {15, 47, 257}, {29, 100, 40},  {64, 65, 300},
      {100, 1, 9},  {2, 300, 3},   {45, 129, 520}, {20, 530, 400}};  // > one NC x KC block of B
  const float scalars[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, 0.0f}};
  for (const auto& v : gemm_f32_variants()) {
    if (!v.supported()) {
      std::printf("skipping unsupported variant %s\n", v.name);
      continue;
    }
    int count = 0;
    for (int t = 0; t < 4; ++t) {
      for (const auto& s : sizes) {
        for (const auto& ab : scalars) {
          const Problem p{(t & 1) != 0, (t & 2) != 0, s[0], s[1], s[2], ab[0], ab[1], count % 3};
          check(v, ++count % 2 ? pool2 : pool1, p, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(GemmF32, ZeroSizedIsANoOp) {
  ThreadPool pool(2);
  std::vector<float> c = {5.0f};
  gemm_f32(pool, false, false, 1, 1, 0, 1.0f, nullptr, 1, nullptr, 1, 1.0f, c.data(), 1);
  EXPECT_EQ(c[0], 5.0f);
  gemm_f32(pool, false, false, 1, 1, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f, c.data(), 1);
  EXPECT_EQ(c[0], 0.0f);  // k == 0: C = beta * C
  gemm_f32(pool, false, false, 0, 1, 5, 1.0f, nullptr, 5, nullptr, 1, 0.0f, nullptr, 1);
}

}  // namespace
}  // namespace lmstack::kernels
