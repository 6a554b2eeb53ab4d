// Q4_0 and Q4_K repacked into q4_0x16 / q4_Kx16 (quant_repack.h, quant_gemv_x16.h) against
// the plain rows:
// - the layout round-trips to the same bytes (odd n: partial groups stay plain rows);
// - for every supported linear variant, the repacked GEMV equals the plain one up to float
//   summation order (both quantize x the same way and their int32 block dot products are exact,
//   so the bound is 1e-5 of the sum of |x w| terms), over n with tails (n < 16, n % 16 != 0),
//   K from one block (super-block) to 1536, M = 1..5, bias and accumulate;
// - each ISA's leaf kernel over row ranges that start and end inside a group of 16;
// - prefill (M > 16) gives the plain weight's result bit for bit (the int8 GEMM packs its
//   panels from the groups directly), and a group's int8 panel is byte for byte the plain
//   rows' panel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/cpu_features.h"
#include "lmstack/kernels/gemm_int8.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/kernels/quant_gemv.h"
#include "lmstack/kernels/quant_repack.h"

namespace lmstack::kernels {
namespace {

std::vector<float> random_vec(int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

struct Pair {
  Tensor plain, packed;
  std::vector<float> wf;  // dequantized, for the error bound
};

// The row types with an interleaved layout, and K values (multiples of their block) per test.
struct Layout {
  DType plain;
  std::vector<int64_t> small_ks, gemv_ks;
};
const Layout kLayouts[] = {{DType::kQ4_0, {32, 96}, {32, 64, 96, 576, 1536}},
                           {DType::kQ4_K, {256, 512}, {256, 512, 1536}},
                           {DType::kQ6_K, {256, 768}, {256, 512, 1536}}};

Pair make_pair(ThreadPool& pool, DType t, int64_t n, int64_t k, std::mt19937& rng) {
  const std::vector<float> src = random_vec(n * k, rng);
  Pair p;
  p.plain = quantize_matrix(pool, src.data(), n, k, t);
  p.packed = repack_x16(p.plain, Tensor::zeros(Shape{p.plain.nbytes()}, DType::kI8));
  p.wf.resize(static_cast<size_t>(n * k));
  dequantize_rows(p.plain, 0, n, p.wf.data());
  return p;
}

// 1e-5 of the magnitude of output (r, j)'s terms, plus its bias and accumulated value.
double bound(const std::vector<float>& x, const std::vector<float>& wf, int64_t r, int64_t j,
             int64_t k, double extra) {
  double mag = extra;
  for (int64_t i = 0; i < k; ++i)
    mag += std::fabs(x[static_cast<size_t>(r * k + i)] * wf[static_cast<size_t>(j * k + i)]);
  return 1e-5 * mag + 1e-6;
}

TEST(QuantRepack, RoundTripsToTheSameBytesAndValues) {
  std::mt19937 rng(5);
  ThreadPool pool(1);
  for (const Layout& l : kLayouts)
    for (int64_t n : {1, 5, 15, 16, 17, 33, 48})
      for (int64_t k : l.small_ks) {
        const Pair p = make_pair(pool, l.plain, n, k, rng);
        const DType t = p.packed.dtype();
        EXPECT_EQ(t, x16_dtype_for(l.plain));
        EXPECT_EQ(row_interleaved_base(t), l.plain);
        EXPECT_EQ(p.packed.nbytes(), p.plain.nbytes());
        std::vector<uint8_t> back(static_cast<size_t>(p.plain.nbytes()));
        x16_rows_to_plain(t, static_cast<const uint8_t*>(p.packed.raw_data()), n, k, 0, n,
                          back.data());
        EXPECT_EQ(std::memcmp(back.data(), p.plain.raw_data(), back.size()), 0)
            << dtype_name(t) << " n=" << n << " k=" << k;
        std::vector<float> got(static_cast<size_t>(n * k));
        dequantize_rows(p.packed, 0, n, got.data());
        EXPECT_EQ(got, p.wf) << dtype_name(t) << " n=" << n << " k=" << k;
        if (n > 16) {  // row 16 onwards: the 17th row (plain tail when n = 17)
          std::vector<float> row(static_cast<size_t>(k));
          dequantize_rows(p.packed, 16, 17, row.data());
          EXPECT_TRUE(std::equal(row.begin(), row.end(), p.wf.begin() + 16 * k));
        }
        if (n > 5) {  // one row inside the first group, its bytes back alone
          const int64_t rb = p.plain.nbytes() / n;
          std::vector<uint8_t> one(static_cast<size_t>(rb));
          x16_rows_to_plain(t, static_cast<const uint8_t*>(p.packed.raw_data()), n, k, 5, 6,
                            one.data());
          EXPECT_EQ(
              std::memcmp(one.data(), static_cast<const uint8_t*>(p.plain.raw_data()) + 5 * rb,
                          one.size()),
              0);
        }
      }
}

void check_linear(const KernelVariant<LinearFn>& v, ThreadPool& pool, const Pair& p, int64_t m,
                  bool use_bias, bool accumulate, std::mt19937& rng) {
  const int64_t n = p.plain.dim(0), k = p.plain.dim(1);
  const std::vector<float> x = random_vec(m * k, rng, -2.0f, 1.0f);  // skewed: nonzero sums
  const std::vector<float> bias = use_bias ? random_vec(n, rng) : std::vector<float>{};
  const std::vector<float> y0 =
      accumulate ? random_vec(m * n, rng) : std::vector<float>(static_cast<size_t>(m * n), NAN);
  std::vector<float> want = y0, got = y0;
  const float* bp = use_bias ? bias.data() : nullptr;
  const LinearOut plain{want.data(), &p.plain, bp, accumulate};
  const LinearOut packed{got.data(), &p.packed, bp, accumulate};
  v.fn(pool, x.data(), m, {&plain, 1});
  v.fn(pool, x.data(), m, {&packed, 1});
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(r * n + j);
      const double extra = (use_bias ? std::fabs(bias[static_cast<size_t>(j)]) : 0.0) +
                           (accumulate ? std::fabs(y0[at]) : 0.0);
      ASSERT_NEAR(got[at], want[at], bound(x, p.wf, r, j, k, extra))
          << v.name << " m=" << m << " n=" << n << " k=" << k << " bias=" << use_bias
          << " acc=" << accumulate << " at [" << r << ", " << j << "]";
    }
}

TEST(QuantRepack, GemvEqualsThePlainRowsOnEveryVariant) {
  std::mt19937 rng(2026);
  ThreadPool pool1(1), pool2(2);
  int cases = 0;
  for (const auto& v : linear_variants()) {
    if (!v.supported()) {
      std::printf("skipping unsupported variant %s\n", v.name);
      continue;
    }
    for (const Layout& l : kLayouts)
      for (int64_t k : l.gemv_ks)
        for (int64_t n : {1, 7, 15, 16, 17, 40, 100}) {
          const Pair p = make_pair(pool1, l.plain, n, k, rng);
          for (int64_t m = 1; m <= 5; ++m) {
            const int flags = static_cast<int>((m + n + k / 32) % 4);
            check_linear(v, (m + n) % 2 ? pool2 : pool1, p, m, flags & 1, flags & 2, rng);
            if (HasFatalFailure()) return;
            ++cases;
          }
        }
  }
  EXPECT_GT(cases, 0);
}

// The leaf kernels directly, over ranges that cut groups of 16 (linear() hands out whole ones).
TEST(QuantRepack, LeafKernelsOverRangesInsideGroups) {
  struct Leaf {
    const char* name;
    QuantGemvFn* fn;
    bool ok;
  };
  const CpuFeatures& f = cpu_features();
  const Leaf leaves[] = {
      {"avx512_vnni", quant_gemv_avx512_vnni, f.has_avx512() && f.avx512_vnni},
      {"avx512", quant_gemv_avx512, f.has_avx512()},
      {"avx2", quant_gemv_avx2, f.has_avx2_fma()},
  };
  std::mt19937 rng(7);
  ThreadPool pool(1);
  const int64_t ranges[][2] = {{0, 45}, {3, 9}, {5, 37}, {16, 32}, {31, 33}, {30, 45}, {40, 44}};
  for (const Layout& l : kLayouts)
    for (const Leaf& leaf : leaves) {
      if (!leaf.ok) continue;
      const int64_t n = 45, k = l.small_ks.back();  // two groups, then 13 plain rows
      const Pair p = make_pair(pool, l.plain, n, k, rng);
      for (int64_t m : {1, 4, 5}) {
        const std::vector<float> x = random_vec(m * k, rng);
        const std::vector<float> bias = random_vec(n, rng);
        const QuantizedRows xq = quantize_activations(x.data(), m, k);
        for (const auto& [lo, hi] : ranges) {
          std::vector<float> want(static_cast<size_t>(m * n), 7.0f), got = want;
          leaf.fn(l.plain, p.plain.raw_data(), n, lo, hi, xq, m, want.data(), n, bias.data(), true);
          leaf.fn(p.packed.dtype(), p.packed.raw_data(), n, lo, hi, xq, m, got.data(), n,
                  bias.data(), true);
          for (int64_t r = 0; r < m; ++r)
            for (int64_t j = 0; j < n; ++j) {
              const size_t at = static_cast<size_t>(r * n + j);
              if (j < lo || j >= hi) {
                ASSERT_EQ(got[at], 7.0f) << leaf.name << " wrote row " << j << " outside";
                continue;
              }
              ASSERT_NEAR(got[at], want[at], bound(x, p.wf, r, j, k, 8.0 + std::fabs(bias[j])))
                  << leaf.name << " " << dtype_name(l.plain) << " m=" << m << " range [" << lo
                  << ", " << hi << ") at [" << r << ", " << j << "]";
            }
        }
      }
    }
}

TEST(QuantRepack, PrefillGemmEqualsThePlainWeightBitForBit) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  for (const Layout& l : kLayouts)
    for (const auto& v : linear_variants()) {
      if (!v.supported()) continue;
      const int64_t k = l.small_ks.back();
      for (int64_t n : {16, 37}) {
        const Pair p = make_pair(pool, l.plain, n, k, rng);
        for (int64_t m : {17, 40}) {
          const std::vector<float> x = random_vec(m * k, rng);
          std::vector<float> want(static_cast<size_t>(m * n)), got(want.size());
          const LinearOut plain{want.data(), &p.plain}, packed{got.data(), &p.packed};
          v.fn(pool, x.data(), m, {&plain, 1});
          v.fn(pool, x.data(), m, {&packed, 1});
          EXPECT_EQ(got, want) << v.name << " " << dtype_name(l.plain) << " m=" << m << " n=" << n;
        }
      }
    }
}

TEST(QuantRepack, Int8PanelsOfGroupsEqualThePlainRowsPanels) {
  std::mt19937 rng(23);
  ThreadPool pool(1);
  for (const Layout& l : kLayouts)
    for (const auto& [n, kb] : {std::pair<int64_t, int64_t>{16, 1}, {35, 3}, {48, 11}}) {
      const int64_t k = kb * dtype_info(l.plain).block_size;
      const Pair p = make_pair(pool, l.plain, n, k, rng);  // n = 35: two groups, 3 plain rows
      const size_t bytes =
          static_cast<size_t>(k / 32 * int8_panel_block_bytes(int8_panel_kind(l.plain).halves));
      std::vector<uint8_t> want(bytes, 0xAB), got(bytes, 0xCD);
      for (int64_t n0 = 0; n0 < n; n0 += kInt8PanelCols) {
        pack_int8_panel(l.plain, p.plain.raw_data(), n, k, n0, want.data());
        pack_int8_panel(p.packed.dtype(), p.packed.raw_data(), n, k, n0, got.data());
        ASSERT_EQ(got, want) << dtype_name(l.plain) << " n " << n << " k " << k << " panel at row "
                             << n0;
      }
    }
}

}  // namespace
}  // namespace lmstack::kernels
