// linear() and embedding_lookup() over block-quantized weights: every supported linear variant
// against the reference (dequantize with quant.h's codec, then a dot in double) for each quant
// type, decode-sized M (the int8 GEMV, M <= 16) and prefill-sized M (the int8 GEMM of
// gemm_int8.h: with VNNI for all but Q6_K, without for the 4-bit types; else the blocked GEMM
// whose packing dequantizes), odd N
// (tails of every row range and register tile) and K from one block to 2816 (tinyllama's
// 5632 / 2). The int8 paths quantize activations to int8 per 32 elements, so their bound adds sum_b
// (amax_b / 254) * sum_{i in b} |w_i| (ops.h); and, much tighter, it must equal the reference run
// on x rounded exactly that way (d = amax / 127, q = round(x * (1 / d))), which catches any slip in
// the scale or offset bookkeeping. The activation quantizer's SIMD variants equal its reference
// bit for bit, threaded or not.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/half.h"
#include "lmstack/kernels/gemm_int8.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {
namespace {

constexpr int64_t kGemvMaxRows = 16;  // linear.cc: M up to this takes the quantized GEMV

const DType kQuantTypes[] = {DType::kQ8_0,    DType::kQ4_0,    DType::kQ4_K,    DType::kQ6_K,
                             DType::kInt4G32, DType::kInt4G64, DType::kInt4G128};

std::vector<float> random_vec(int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = dist(rng);
  return v;
}

// The allowed |got - want| of output (r, j): f32 accumulation in any order (2e-6 of the
// magnitude of the terms), plus, on the int8 paths, the activation quantization error.
double bound(const std::vector<float>& x, const std::vector<float>& wf, int64_t r, int64_t j,
             bool int8_x, int64_t k, double extra) {
  double mag = extra, quant = 0.0;
  for (int64_t b = 0; b < k / 32; ++b) {
    double amax = 0.0, wsum = 0.0;
    for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
      const double xi = x[static_cast<size_t>(r * k + i)], wi = wf[static_cast<size_t>(j * k + i)];
      mag += std::fabs(xi * wi);
      amax = std::max(amax, std::fabs(xi));
      wsum += std::fabs(wi);
    }
    quant += amax / 254.0 * wsum;
  }
  return 2e-6 * mag + 1e-6 + (int8_x ? quant * (1 + 1e-6) : 0.0);
}

// x with every 32-element block rounded to int8 the way linear()'s GEMV does (quant_linear.cc).
std::vector<float> int8_rounded(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = b; i < b + 32; ++i) out[i] = d * std::nearbyint(x[i] * inv);
  }
  return out;
}

void check(const KernelVariant<LinearFn>& v, ThreadPool& pool, DType t, int64_t m, int64_t n,
           int64_t k, bool use_bias, bool accumulate, std::mt19937& rng) {
  const std::vector<float> wsrc = random_vec(n * k, rng);
  const Tensor w = quantize_matrix(pool, wsrc.data(), n, k, t);
  std::vector<float> wf(static_cast<size_t>(n * k));
  dequantize_rows(w, 0, n, wf.data());
  const std::vector<float> x = random_vec(m * k, rng, -2.0f, 1.0f);  // skewed: nonzero sums
  const std::vector<float> bias = use_bias ? random_vec(n, rng) : std::vector<float>{};
  const std::vector<float> y0 =
      accumulate ? random_vec(m * n, rng) : std::vector<float>(m * n, NAN);
  std::vector<float> want = y0, got = y0;
  const float* bp = use_bias ? bias.data() : nullptr;
  ref::linear(want.data(), x.data(), w, m, bp, accumulate);
  const LinearOut out{got.data(), &w, bp, accumulate};
  v.fn(pool, x.data(), m, {&out, 1});
  // The GEMV (M <= 16) and, with VNNI, the int8 GEMM (gemm_int8.h) quantize x.
  const std::string name = v.name;
  const bool int8_gemm = int8_gemm_supports(t);
  const bool int8_x = name != "ref" && (m <= kGemvMaxRows || int8_gemm);
  std::vector<float> want_rounded = y0;
  const std::vector<float> xr = int8_x ? int8_rounded(x) : x;
  ref::linear(want_rounded.data(), xr.data(), w, m, bp, accumulate);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const size_t at = static_cast<size_t>(r * n + j);
      const double extra = (use_bias ? std::fabs(bias[static_cast<size_t>(j)]) : 0.0) +
                           (accumulate ? std::fabs(y0[at]) : 0.0);
      ASSERT_NEAR(got[at], want_rounded[at], bound(xr, wf, r, j, false, k, extra))
          << "vs rounded x: " << v.name << " " << dtype_name(t) << " m=" << m << " n=" << n
          << " k=" << k << " at [" << r << ", " << j << "]";
      ASSERT_NEAR(got[at], want[at], bound(x, wf, r, j, int8_x, k, extra))
          << v.name << " " << dtype_name(t) << " m=" << m << " n=" << n << " k=" << k
          << " bias=" << use_bias << " acc=" << accumulate << " threads=" << pool.num_threads()
          << " at [" << r << ", " << j << "]";
    }
  }
}

TEST(QuantLinear, EveryVariantMatchesDequantizedReference) {
  std::mt19937 rng(2024);
  ThreadPool pool1(1), pool2(2);
  int cases = 0;
  for (const auto& v : linear_variants()) {
    if (!v.supported()) {
      std::printf("skipping unsupported variant %s\n", v.name);
      continue;
    }
    for (DType t : kQuantTypes) {
      for (int64_t k : {32, 256, 352, 768, 2816}) {  // 352: 11 blocks, a tail after 8
        if (k % dtype_info(t).block_size != 0) continue;
        for (int64_t m : {1, 3, 16, 17, 33}) {
          const int64_t n = (m * 7 + k / 32) % 2 ? 37 : 9;
          const int flags = static_cast<int>((m + k / 32) % 4);
          ThreadPool& pool = (m + n) % 2 ? pool2 : pool1;
          check(v, pool, t, m, n, k, flags & 1, flags & 2, rng);
          if (HasFatalFailure()) return;
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 0);
}

TEST(QuantLinear, SingleRowAndTinyShapes) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  for (DType t : kQuantTypes) {
    const int64_t k = dtype_info(t).block_size;
    for (int64_t n : {1, 2, 3, 8, 9})
      check({"dispatch", linear_many, [] { return true; }}, pool, t, 1, n, k, true, false, rng);
  }
}

TEST(QuantEmbedding, LookupDequantizesRowsAndRejectsBadIds) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  const int64_t vocab = 19, width = 512;
  const std::vector<float> src = random_vec(vocab * width, rng);
  for (DType t : kQuantTypes) {
    const Tensor table = quantize_matrix(pool, src.data(), vocab, width, t);
    const int32_t ids[] = {0, 18, 7, 7, 3};
    std::vector<float> got(5 * width), want(static_cast<size_t>(width));
    embedding_lookup(got.data(), table, ids, 5);
    for (int i = 0; i < 5; ++i) {
      dequantize_rows(table, ids[i], ids[i] + 1, want.data());
      for (int64_t c = 0; c < width; ++c)
        ASSERT_EQ(got[static_cast<size_t>(i * width + c)], want[static_cast<size_t>(c)])
            << dtype_name(t) << " token " << i << " column " << c;
    }
    const int32_t bad[] = {2, 19};
    EXPECT_THROW(embedding_lookup(got.data(), table, bad, 2), RequestError) << dtype_name(t);
  }
}

// linear_many(): for each variant, the outputs of one call over nine weights of mixed types
// (f32, bf16, f16, three quantized; N off the 4-row blocks) with bias and accumulate equal, bit
// for bit, one call per weight, in the GEMV regime (M <= 16, one parallel region over up to 8
// weights) and the GEMM regime. The single-weight path is checked against the reference above.
TEST(LinearMany, EqualsOneCallPerWeight) {
  std::mt19937 rng(99);
  ThreadPool pool(2);
  const int64_t k = 256;
  std::vector<Tensor> ws;
  const std::pair<DType, int64_t> shapes[] = {
      {DType::kF32, 37}, {DType::kBF16, 5},  {DType::kQ8_0, 9},
      {DType::kQ4_K, 3}, {DType::kF16, 64},  {DType::kF32, 1},
      {DType::kQ4_0, 6}, {DType::kBF16, 17}, {DType::kQ8_0, 2}};  // nine: the GEMV splits 8 + 1
  for (const auto& [t, n] : shapes) {
    const std::vector<float> src = random_vec(n * k, rng);
    if (is_quantized(t)) {
      ws.push_back(quantize_matrix(pool, src.data(), n, k, t));
    } else {
      Tensor f = Tensor::zeros(Shape{n, k}, t);
      for (int64_t i = 0; i < n * k; ++i) {
        const float e = src[static_cast<size_t>(i)];
        if (t == DType::kF32) f.data<float>()[i] = e;
        if (t == DType::kBF16) f.data<uint16_t>()[i] = f32_to_bf16(e);
        if (t == DType::kF16) f.data<uint16_t>()[i] = f32_to_f16(e);
      }
      ws.push_back(std::move(f));
    }
  }
  for (const auto& v : linear_variants()) {
    if (!v.supported()) continue;
    for (int64_t m : {1, 5, 16, 17}) {
      const std::vector<float> x = random_vec(m * k, rng);
      std::vector<std::vector<float>> bias, want, got;
      std::vector<LinearOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        const int64_t n = ws[i].dim(0);
        bias.push_back(random_vec(n, rng));
        want.push_back(random_vec(m * n, rng));
        got.push_back(want.back());
      }
      for (size_t i = 0; i < ws.size(); ++i) {
        const LinearOut one{want[i].data(), &ws[i], i % 2 ? bias[i].data() : nullptr, i % 3 == 0};
        v.fn(pool, x.data(), m, {&one, 1});
        outs.push_back({got[i].data(), &ws[i], one.bias, one.accumulate});
      }
      v.fn(pool, x.data(), m, outs);
      for (size_t i = 0; i < ws.size(); ++i)
        ASSERT_EQ(got[i], want[i])
            << v.name << " m=" << m << " weight " << i << " " << dtype_name(ws[i].dtype());
    }
  }
}

// Every activation quantizer variant gives the reference's codes, scales and sums bit for bit:
// random blocks of several magnitudes, an all-zero block (scale 0) and ties (x / d = n + 0.5,
// rounded to even).
TEST(QuantizeActivations, EveryVariantEqualsTheReferenceBitForBit) {
  std::mt19937 rng(31);
  const int64_t blocks = 19;
  std::vector<float> x = random_vec(32 * blocks, rng);
  for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;
  for (int64_t i = 0; i < 32; ++i)  // amax 127: d = 1, so i - 15.5 are ties
    x[static_cast<size_t>(64 + i)] = i == 31 ? 127.0f : static_cast<float>(i) - 15.5f;
  for (int64_t i = 96; i < 32 * blocks; ++i) x[static_cast<size_t>(i)] *= i % 7 == 0 ? 1e3f : 1e-3f;
  const auto run = [&](QuantizeBlocksFn* fn, int64_t nb) {
    std::vector<int8_t> q(static_cast<size_t>(32 * nb));
    std::vector<float> d(static_cast<size_t>(nb)), s32(d.size()), s16(2 * d.size());
    fn(x.data(), nb, q.data(), d.data(), s32.data(), s16.data());
    return std::make_tuple(q, d, s32, s16);
  };
  int checked = 0;
  for (const auto& v : quantize_blocks_variants()) {
    if (!v.supported()) continue;
    for (int64_t nb : {int64_t{1}, int64_t{3}, blocks}) {
      EXPECT_EQ(run(v.fn, nb), run(quantize_blocks_ref, nb)) << v.name << " blocks " << nb;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  const auto ref = run(quantize_blocks_ref, 3);  // the ties, by hand: 0.5 -> 0, 1.5 -> 2
  EXPECT_EQ(std::get<0>(ref)[64 + 16], 0);
  EXPECT_EQ(std::get<0>(ref)[64 + 17], 2);
  EXPECT_EQ(std::get<0>(ref)[64 + 14], -2);  // -1.5 -> -2
  EXPECT_EQ(std::get<1>(ref)[1], 0.0f);
}

// A threaded quantization (prefill-sized x) equals the one-thread one; the unsigned codes, where
// asked for, are q + 128, and absent otherwise.
TEST(QuantizeActivations, ThreadedEqualsSingleThread) {
  std::mt19937 rng(37);
  ThreadPool pool(2);
  const int64_t m = 70, k = 1024;  // 71,680 elements: above the threading threshold
  const std::vector<float> x = random_vec(m * k, rng);
  const QuantizedRows one = quantize_activations(x.data(), m, k);
  EXPECT_EQ(one.qu, nullptr);
  const std::vector<int8_t> q(one.q, one.q + m * k);
  const std::vector<float> d(one.d, one.d + m * k / 32), s16(one.sum16, one.sum16 + m * k / 16);
  const QuantizedRows two = quantize_activations(x.data(), m, k, &pool, true);
  EXPECT_EQ(std::vector<int8_t>(two.q, two.q + m * k), q);
  ASSERT_NE(two.qu, nullptr);
  for (int64_t i = 0; i < m * k; ++i)
    ASSERT_EQ(static_cast<int>(two.qu[i]), q[static_cast<size_t>(i)] + 128) << "at " << i;
  EXPECT_EQ(std::vector<float>(two.d, two.d + m * k / 32), d);
  EXPECT_EQ(std::vector<float>(two.sum16, two.sum16 + m * k / 16), s16);
}

}  // namespace
}  // namespace lmstack::kernels
