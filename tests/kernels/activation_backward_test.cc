// Finite-difference checks (f64) of silu_mul_backward, gelu_tanh_backward and
// softmax_rows_backward, gradients accumulated onto nonzero buffers, over wide input ranges.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include <gtest/gtest.h>

#include "grad_check.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

using test::Vec64;

TEST(SiluMulBackward, MatchesFiniteDifferences) {
  const size_t n = 37;
  const auto gate = test::random_floats(n, 1, -8, 8), up = test::random_floats(n, 2, -2, 2);
  const auto dout = test::random_floats(n, 3);
  const auto dg0 = test::random_floats(n, 4), du0 = test::random_floats(n, 5);
  auto dg = dg0, du = du0;
  silu_mul_backward(dg.data(), du.data(), dout.data(), gate.data(), up.data(),
                    static_cast<int64_t>(n));
  const Vec64 g64 = test::to64(gate), u64 = test::to64(up);
  auto f = [](const Vec64& g, const Vec64& u) {
    Vec64 y(g.size());
    for (size_t i = 0; i < g.size(); ++i) y[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    return y;
  };
  EXPECT_TRUE(test::grad_close(
      dg, dg0, test::numeric_grad([&](const Vec64& at) { return f(at, u64); }, g64, dout)));
  EXPECT_TRUE(test::grad_close(
      du, du0, test::numeric_grad([&](const Vec64& at) { return f(g64, at); }, u64, dout)));
}

TEST(GeluTanhBackward, MatchesFiniteDifferences) {
  const size_t n = 41;
  const auto x = test::random_floats(n, 6, -6, 6), dy = test::random_floats(n, 7);
  const auto dx0 = test::random_floats(n, 8);
  auto dx = dx0;
  gelu_tanh_backward(dx.data(), dy.data(), x.data(), static_cast<int64_t>(n));
  auto f = [](const Vec64& v) {
    Vec64 y(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      y[i] =
          0.5 * v[i] *
          (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v[i] + 0.044715 * v[i] * v[i] * v[i])));
    return y;
  };
  EXPECT_TRUE(test::grad_close(dx, dx0, test::numeric_grad(f, test::to64(x), dy)));
}

TEST(SoftmaxBackward, MatchesFiniteDifferences) {
  const int64_t rows = 3, dim = 13;
  const auto x = test::random_floats(static_cast<size_t>(rows * dim), 9, -3, 3);
  const auto dy = test::random_floats(x.size(), 10);
  auto f = [&](const Vec64& v) {
    Vec64 y(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double m = *std::max_element(v.begin() + r * dim, v.begin() + (r + 1) * dim);
      double s = 0;
      for (int64_t i = 0; i < dim; ++i) s += std::exp(v[r * dim + i] - m);
      for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = std::exp(v[r * dim + i] - m) / s;
    }
    return y;
  };
  std::vector<float> y = x;
  softmax_rows(y.data(), rows, dim);
  const auto dx0 = test::random_floats(x.size(), 11);
  auto dx = dx0;
  softmax_rows_backward(dx.data(), dy.data(), y.data(), rows, dim);
  EXPECT_TRUE(test::grad_close(dx, dx0, test::numeric_grad(f, test::to64(x), dy)));
}

}  // namespace
}  // namespace lmstack::kernels
