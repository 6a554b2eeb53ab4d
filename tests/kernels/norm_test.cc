// RMSNorm and LayerNorm: every supported variant against the reference over odd sizes, the
// reference against hand-computed values, and in-place (y aliases x) calls.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

constexpr int64_t kDims[] = {1, 3, 15, 16, 17, 31, 33, 64, 100, 1000, 4099};

TEST(Rmsnorm, ReferenceMatchesFormula) {
  const std::vector<float> x = {1, -2, 3}, w = {0.5f, 1, 2};
  std::vector<float> y(3);
  ref::rmsnorm(y.data(), x.data(), w.data(), 1, 3, 1e-5f);
  const double inv = 1.0 / std::sqrt((1 + 4 + 9) / 3.0 + 1e-5);
  EXPECT_TRUE(test::all_close(y, {float(0.5 * inv), float(-2 * inv), float(6 * inv)}, 1e-6, 0));
}

TEST(Rmsnorm, VariantsMatchReference) {
  for (const auto& variant : rmsnorm_variants()) {
    if (!variant.supported()) continue;
    for (int64_t dim : kDims) {
      const int64_t rows = 3;
      const auto x = random_vector(static_cast<size_t>(rows * dim), 1);
      const auto w = random_vector(static_cast<size_t>(dim), 2);
      std::vector<float> want(x.size()), got(x.size());
      ref::rmsnorm(want.data(), x.data(), w.data(), rows, dim, 1e-6f);
      variant.fn(got.data(), x.data(), w.data(), rows, dim, 1e-6f);
      EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6)) << variant.name << " dim " << dim;
      std::vector<float> in_place = x;
      variant.fn(in_place.data(), in_place.data(), w.data(), rows, dim, 1e-6f);
      EXPECT_TRUE(test::all_close(in_place, want, 1e-5, 1e-6)) << variant.name << " in place";
    }
  }
}

TEST(Layernorm, ReferenceMatchesFormula) {
  const std::vector<float> x = {1, 2, 3, 6}, g = {1, 2, 1, 1}, b = {0, 0, 1, -1};
  std::vector<float> y(4);
  ref::layernorm(y.data(), x.data(), g.data(), b.data(), 1, 4, 0.0f);
  // mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5.
  const double s = 1.0 / std::sqrt(3.5);
  EXPECT_TRUE(
      test::all_close(y, {float(-2 * s), float(-2 * s), 1.0f, float(3 * s - 1)}, 1e-6, 1e-7));
}

TEST(Layernorm, VariantsMatchReference) {
  for (const auto& variant : layernorm_variants()) {
    if (!variant.supported()) continue;
    for (int64_t dim : kDims) {
      for (bool with_beta : {false, true}) {
        const int64_t rows = 2;
        // An offset mean checks that the variance is computed about the mean.
        const auto x = random_vector(static_cast<size_t>(rows * dim), 3, 9, 13);
        const auto g = random_vector(static_cast<size_t>(dim), 4);
        const auto b = random_vector(static_cast<size_t>(dim), 5);
        const float* beta = with_beta ? b.data() : nullptr;
        std::vector<float> want(x.size()), got(x.size());
        ref::layernorm(want.data(), x.data(), g.data(), beta, rows, dim, 1e-5f);
        variant.fn(got.data(), x.data(), g.data(), beta, rows, dim, 1e-5f);
        // A variance computed in f32 about a mean of ~11 loses a few more bits.
        EXPECT_TRUE(test::all_close(got, want, 1e-4, 1e-5)) << variant.name << " dim " << dim;
      }
    }
  }
}

TEST(Norm, PublicOpsDispatch) {
  const auto x = random_vector(40, 6), w = random_vector(20, 7);
  std::vector<float> want(40), got(40);
  ref::rmsnorm(want.data(), x.data(), w.data(), 2, 20, 1e-5f);
  rmsnorm(got.data(), x.data(), w.data(), 2, 20, 1e-5f);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
  ref::layernorm(want.data(), x.data(), w.data(), w.data(), 2, 20, 1e-5f);
  layernorm(got.data(), x.data(), w.data(), w.data(), 2, 20, 1e-5f);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
}

}  // namespace
}  // namespace lmstack::kernels
