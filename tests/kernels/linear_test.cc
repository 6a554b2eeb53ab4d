// linear(): every supported variant against the double-accumulating reference, over weight
// dtypes (f32, bf16, f16), decode-sized and prefill-sized M, odd N and K (tails of every
// vector width and block size), bias and accumulate on and off, 1 and 2 threads.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/half.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

struct Case {
  int64_t m, n, k;
};

Tensor random_weight(DType dt, int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor w = Tensor::zeros(Shape{n, k}, dt);
  for (int64_t i = 0; i < n * k; ++i) {
    const float v = dist(rng);
    if (dt == DType::kF32) w.data<float>()[i] = v;
    if (dt == DType::kBF16) w.data<uint16_t>()[i] = f32_to_bf16(v);
    if (dt == DType::kF16) w.data<uint16_t>()[i] = f32_to_f16(v);
  }
  return w;
}

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

// |got - want| <= 2e-6 * (sum_k |x w| + |bias| + |y0|) + 1e-6 for every element: f32
// accumulation in any order stays within a few ulps of the magnitude of its terms.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& x, const Tensor& w, const std::vector<float>& bias,
                  const std::vector<float>& y0, int64_t m, const std::string& what) {
  const int64_t n = w.dim(0), k = w.dim(1);
  const std::vector<float> wf = w.to_f32_vector();
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double mag = std::fabs(bias.empty() ? 0.0f : bias[static_cast<size_t>(j)]) +
                   std::fabs(y0[static_cast<size_t>(r * n + j)]);
      for (int64_t i = 0; i < k; ++i)
        mag += std::fabs(x[static_cast<size_t>(r * k + i)] * wf[static_cast<size_t>(j * k + i)]);
      const size_t at = static_cast<size_t>(r * n + j);
      ASSERT_NEAR(got[at], want[at], 2e-6 * mag + 1e-6) << what << " at [" << r << ", " << j << "]";
    }
  }
}

void check_variant(const KernelVariant<LinearFn>& v, ThreadPool& pool, DType dt, const Case& c,
                   bool use_bias, bool accumulate, std::mt19937& rng) {
  const Tensor w = random_weight(dt, c.n, c.k, rng);
  const std::vector<float> x = random_vec(c.m * c.k, rng);
  const std::vector<float> bias = use_bias ? random_vec(c.n, rng) : std::vector<float>{};
  const std::vector<float> y0 =
      accumulate ? random_vec(c.m * c.n, rng) : std::vector<float>(c.m * c.n, NAN);
  std::vector<float> want = y0, got = y0;
  ref::linear(want.data(), x.data(), w, c.m, use_bias ? bias.data() : nullptr, accumulate);
  const LinearOut out{got.data(), &w, use_bias ? bias.data() : nullptr, accumulate};
  v.fn(pool, x.data(), c.m, {&out, 1});
  const std::string what = std::string(v.name) + " " + std::string(dtype_name(dt)) +
                           " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                           " k=" + std::to_string(c.k) + " bias=" + std::to_string(use_bias) +
                           " acc=" + std::to_string(accumulate) +
                           " threads=" + std::to_string(pool.num_threads());
  std::vector<float> y0_mag = accumulate ? y0 : std::vector<float>(c.m * c.n, 0.0f);
  expect_close(got, want, x, w, bias, y0_mag, c.m, what);
}

// Decode-sized M (the GEMV path) and prefill-sized M (the blocked GEMM path), with N and K
// off every multiple of the vector width (16), register tile and cache block.
const Case kCases[] = {
    {1, 1, 1},    {1, 3, 17},     {1, 33, 100},   {2, 17, 33}, {3, 100, 257}, {4, 64, 64},
    {7, 31, 129}, {8, 40, 300},   {1, 257, 1000}, {2, 5, 3},   {9, 33, 17},   {15, 65, 100},
    {16, 48, 96}, {29, 100, 257}, {64, 129, 520}, {37, 70, 1}, {100, 3, 40},  {33, 600, 70},
    {5, 1, 700},  {11, 10, 50},   {13, 7, 33},
};

TEST(Linear, EveryVariantMatchesReference) {
  std::mt19937 rng(1234);
  ThreadPool pool1(1), pool2(2);
  for (const auto& v : linear_variants()) {
    if (!v.supported()) {
      std::printf("skipping unsupported variant %s\n", v.name);
      continue;
    }
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Case& c : kCases) {
        for (int flags = 0; flags < 4; ++flags) {
          ThreadPool& pool = (flags + c.m) % 2 ? pool2 : pool1;
          check_variant(v, pool, dt, c, flags & 1, flags & 2, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Linear, DispatchedOpMatchesReferenceOnAModelShape) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  for (int64_t m : {1, 4, 40}) {
    check_variant({"dispatch", linear_many, [] { return true; }}, pool, DType::kBF16, {m, 192, 576},
                  true, false, rng);
  }
}

}  // namespace
}  // namespace lmstack::kernels
