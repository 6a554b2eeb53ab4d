// Finite-difference gradient checks for the backward kernels: the loss is L = Σ f(x)·w for a
// fixed random w (so dL/dy = w), f evaluated in f64 by a plain forward written in the test,
// and dL/dx estimated by central differences (error O(h²) ≈ 1e-10 at h = 1e-5).
#pragma once

#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lmstack::test {

using Vec64 = std::vector<double>;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline Vec64 to64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// dL/dx[i] of L(x) = Σ_k f(x)[k]·w[k] by central differences.
inline std::vector<float> numeric_grad(const std::function<Vec64(const Vec64&)>& f, Vec64 x,
                                       const std::vector<float>& w, double h = 1e-5) {
  auto loss = [&](const Vec64& at) {
    const Vec64 y = f(at);
    double l = 0;
    for (size_t k = 0; k < y.size(); ++k) l += y[k] * w[k];
    return l;
  };
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss(x);
    x[i] = keep - h;
    const double down = loss(x);
    x[i] = keep;
    g[i] = static_cast<float>((up - down) / (2 * h));
  }
  return g;
}

// The analytic gradient was accumulated onto `initial`: subtract it before comparing.
inline ::testing::AssertionResult grad_close(const std::vector<float>& accumulated,
                                             const std::vector<float>& initial,
                                             const std::vector<float>& numeric, double rtol = 1e-4,
                                             double atol = 2e-5) {
  std::vector<float> analytic(accumulated.size());
  for (size_t i = 0; i < analytic.size(); ++i) analytic[i] = accumulated[i] - initial[i];
  return all_close(analytic, numeric, rtol, atol);
}

}  // namespace lmstack::test
