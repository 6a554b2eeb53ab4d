// The check both GEMM tests (gemm_test.cc, gemm_bf16_test.cc) make of C after a product: the
// columns past n (row padding) untouched, the rest within a tolerance of the reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lmstack::test {

// c0: C before the call; want: the reference's C; got: the variant's. Inputs lie in [-1, 1],
// so |alpha| * k + |beta| bounds every term, and the f32 sums differ by a few ulps of that.
inline void expect_gemm_c(const std::vector<float>& c0, const std::vector<float>& want,
                          const std::vector<float>& got, int64_t m, int64_t n, int64_t k,
                          int64_t ldc, float alpha, float beta, const std::string& what) {
  const double mag = std::fabs(alpha) * static_cast<double>(k) + std::fabs(beta);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j >= n) {  // padding must be untouched
        if (std::isnan(c0[at]))
          ASSERT_TRUE(std::isnan(got[at])) << what;
        else
          ASSERT_EQ(got[at], c0[at]) << what << " wrote padding at [" << i << ", " << j << "]";
        continue;
      }
      ASSERT_NEAR(got[at], want[at], 2e-6 * mag + 1e-6) << what << " at [" << i << ", " << j << "]";
    }
  }
}

}  // namespace lmstack::test
