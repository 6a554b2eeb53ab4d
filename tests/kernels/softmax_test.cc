// softmax_rows: every supported variant against the reference over odd row lengths, large
// offsets (stability), masked entries (-inf) and a hand-computed row.
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

TEST(Softmax, ReferenceValues) {
  std::vector<float> x = {1, 2, 3, 1000, 1000, -INFINITY};
  ref::softmax_rows(x.data(), 2, 3);
  const double e = std::exp(1.0), s = 1 + e + e * e;
  EXPECT_TRUE(
      test::all_close(x, {float(1 / s), float(e / s), float(e * e / s), 0.5f, 0.5f, 0}, 1e-6, 0));
}

TEST(Softmax, VariantsMatchReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-20, 20);
  for (const auto& variant : softmax_rows_variants()) {
    if (!variant.supported()) continue;
    for (int64_t dim : {1, 3, 15, 16, 17, 100, 1000, 1031}) {
      const int64_t rows = 3;
      std::vector<float> x(static_cast<size_t>(rows * dim));
      for (auto& v : x) v = dist(rng);
      for (int64_t i = 0; i < dim; ++i) x[static_cast<size_t>(dim + i)] += 500;  // offset row
      if (dim > 2) x[static_cast<size_t>(2 * dim + 1)] = -INFINITY;              // masked entry
      std::vector<float> want = x, got = x;
      ref::softmax_rows(want.data(), rows, dim);
      variant.fn(got.data(), rows, dim);
      EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-9)) << variant.name << " dim " << dim;
    }
  }
  std::vector<float> want = {0.5f, -1, 3}, got = want;
  ref::softmax_rows(want.data(), 1, 3);
  softmax_rows(got.data(), 1, 3);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 0));
}

}  // namespace
}  // namespace lmstack::kernels
