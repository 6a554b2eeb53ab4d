// silu_mul, gelu_tanh and add_inplace: every supported variant against the reference over odd
// lengths and wide input ranges, and the reference against values from PyTorch's formulas.
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

std::vector<float> random_vector(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

constexpr int64_t kLengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 1000, 4097};

TEST(Activation, ReferenceValues) {
  // torch.nn.functional.silu(x) * up and gelu(x, approximate="tanh") at a few points.
  const std::vector<float> x = {-3, -0.5f, 0, 0.5f, 3};
  const std::vector<float> up = {2, 2, 2, 2, 2};
  std::vector<float> y(5);
  ref::silu_mul(y.data(), x.data(), up.data(), 5);
  EXPECT_TRUE(
      test::all_close(y, {-0.28455524f, -0.37754067f, 0, 0.62245933f, 5.71544476f}, 1e-6, 1e-7));
  ref::gelu_tanh(y.data(), x.data(), 5);
  EXPECT_TRUE(
      test::all_close(y, {-0.00363739f, -0.15428599f, 0, 0.34571401f, 2.99636261f}, 1e-5, 1e-7));
}

TEST(SiluMul, VariantsMatchReference) {
  for (const auto& variant : silu_mul_variants()) {
    if (!variant.supported()) continue;
    for (int64_t n : kLengths) {
      const auto g = random_vector(static_cast<size_t>(n), 1, -30, 30);
      const auto u = random_vector(static_cast<size_t>(n), 2, -3, 3);
      std::vector<float> want(g.size()), got(g.size());
      ref::silu_mul(want.data(), g.data(), u.data(), n);
      variant.fn(got.data(), g.data(), u.data(), n);
      EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-7)) << variant.name << " n " << n;
      std::vector<float> in_up = u;  // out aliasing up, as the decoder calls it
      variant.fn(in_up.data(), g.data(), in_up.data(), n);
      EXPECT_TRUE(test::all_close(in_up, want, 1e-5, 1e-7)) << variant.name << " out = up";
    }
  }
}

TEST(GeluTanh, VariantsMatchReference) {
  for (const auto& variant : gelu_tanh_variants()) {
    if (!variant.supported()) continue;
    for (int64_t n : kLengths) {
      const auto x = random_vector(static_cast<size_t>(n), 3, -12, 12);
      std::vector<float> want(x.size()), got(x.size());
      ref::gelu_tanh(want.data(), x.data(), n);
      variant.fn(got.data(), x.data(), n);
      EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-7)) << variant.name << " n " << n;
      std::vector<float> in_place = x;
      variant.fn(in_place.data(), in_place.data(), n);
      EXPECT_TRUE(test::all_close(in_place, want, 1e-5, 1e-7)) << variant.name << " in place";
    }
  }
}

TEST(AddInplace, VariantsMatchReference) {
  for (const auto& variant : add_inplace_variants()) {
    if (!variant.supported()) continue;
    for (int64_t n : kLengths) {
      const auto x = random_vector(static_cast<size_t>(n), 4, -5, 5);
      const auto y0 = random_vector(static_cast<size_t>(n), 5, -5, 5);
      std::vector<float> want = y0, got = y0;
      ref::add_inplace(want.data(), x.data(), n);
      variant.fn(got.data(), x.data(), n);
      EXPECT_EQ(got, want) << variant.name << " n " << n;
    }
  }
}

TEST(Activation, PublicOpsDispatch) {
  const auto x = random_vector(21, 6, -4, 4), u = random_vector(21, 7, -4, 4);
  std::vector<float> want(21), got(21);
  ref::silu_mul(want.data(), x.data(), u.data(), 21);
  silu_mul(got.data(), x.data(), u.data(), 21);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-7));
  ref::gelu_tanh(want.data(), x.data(), 21);
  gelu_tanh(got.data(), x.data(), 21);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-7));
  want = u;
  got = u;
  ref::add_inplace(want.data(), x.data(), 21);
  add_inplace(got.data(), x.data(), 21);
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace lmstack::kernels
