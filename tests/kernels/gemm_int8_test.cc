// The int8 prefill GEMM's pieces (gemm_int8.h): a packed panel's signed codes, scales and
// offsets give back quant.h's dequantized weights for every supported type (columns past N
// zero) and its corrections are -128 times each part's code sum, and the VNNI and AVX2
// microkernels equal the scalar reference for every row count 1..12, column tails and both
// store modes. quant_linear_test.cc checks the whole product against the reference.
#include <algorithm>
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
#include "lmstack/kernels/quant_blocks.h"

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

// Column c's code at element i of a panel.
int panel_code(const uint8_t* panel, bool halves, int c, int64_t i) {
  const uint8_t* pb = panel + (i / 32) * int8_panel_block_bytes(halves);
  const int64_t e = i % 32;
  return static_cast<int8_t>(pb[(e / 4) * 64 + c * 4 + e % 4]);
}

// Column c, element i of a panel: s * code + o of its block (of its half of the block, for
// half-scale types).
float panel_weight(const uint8_t* panel, bool halves, int c, int64_t i) {
  const uint8_t* pb = panel + (i / 32) * int8_panel_block_bytes(halves);
  const int h = halves ? static_cast<int>(i % 32 / 16) : 0;
  return int8_part_scales(pb, h)[c] * static_cast<float>(panel_code(panel, halves, c, i)) +
         int8_part_offsets(pb, h)[c];
}

// Column c's correction of the part holding element i, against -128 * sum(the part's codes).
void expect_correction(const uint8_t* panel, bool halves, int c, int64_t i) {
  const int len = halves ? 16 : 32;
  if (i % len != 0) return;
  int sum = 0;
  for (int64_t e = i; e < i + len; ++e) sum += panel_code(panel, halves, c, e);
  const uint8_t* pb = panel + (i / 32) * int8_panel_block_bytes(halves);
  ASSERT_EQ(int8_part_corrections(pb, halves ? static_cast<int>(i % 32 / 16) : 0)[c], -128 * sum)
      << "column " << c << " element " << i;
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
    const bool halves = int8_panel_kind(t).halves;
    std::vector<uint8_t> panel(static_cast<size_t>(k / 32 * int8_panel_block_bytes(halves)));
    for (int64_t n0 = 0; n0 < n; n0 += kInt8PanelCols) {
      pack_int8_panel(t, w.raw_data(), n, k, n0, panel.data());
      for (int c = 0; c < kInt8PanelCols; ++c) {
        for (int64_t i = 0; i < k; ++i) {
          expect_correction(panel.data(), halves, c, i);
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
  EXPECT_TRUE(int8_panel_kind(DType::kQ6_K).halves);
  EXPECT_FALSE(int8_panel_kind(DType::kQ4_K).halves);
  EXPECT_TRUE(int8_panel_kind(DType::kQ4_K).offsets);
  EXPECT_FALSE(int8_panel_kind(DType::kQ4_0).offsets);
  EXPECT_TRUE(int8_panel_kind(DType::kQ8_0).wide);
  for (int i = 0; i < kNumDTypes; ++i) {  // the kernels implement one flag at a time
    const auto t = static_cast<DType>(i);
    if (!int8_gemm_supports(t)) continue;
    const Int8PanelKind kind = int8_panel_kind(t);
    EXPECT_LE(int{kind.halves} + int{kind.offsets} + int{kind.wide}, 1) << dtype_name(t);
  }
  EXPECT_FALSE(int8_gemm_supports(DType::kBF16));
}

// A microkernel against the reference over every row count, column tails (both 8-column halves
// of the AVX2 kernel) and both store modes, on rows ending at the last of x's m rows.
void check_micro(Int8MicroFn* micro, const QuantizedRows& xq, int64_t m, int64_t n,
                 const uint8_t* panel, Int8PanelKind kind, std::mt19937& rng,
                 std::string_view what) {
  for (int mr = 1; mr <= kInt8MicroRows; ++mr) {
    for (int nr : {1, 7, 8, 11, 16}) {
      for (bool add : {false, true}) {
        const int64_t row0 = m - mr;  // rows past 0: the kernel must offset x by row0
        std::vector<float> want = random_vec(mr * n, rng), got = want;
        int8_micro_ref(xq, row0, mr, panel, want.data(), n, nr, add, kind);
        micro(xq, row0, mr, panel, got.data(), n, nr, add, kind);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
              << what << " mr " << mr << " nr " << nr << " add " << add << " at " << i;
      }
    }
  }
}

// Random weights and x, or (extreme) the int16 worst case of the AVX2 kernel: codes at their
// most negative (-8; Q6_K -32; Q8_0 -128, written into the blocks) but one per block, against
// u = 255 (x all +1, q = 127), whose sums are exact there only below 2^15 (gemm_int8_avx2.cc).
void check_micro_all_types(Int8MicroFn* micro, bool extremes, std::mt19937& rng) {
  ThreadPool pool(1);
  const int64_t m = 13, n = 16, k = 256;  // 8 blocks, one K-quant super-block
  for (DType t : kTypes) {
    for (bool extreme : {false, true}) {
      if (extreme && !extremes) continue;
      std::vector<float> src = random_vec(n * k, rng);
      std::vector<float> x = random_vec(m * k, rng);
      if (extreme) {  // -1 but for one +1 per block, which sets the scale of min-offset types
        for (size_t i = 0; i < src.size(); ++i) src[i] = i % 32 == 31 ? 1.0f : -1.0f;
        std::fill(x.begin(), x.end(), 1.0f);
      }
      Tensor w = quantize_matrix(pool, src.data(), n, k, t);
      auto* bytes = static_cast<uint8_t*>(w.raw_data());
      if (extreme && t == DType::kQ8_0)  // a block is 2 bytes of scale, then 32 codes
        for (int64_t i = 0; i < w.nbytes(); ++i)
          if (i % qblock::kQ8_0Bytes >= 2) bytes[i] = 0x80;
      if (extreme && t == DType::kQ6_K)  // ql and qh first: all zero is code 0 - 32
        for (int64_t i = 0; i < w.nbytes(); ++i)
          if (i % qblock::kQ6_KBytes < qblock::kQ6_KScalesAt) bytes[i] = 0;
      const Int8PanelKind kind = int8_panel_kind(t);
      std::vector<uint8_t> panel(static_cast<size_t>(k / 32 * int8_panel_block_bytes(kind.halves)));
      pack_int8_panel(t, w.raw_data(), n, k, 0, panel.data());
      if (extreme) {
        const int most_negative = kind.wide ? -128 : kind.halves ? -32 : -8;
        ASSERT_EQ(panel_code(panel.data(), kind.halves, 5, 37), most_negative) << dtype_name(t);
      }
      const QuantizedRows xq = quantize_activations(x.data(), m, k, nullptr, true);
      check_micro(micro, xq, m, n, panel.data(), kind, rng,
                  std::string(dtype_name(t)) + (extreme ? " extreme" : ""));
    }
  }
}

TEST(GemmInt8, VnniMicrokernelMatchesReference) {
  if (!cpu_features().has_avx512() || !cpu_features().avx512_vnni)
    GTEST_SKIP() << "no AVX-512 VNNI here; the reference is checked by the panel test";
  std::mt19937 rng(17);
  check_micro_all_types(int8_micro_avx512_vnni, false, rng);
}

TEST(GemmInt8, Avx2MicrokernelMatchesReference) {
  if (!cpu_features().has_avx2_fma()) GTEST_SKIP() << "no AVX2 here";
  std::mt19937 rng(19);
  check_micro_all_types(int8_micro_avx2, true, rng);
}

}  // namespace
}  // namespace lmstack::kernels
