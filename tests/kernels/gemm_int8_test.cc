// The int8 prefill GEMM's pieces (gemm_int8.h): a packed panel's codes, scales and offsets
// give back quant.h's dequantized weights for every supported type (columns past N zero), and
// the VNNI microkernel equals the scalar reference for every row count 1..12, column tails
// and both store modes. quant_linear_test.cc checks the whole product against the reference.
#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/gemm_int8.h"
#include "lmstack/kernels/quant.h"

namespace lmstack::kernels {
namespace {

const DType kTypes[] = {DType::kQ8_0,    DType::kQ4_0,    DType::kQ4_K,    DType::kQ6_K,
                        DType::kInt4G32, DType::kInt4G64, DType::kInt4G128};

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

// Column c, element i of a panel: s * code + o of its block (of its half of the block, for
// half-scale types).
float panel_weight(const uint8_t* panel, bool halves, int c, int64_t i) {
  const uint8_t* pb = panel + (i / 32) * int8_panel_block_bytes(halves);
  const int64_t e = i % 32;
  const float* so = reinterpret_cast<const float*>(pb + 32 * kInt8PanelCols) +
                    (halves ? 2 * kInt8PanelCols * (e / 16) : 0);
  return so[c] * static_cast<float>(pb[(e / 4) * 64 + c * 4 + e % 4]) + so[kInt8PanelCols + c];
}

TEST(GemmInt8, PanelGivesBackTheDequantizedWeights) {
  std::mt19937 rng(5);
  ThreadPool pool(1);
  const int64_t n = 19, k = 512;  // two panels, the second with 3 columns
  for (DType t : kTypes) {
    ASSERT_TRUE(int8_gemm_supports(t)) << dtype_name(t);
    const std::vector<float> src = random_vec(n * k, rng);
    const Tensor w = quantize_matrix(pool, src.data(), n, k, t);
    std::vector<float> want(static_cast<size_t>(n * k));
    dequantize_rows(w, 0, n, want.data());
    const bool halves = int8_gemm_half_scales(t);
    std::vector<uint8_t> panel(static_cast<size_t>(k / 32 * int8_panel_block_bytes(halves)));
    for (int64_t n0 = 0; n0 < n; n0 += kInt8PanelCols) {
      pack_int8_panel(t, w.raw_data(), n, k, n0, panel.data());
      for (int c = 0; c < kInt8PanelCols; ++c) {
        for (int64_t i = 0; i < k; ++i) {
          const float got = panel_weight(panel.data(), halves, c, i);
          if (n0 + c >= n) {
            ASSERT_EQ(got, 0.0f) << dtype_name(t) << " column past n";
            continue;
          }
          const float e = want[static_cast<size_t>((n0 + c) * k + i)];
          ASSERT_NEAR(got, e, 1e-6f * std::fabs(e) + 1e-7f)
              << dtype_name(t) << " row " << n0 + c << " element " << i;
        }
      }
    }
  }
  EXPECT_TRUE(int8_gemm_half_scales(DType::kQ6_K));
  EXPECT_FALSE(int8_gemm_half_scales(DType::kQ4_K));
  EXPECT_FALSE(int8_gemm_supports(DType::kBF16));
}

// A microkernel against the reference over every row count, column tails (both 8-column halves
// of the AVX2 kernel) and both store modes, on rows ending at the last of x's m rows.
void check_micro(Int8MicroFn* micro, const QuantizedRows& xq, int64_t m, int64_t n,
                 const uint8_t* panel, bool halves, std::mt19937& rng, std::string_view what) {
  for (int mr = 1; mr <= kInt8MicroRows; ++mr) {
    for (int nr : {1, 7, 8, 11, 16}) {
      for (bool add : {false, true}) {
        const int64_t row0 = m - mr;  // rows past 0: the kernel must offset x by row0
        std::vector<float> want = random_vec(mr * n, rng), got = want;
        int8_micro_ref(xq, row0, mr, panel, want.data(), n, nr, add, halves);
        micro(xq, row0, mr, panel, got.data(), n, nr, add, halves);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
              << what << " mr " << mr << " nr " << nr << " add " << add << " at " << i;
      }
    }
  }
}

TEST(GemmInt8, VnniMicrokernelMatchesReference) {
  if (!cpu_features().has_avx512() || !cpu_features().avx512_vnni)
    GTEST_SKIP() << "no AVX-512 VNNI here; the reference is checked by the panel test";
  std::mt19937 rng(17);
  ThreadPool pool(1);
  const int64_t m = 13, n = 16, k = 256;  // 8 blocks, one Q4_K super-block
  for (DType t : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const std::vector<float> src = random_vec(n * k, rng);
    const Tensor w = quantize_matrix(pool, src.data(), n, k, t);
    const bool halves = int8_gemm_half_scales(t);
    std::vector<uint8_t> panel(static_cast<size_t>(k / 32 * int8_panel_block_bytes(halves)));
    pack_int8_panel(t, w.raw_data(), n, k, 0, panel.data());
    const std::vector<float> x = random_vec(m * k, rng);
    const QuantizedRows xq = quantize_activations(x.data(), m, k);
    check_micro(int8_micro_avx512_vnni, xq, m, n, panel.data(), int8_gemm_half_scales(t), rng,
                dtype_name(t));
  }
}

// The AVX2 kernel sums 4-bit codes (Q6_K's 6-bit ones two groups at a time) in int16: extreme
// codes (15; 63) against extreme activations (+-127 at every position) are its worst case,
// exact only below 2^15; random values besides.
TEST(GemmInt8, Avx2MicrokernelMatchesReference) {
  if (!cpu_features().has_avx2_fma()) GTEST_SKIP() << "no AVX2 here";
  std::mt19937 rng(19);
  ThreadPool pool(1);
  const int64_t m = 13, n = 16, k = 256;
  for (DType t : kTypes) {
    if (!int8_gemm_fits_int16(t)) continue;
    for (bool extreme : {false, true}) {
      std::vector<float> src = random_vec(n * k, rng);
      std::vector<float> x = random_vec(m * k, rng);
      const bool halves = int8_gemm_half_scales(t);
      if (extreme) {  // weights at the block's largest magnitude, x all +-1 (q = +-127)
        for (size_t i = 0; i < src.size(); ++i)  // codes 0 and 15 (Q6_K: 1-2 and 62-63)
          src[i] = i % 32 == 0 ? -1.0f : halves ? 0.96875f : 0.875f;
        for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 7) % 2 ? 1.0f : -1.0f;
      }
      const Tensor w = quantize_matrix(pool, src.data(), n, k, t);
      std::vector<uint8_t> panel(static_cast<size_t>(k / 32 * int8_panel_block_bytes(halves)));
      pack_int8_panel(t, w.raw_data(), n, k, 0, panel.data());
      const QuantizedRows xq = quantize_activations(x.data(), m, k);
      check_micro(int8_micro_avx2, xq, m, n, panel.data(), halves, rng,
                  std::string(dtype_name(t)) + (extreme ? " extreme" : ""));
    }
  }
  EXPECT_FALSE(int8_gemm_fits_int16(DType::kQ8_0));  // codes up to 255: int16 would saturate
}

}  // namespace
}  // namespace lmstack::kernels
