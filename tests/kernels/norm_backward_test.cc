// Finite-difference checks (f64) of rmsnorm_backward and layernorm_backward: dx and the
// weight gradients, accumulated onto nonzero buffers, over several rows and odd widths.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "grad_check.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

using test::Vec64;

Vec64 rmsnorm64(const Vec64& x, const Vec64& w, int64_t rows, int64_t dim, double eps) {
  Vec64 y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    const double inv = 1 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inv * w[i];
  }
  return y;
}

Vec64 layernorm64(const Vec64& x, const Vec64& g, const Vec64& b, int64_t rows, int64_t dim,
                  double eps) {
  Vec64 y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i] / dim;
    for (int64_t i = 0; i < dim; ++i) var += std::pow(x[r * dim + i] - mean, 2) / dim;
    for (int64_t i = 0; i < dim; ++i)
      y[r * dim + i] = (x[r * dim + i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
  }
  return y;
}

TEST(RmsnormBackward, MatchesFiniteDifferences) {
  for (int64_t dim : {1, 5, 17, 64}) {
    const int64_t rows = 3;
    const float eps = 1e-5f;
    const auto x = test::random_floats(static_cast<size_t>(rows * dim), 1);
    const auto w = test::random_floats(static_cast<size_t>(dim), 2, 0.5f, 1.5f);
    const auto dy = test::random_floats(x.size(), 3);
    const auto dx0 = test::random_floats(x.size(), 4), dw0 = test::random_floats(w.size(), 5);
    auto dx = dx0, dw = dw0;
    rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rows, dim, eps);
    const Vec64 x64 = test::to64(x), w64 = test::to64(w);
    const auto num_dx = test::numeric_grad(
        [&](const Vec64& at) { return rmsnorm64(at, w64, rows, dim, eps); }, x64, dy);
    const auto num_dw = test::numeric_grad(
        [&](const Vec64& at) { return rmsnorm64(x64, at, rows, dim, eps); }, w64, dy);
    EXPECT_TRUE(test::grad_close(dx, dx0, num_dx)) << "dx dim " << dim;
    EXPECT_TRUE(test::grad_close(dw, dw0, num_dw)) << "dweight dim " << dim;
  }
}

TEST(LayernormBackward, MatchesFiniteDifferences) {
  for (int64_t dim : {2, 5, 17, 64}) {
    for (bool with_beta : {true, false}) {
      const int64_t rows = 3;
      const float eps = 1e-5f;
      const auto x = test::random_floats(static_cast<size_t>(rows * dim), 6, -2, 3);
      const auto g = test::random_floats(static_cast<size_t>(dim), 7, 0.5f, 1.5f);
      const auto b = test::random_floats(static_cast<size_t>(dim), 8);
      const auto dy = test::random_floats(x.size(), 9);
      const auto dx0 = test::random_floats(x.size(), 10), dg0 = test::random_floats(g.size(), 11),
                 db0 = test::random_floats(b.size(), 12);
      auto dx = dx0, dg = dg0, db = db0;
      layernorm_backward(dx.data(), dg.data(), with_beta ? db.data() : nullptr, dy.data(), x.data(),
                         g.data(), rows, dim, eps);
      const Vec64 x64 = test::to64(x), g64 = test::to64(g), b64 = test::to64(b);
      const auto num_dx = test::numeric_grad(
          [&](const Vec64& at) { return layernorm64(at, g64, b64, rows, dim, eps); }, x64, dy);
      const auto num_dg = test::numeric_grad(
          [&](const Vec64& at) { return layernorm64(x64, at, b64, rows, dim, eps); }, g64, dy);
      const auto num_db = test::numeric_grad(
          [&](const Vec64& at) { return layernorm64(x64, g64, at, rows, dim, eps); }, b64, dy);
      EXPECT_TRUE(test::grad_close(dx, dx0, num_dx)) << "dx dim " << dim;
      EXPECT_TRUE(test::grad_close(dg, dg0, num_dg)) << "dgamma dim " << dim;
      if (with_beta) {
        EXPECT_TRUE(test::grad_close(db, db0, num_db)) << "dbeta dim " << dim;
      } else {
        EXPECT_EQ(db, db0);
      }
    }
  }
}

}  // namespace
}  // namespace lmstack::kernels
