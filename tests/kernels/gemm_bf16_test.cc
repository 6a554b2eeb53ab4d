// gemm_bf16() and linear_bf16(): the reference's rounding checked by hand, then every variant
// against the reference (operands rounded to bf16, products summed in double) over the four
// transpose combinations, f32 and bf16 B, alpha/beta (including beta == 0 over NaN-filled
// C), padded leading dimensions, shapes off every tile (MR 14, NR 32, odd K, past KC = 768
// and NC = 512), 1 and 2 threads. The AVX512_BF16 variant is skipped where the CPU lacks it.
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemm_check.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

std::vector<float> random_vec(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

TEST(GemmBf16Ref, RoundsOperandsToNearestEven) {
  // 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: ties go to even (1). 1 + 3 * 2^-8
  // lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  const float a[2] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  const float b[2] = {1.0f, 1.0f + 0x1p-8f};  // b[1] rounds to 1 as well
  float c = 0.0f;
  ref::gemm_bf16(false, false, 1, 1, 2, 1.0f, a, 2, b, DType::kF32, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 1.0f + (1.0f + 0x1p-6f));
  const uint16_t b16[2] = {f32_to_bf16(1.0f), f32_to_bf16(2.0f)};
  ref::gemm_bf16(false, false, 1, 1, 2, 1.0f, a, 2, b16, DType::kBF16, 1, 0.0f, &c, 1);
  EXPECT_EQ(c, 1.0f + 2.0f * (1.0f + 0x1p-6f));
}

TEST(GemmBf16Ref, EqualsF32ReferenceOnBf16ExactInputs) {
  std::mt19937 rng(5);
  const int64_t m = 7, n = 9, k = 13;
  std::vector<float> a = random_vec(m * k, rng), b = random_vec(k * n, rng);
  for (auto* v : {&a, &b})
    for (auto& e : *v) e = bf16_to_f32(f32_to_bf16(e));
  std::vector<float> want(static_cast<size_t>(m * n), 0.5f), got = want;
  ref::gemm_f32(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 1.0f, want.data(), n);
  ref::gemm_bf16(false, false, m, n, k, 1.0f, a.data(), k, b.data(), DType::kF32, n, 1.0f,
                 got.data(), n);
  EXPECT_EQ(got, want);
}

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;  // extra elements per row of A, B and C
  DType bt;
};

void check(const KernelVariant<GemmBf16Fn>& v, ThreadPool& pool, const Problem& p,
           std::mt19937& rng) {
  const int64_t lda = (p.ta ? p.m : p.k) + p.pad, ldb = (p.tb ? p.k : p.n) + p.pad;
  const int64_t ldc = p.n + p.pad;
  const std::vector<float> a = random_vec((p.ta ? p.k : p.m) * lda, rng);
  const std::vector<float> b32 = random_vec((p.tb ? p.n : p.k) * ldb, rng);
  const std::vector<uint16_t> b16 = to_bf16(b32);
  const void* b = p.bt == DType::kBF16 ? static_cast<const void*>(b16.data()) : b32.data();
  std::vector<float> c0 = random_vec(p.m * ldc, rng);
  if (p.beta == 0.0f)
    for (auto& e : c0) e = NAN;  // BLAS: beta == 0 means C is write-only
  std::vector<float> want = c0, got = c0;
  ref::gemm_bf16(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), lda, b, p.bt, ldb, p.beta,
                 want.data(), ldc);
  v.fn(pool, p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), lda, b, p.bt, ldb, p.beta, got.data(),
       ldc);
  const std::string what = std::string(v.name) + " ta=" + std::to_string(p.ta) +
                           " tb=" + std::to_string(p.tb) + " m=" + std::to_string(p.m) +
                           " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k) + " b " +
                           std::string(dtype_name(p.bt)) + " alpha=" + std::to_string(p.alpha) +
                           " beta=" + std::to_string(p.beta);
  // Both sides sum the same exact products (a bf16 x bf16 product fits an f32); only the
  // f32 summation differs, by at most ~k ulps of the largest partial sum, and the inputs lie
  // in [-1, 1], so |alpha| * k + |beta| bounds every term.
  test::expect_gemm_c(c0, want, got, p.m, p.n, p.k, ldc, p.alpha, p.beta, what);
}

void check_variant(const KernelVariant<GemmBf16Fn>& v) {
  std::mt19937 rng(99);
  ThreadPool pool1(1), pool2(2);
  const int64_t sizes[][3] = {
      {1, 1, 1},      {1, 17, 33},   {3, 5, 7},   {15, 33, 2}, {14, 32, 64},
      {29, 100, 41},  {43, 65, 300}, {100, 1, 9}, {2, 300, 3}, {45, 129, 769},
      {20, 530, 400}, {31, 47, 1537}};  // past one NC x KC block of B, odd K past 2 KC
  const float scalars[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 2.0f}, {2.0f, 0.0f}};
  int count = 0;
  for (int t = 0; t < 8; ++t) {
    for (const auto& s : sizes) {
      const auto& ab = scalars[count % 4];
      const Problem p{(t & 1) != 0, (t & 2) != 0, s[0],
                      s[1],         s[2],         ab[0],
                      ab[1],        count % 3,    (t & 4) != 0 ? DType::kBF16 : DType::kF32};
      check(v, ++count % 2 ? pool2 : pool1, p, rng);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

const KernelVariant<GemmBf16Fn>& variant(const char* name) {
  for (const auto& v : gemm_bf16_variants())
    if (std::strcmp(v.name, name) == 0) return v;
  throw std::runtime_error(std::string("no gemm_bf16 variant ") + name);
}

TEST(GemmBf16, Avx512Bf16MatchesReference) {
  const auto& v = variant("avx512_bf16");
  if (!v.supported()) GTEST_SKIP() << "this CPU lacks AVX512_BF16 (vdpbf16ps)";
  check_variant(v);
}

TEST(GemmBf16, RoundedF32MatchesReference) { check_variant(variant("rounded_f32")); }

TEST(GemmBf16, LinearBf16AddsBiasAndAccumulates) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  const int64_t m = 19, n = 37, k = 45;
  const std::vector<float> x = random_vec(m * k, rng), w32 = random_vec(n * k, rng);
  const std::vector<float> bias = random_vec(n, rng), y0 = random_vec(m * n, rng);
  Tensor w = Tensor::zeros(Shape({n, k}), DType::kBF16);
  convert_f32_to_bf16(w32.data(), w.data<uint16_t>(), n * k);
  for (const bool accumulate : {false, true}) {
    std::vector<float> want = y0, got = y0;
    ref::gemm_bf16(false, true, m, n, k, 1.0f, x.data(), k, w.raw_data(), DType::kBF16, k,
                   accumulate ? 1.0f : 0.0f, want.data(), n);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) want[static_cast<size_t>(r * n + j)] += bias[j];
    linear_bf16(pool, got.data(), x.data(), w, m, bias.data(), accumulate);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4) << "accumulate " << accumulate << " at " << i;
  }
}

}  // namespace
}  // namespace lmstack::kernels
