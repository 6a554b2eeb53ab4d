// KV-cache dtypes (PagedKv::dtype, bf16 and int8): kv_write's rounding and scales against
// hand-computed values, every paged_attention variant against the reference over bf16 and
// int8 pools (GQA, MQA, MHA; head dims 8/20/36/40/64/128 incl. partial vectors, block sizes
// 1/7/16, prefill, decode, mixed and long sliced decodes; unused rows poisoned so reading
// past a context fails), and attention over a quantized pool against the f32 pool within the
// bound the quantization error implies (derivation at quantized_attention_bound).
// Legend: T query rows, H query heads, Hkv kv heads, D head dim.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/paged_batches.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

using test_batches::batches;
using test_batches::SeqSpec;

// One batch stored in a pool of `dtype` through kv_write: the K/V values (f32, kept for the
// comparison with an f32 pool), shuffled blocks, and rows nobody wrote poisoned (NaN for
// f32/bf16, a NaN scale for int8).
struct DtypeCase {
  int heads, kv_heads, head_dim, block_size;
  DType dtype;
  std::vector<char> k_pool, v_pool;
  std::vector<float> k_scale, v_scale, q, k_all, v_all;  // k_all/v_all: [context rows, Hkv, D]
  std::vector<int32_t> query_start, context_len, block_table, slots;
  PagedKv kv;
  AttentionBatch batch;

  DtypeCase(int h, int hkv, int d, int bs, DType t, const std::vector<SeqSpec>& seqs, uint32_t seed)
      : heads(h), kv_heads(hkv), head_dim(d), block_size(bs), dtype(t) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    int max_blocks = 1, total_blocks = 3;  // spare blocks stay poisoned
    for (const auto& s : seqs) {
      max_blocks = std::max(max_blocks, (s.context_len + bs - 1) / bs);
      total_blocks += (s.context_len + bs - 1) / bs;
    }
    std::vector<int32_t> order(static_cast<size_t>(total_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t rows = static_cast<size_t>(total_blocks) * bs * hkv;
    k_pool.assign(rows * static_cast<size_t>(dtype_bytes(t, d)), 0);
    poison(k_pool);
    v_pool = k_pool;
    k_scale.assign(rows, NAN);
    v_scale = k_scale;
    kv = {k_pool.data(),  v_pool.data(), total_blocks, bs, hkv, d, t,
          k_scale.data(), v_scale.data()};
    block_table.assign(seqs.size() * static_cast<size_t>(max_blocks), -1);
    query_start.push_back(0);
    size_t next_block = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int p = 0; p < seqs[s].context_len; ++p) {
        if (p % bs == 0)
          block_table[s * max_blocks + static_cast<size_t>(p / bs)] = order[next_block++];
        slots.push_back(block_table[s * max_blocks + static_cast<size_t>(p / bs)] * bs + p % bs);
      }
      query_start.push_back(query_start.back() + seqs[s].q_len);
      context_len.push_back(seqs[s].context_len);
    }
    k_all.resize(slots.size() * hkv * d);
    v_all.resize(k_all.size());
    for (auto& x : k_all) x = dist(rng);
    for (auto& x : v_all) x = dist(rng);
    kv_write(kv, k_all.data(), v_all.data(), slots.data(), static_cast<int64_t>(slots.size()));
    q.resize(static_cast<size_t>(query_start.back()) * h * d);
    for (auto& x : q) x = dist(rng) * 2;  // larger scores make the softmax peakier
    batch = {static_cast<int>(seqs.size()),
             query_start.data(),
             context_len.data(),
             block_table.data(),
             max_blocks,
             0};
  }

  void poison(std::vector<char>& pool) const {
    if (dtype == DType::kF32) {
      const float nan = NAN;
      for (size_t i = 0; i < pool.size(); i += 4) std::memcpy(&pool[i], &nan, 4);
    } else if (dtype == DType::kBF16) {
      const uint16_t nan = 0x7fc0;
      for (size_t i = 0; i < pool.size(); i += 2) std::memcpy(&pool[i], &nan, 2);
    }  // int8: the NaN scale poisons the row
  }

  std::vector<float> run(PagedAttentionFn* fn, ThreadPool& pool) const {
    std::vector<float> out(q.size(), -7.0f);
    fn(pool, out.data(), q.data(), kv, batch, heads, scale());
    return out;
  }
  float scale() const { return 1.0f / std::sqrt(float(head_dim)); }
};

TEST(KvWrite, Bf16RoundsToNearestEven) {
  const std::vector<float> k = {1.0f, 1.00390625f /* 1 + 2^-8: a tie, to even 1 */,
                                1.01171875f /* 1 + 3·2^-8: a tie, to even 1 + 2^-6 */, -3.3f};
  const std::vector<float> v = {0.0f, -0.0f, 65504.0f, 1e-20f};
  std::vector<uint16_t> kp(4), vp(4);
  const PagedKv kv{kp.data(), vp.data(), 1, 1, 1, 4, DType::kBF16, nullptr, nullptr};
  const int32_t slot = 0;
  kv_write(kv, k.data(), v.data(), &slot, 1);
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(kp[e], f32_to_bf16(k[e])) << e;
    EXPECT_EQ(vp[e], f32_to_bf16(v[e])) << e;
  }
  EXPECT_EQ(bf16_to_f32(kp[1]), 1.0f);
  EXPECT_EQ(bf16_to_f32(kp[2]), 1.015625f);
  std::vector<float> row(4);
  kv_read_row(row.data(), kv, false, 0, 0);
  EXPECT_EQ(row[2], 1.015625f);
}

TEST(KvWrite, Int8ScalesPerTokenPerHead) {
  // Two kv heads of D = 3; token 1 of head 1 is all zeros (scale 0).
  const std::vector<float> k = {0.5f, -1.27f, 0.01f, 2.54f, 1.0f, -2.0f,
                                3.0f, 0.0f,   -1.5f, 0.0f,  0.0f, 0.0f};
  std::vector<int8_t> kp(12, 99), vp(12, 99);
  std::vector<float> ks(4, -1), vs(4, -1);
  const PagedKv kv{kp.data(), vp.data(), 1, 2, 2, 3, DType::kI8, ks.data(), vs.data()};
  const std::vector<int32_t> slots = {1, 0};
  kv_write(kv, k.data(), k.data(), slots.data(), 2);
  // slot 1 holds token 0: head 0 absmax 1.27 -> scale 0.01, q = (50, -127, 1).
  EXPECT_FLOAT_EQ(ks[2], 1.27f / 127);
  EXPECT_EQ(kp[6], 50);
  EXPECT_EQ(kp[7], -127);
  EXPECT_EQ(kp[8], 1);
  EXPECT_FLOAT_EQ(ks[3], 2.54f / 127);  // head 1: q = (127, 50, -100)
  EXPECT_EQ(kp[9], 127);
  EXPECT_EQ(kp[10], 50);
  EXPECT_EQ(kp[11], -100);
  EXPECT_EQ(ks[1], 0.0f);  // slot 0 head 1: zeros
  EXPECT_EQ(kp[3], 0);
  EXPECT_EQ(vs, ks);
  std::vector<float> row(3);
  kv_read_row(row.data(), kv, true, 0, 0);  // token 1, head 0: absmax 3
  for (int e = 0; e < 3; ++e) EXPECT_NEAR(row[e], k[6 + e], 3.0f / 254 + 1e-6f) << e;
}

void expect_variants_match(const DtypeCase& c, ThreadPool& pool, const std::string& what) {
  const auto want = c.run(ref::paged_attention, pool);
  for (const auto& variant : paged_attention_variants()) {
    if (!variant.supported()) continue;
    // The variants dequantize to the reference's exact floats, so f32 tolerances hold.
    EXPECT_TRUE(test::all_close(c.run(variant.fn, pool), want, 1e-5, 2e-6))
        << variant.name << " " << what << " " << dtype_name(c.dtype) << " H " << c.heads << " Hkv "
        << c.kv_heads << " D " << c.head_dim << " block " << c.block_size;
  }
}

TEST(PagedAttentionKvDtype, VariantsMatchReference) {
  ThreadPool pool(3);
  uint32_t seed = 1;
  for (DType t : {DType::kBF16, DType::kI8})
    for (const auto& [name, seqs] : batches())
      for (int d : {8, 20, 36, 64, 128})
        for (int bs : {16, 1, 7})
          for (auto [h, hkv] : {std::pair{4, 4}, {8, 2}, {3, 1}})
            expect_variants_match(DtypeCase(h, hkv, d, bs, t, seqs, seed++), pool, name);
}

TEST(PagedAttentionKvDtype, LongSlicedDecodeAndWindow) {
  ThreadPool wide(8);
  for (DType t : {DType::kBF16, DType::kI8}) {
    expect_variants_match(DtypeCase(8, 1, 128, 16, t, {{1, 1500}}, 9), wide, "sliced decode");
    expect_variants_match(DtypeCase(9, 3, 40, 16, t, {{1, 4100}, {1, 333}}, 10), wide, "4k decode");
    DtypeCase w(8, 2, 36, 7, t, batches()[2].second, 11);
    w.batch.window = 65;
    expect_variants_match(w, wide, "window 65");
  }
}

// Attention over a pool whose K and V differ from the exact ones by ΔK, ΔV. Every score moves
// by at most ε = scale · max_j Σ_e |q_e|·|ΔK_je|, so each softmax weight changes by a factor
// within [e^-2ε, e^2ε] and Σ_j |p'_j - p_j| <= e^2ε - 1. Then
//   |o' - o| = |Σ p'_j (v'_j - v_j) + Σ (p'_j - p_j) v_j| <= max|ΔV| + (e^2ε - 1)·max|V|.
// The quantization bounds give ΔK, ΔV: bf16 |Δx| <= 2^-9 |x| (round to nearest, 8 significant
// bits), int8 |Δx| <= absmax(row) / 254 (half a step of absmax / 127). Plus 1e-5 for the f32
// arithmetic of the kernels.
double quantized_attention_bound(const DtypeCase& c, int64_t q_row, int h) {
  const int d = c.head_dim, hkv = h / (c.heads / c.kv_heads);
  auto err = [&](const std::vector<float>& x, int64_t row, int e) {
    const float* r = &x[static_cast<size_t>((row * c.kv_heads + hkv) * d)];
    if (c.dtype == DType::kBF16) return std::ldexp(std::fabs(double(r[e])), -9);
    double absmax = 0;
    for (int i = 0; i < d; ++i) absmax = std::max(absmax, std::fabs(double(r[i])));
    return absmax / 254;
  };
  const float* q = &c.q[static_cast<size_t>((q_row * c.heads + h) * d)];
  double eps = 0, dv = 0, vmax = 0;
  for (int64_t j = 0; j < std::ssize(c.slots); ++j) {
    double s = 0;
    for (int e = 0; e < d; ++e) {
      s += std::fabs(double(q[e])) * err(c.k_all, j, e);
      dv = std::max(dv, err(c.v_all, j, e));
      vmax = std::max(
          vmax, std::fabs(double(c.v_all[static_cast<size_t>((j * c.kv_heads + hkv) * d + e)])));
    }
    eps = std::max(eps, s * c.scale());
  }
  return dv + std::expm1(2 * eps) * vmax + 1e-5;
}

TEST(PagedAttentionKvDtype, QuantizedWithinTheErrorBoundOfF32) {
  ThreadPool pool(2);
  // One sequence, so the bound's max over j covers exactly the keys each query can see.
  for (DType t : {DType::kBF16, DType::kI8})
    for (const SeqSpec& seq : {SeqSpec{1, 700}, SeqSpec{40, 40}}) {
      const DtypeCase exact(8, 2, 64, 16, DType::kF32, {seq}, 31);
      const DtypeCase quant(8, 2, 64, 16, t, {seq}, 31);
      ASSERT_EQ(exact.k_all, quant.k_all);  // same seed, same values
      const auto want = exact.run(paged_attention, pool), got = quant.run(paged_attention, pool);
      double worst_ratio = 0;
      for (int64_t r = 0; r < seq.q_len; ++r)
        for (int h = 0; h < 8; ++h) {
          const double bound = quantized_attention_bound(quant, r, h);
          for (int e = 0; e < 64; ++e) {
            const size_t i = static_cast<size_t>((r * 8 + h) * 64 + e);
            const double diff = std::fabs(double(got[i]) - want[i]);
            ASSERT_LE(diff, bound) << dtype_name(t) << " row " << r << " head " << h << " e " << e;
            worst_ratio = std::max(worst_ratio, diff / bound);
          }
        }
      // The quantized pool must actually differ (else the test proves nothing).
      EXPECT_NE(got, want) << dtype_name(t);
      std::printf("%s q_len %d: worst |diff| / bound = %.3f\n", std::string(dtype_name(t)).c_str(),
                  seq.q_len, worst_ratio);
    }
}

}  // namespace
}  // namespace lmstack::kernels
