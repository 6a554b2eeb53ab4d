// paged_attention and kv_write: the reference against hand-computed outputs, every variant
// against the reference over prefill, decode, chunked-prefill and mixed batches (GQA, MQA,
// MHA; head dims 32/40/64/128; block sizes 1, 7, 16; shuffled block tables; a sequence with
// no queries this step; partially filled blocks whose unused rows hold NaN, so reading past
// a context fails), and prefill of N tokens against N single-token decode steps. Sliding
// windows (AttentionBatch::window: 1, odd sizes, chunk-sized 64 +- 1, wider than the context)
// over the same batches, with the KV outside every window overwritten by NaN, so a variant
// that reads a key the window excludes fails.
// Legend: T query rows, H query heads, Hkv kv heads, D head dim.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/paged_batches.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

using test_batches::batches;
using test_batches::SeqSpec;

// A batch with its own pool: K/V of every context token written through kv_write into
// shuffled blocks of a NaN-filled pool.
struct PagedCase {
  int heads, kv_heads, head_dim, block_size;
  std::vector<float> k_pool, v_pool, q;
  std::vector<int32_t> query_start, context_len, block_table;
  PagedKv kv;
  AttentionBatch batch;
  int64_t num_queries = 0;

  PagedCase(int h, int hkv, int d, int bs, const std::vector<SeqSpec>& seqs, uint32_t seed)
      : heads(h), kv_heads(hkv), head_dim(d), block_size(bs) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1, 1);
    int max_blocks = 1, total_blocks = 3;  // spare blocks stay NaN
    for (const auto& s : seqs) {
      max_blocks = std::max(max_blocks, (s.context_len + bs - 1) / bs);
      total_blocks += (s.context_len + bs - 1) / bs;
    }
    std::vector<int32_t> order(static_cast<size_t>(total_blocks));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const size_t row = static_cast<size_t>(hkv) * d;
    k_pool.assign(static_cast<size_t>(total_blocks) * bs * row, NAN);
    v_pool = k_pool;
    kv = {k_pool.data(), v_pool.data(), total_blocks, bs, hkv, d};
    block_table.assign(seqs.size() * static_cast<size_t>(max_blocks), -1);
    query_start.push_back(0);
    size_t next_block = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<int32_t> slots;
      for (int p = 0; p < seqs[s].context_len; ++p) {
        if (p % bs == 0)
          block_table[s * max_blocks + static_cast<size_t>(p / bs)] = order[next_block++];
        slots.push_back(block_table[s * max_blocks + static_cast<size_t>(p / bs)] * bs + p % bs);
      }
      std::vector<float> k(slots.size() * row), v(slots.size() * row);
      for (auto& x : k) x = dist(rng);
      for (auto& x : v) x = dist(rng);
      kv_write(kv, k.data(), v.data(), slots.data(), static_cast<int64_t>(slots.size()));
      query_start.push_back(query_start.back() + seqs[s].q_len);
      context_len.push_back(seqs[s].context_len);
    }
    num_queries = query_start.back();
    q.resize(static_cast<size_t>(num_queries) * h * d);
    for (auto& x : q) x = dist(rng) * 2;  // larger scores make the softmax peakier
    batch = {static_cast<int>(seqs.size()),
             query_start.data(),
             context_len.data(),
             block_table.data(),
             max_blocks,
             0};
  }

  std::vector<float> run(PagedAttentionFn* fn, ThreadPool& pool) const {
    std::vector<float> out(q.size(), -7.0f);
    fn(pool, out.data(), q.data(), kv, batch, heads, 1.0f / std::sqrt(float(head_dim)));
    return out;
  }
};

TEST(PagedAttention, ReferenceHandComputed) {
  // One head, D = 2, context 2 (block size 1, blocks 1 then 0), two queries (prefill).
  std::vector<float> k = {0, 1, 1, 0}, v = {10, 20, 30, 40};  // block 0: token 1; block 1: 0
  const std::vector<int32_t> qs = {0, 2}, ctx = {2}, table = {1, 0};
  const PagedKv kv{k.data(), v.data(), 2, 1, 1, 2};
  const AttentionBatch batch{1, qs.data(), ctx.data(), table.data(), 2, 0};
  const std::vector<float> q = {5, 5, 2, 0};
  std::vector<float> out(4);
  ThreadPool pool(1);
  ref::paged_attention(pool, out.data(), q.data(), kv, batch, 1, 0.5f);
  // Query 0 sees only token 0 (stored in block 1: k (1,0), v (30,40)).
  // Query 1: scores 0.5·(2·1) = 1 for token 0 and 0 for token 1 (k (0,1), v (10,20)).
  const double w0 = std::exp(1.0) / (std::exp(1.0) + 1), w1 = 1 - w0;
  EXPECT_TRUE(
      test::all_close(out, {30, 40, float(w0 * 30 + w1 * 10), float(w0 * 40 + w1 * 20)}, 1e-6, 0));
}

void expect_variants_match(const PagedCase& c, ThreadPool& pool, const std::string& what) {
  const auto want = c.run(ref::paged_attention, pool);
  for (const auto& variant : paged_attention_variants()) {
    if (!variant.supported()) continue;
    const auto got = c.run(variant.fn, pool);
    EXPECT_TRUE(test::all_close(got, want, 1e-5, 2e-6))
        << variant.name << " " << what << " H " << c.heads << " Hkv " << c.kv_heads << " D "
        << c.head_dim << " block " << c.block_size;
  }
  EXPECT_TRUE(test::all_close(c.run(paged_attention, pool), want, 1e-5, 2e-6)) << "dispatch";
}

TEST(PagedAttention, VariantsMatchReference) {
  ThreadPool pool(3);
  uint32_t seed = 1;
  for (const auto& [name, seqs] : batches())
    for (int d : {32, 40, 64, 128})
      for (int bs : {16, 1, 7})
        for (auto [h, hkv] : {std::pair{4, 4}, {8, 2}, {4, 1}})
          expect_variants_match(PagedCase(h, hkv, d, bs, seqs, seed++), pool, name);
}

TEST(PagedAttention, HeadDimsWithPartialVectors) {
  // 20 and 36 leave a partial 8-lane (AVX2) and 16-lane (AVX-512) vector at the end of D.
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (const auto& [name, seqs] : batches())
    for (int d : {20, 36}) expect_variants_match(PagedCase(8, 2, d, 7, seqs, seed++), pool, name);
}

TEST(PagedAttention, LongDecodeAndLongPrefill) {
  ThreadPool pool(4);
  expect_variants_match(PagedCase(16, 2, 64, 16, {{1, 1500}, {1, 700}}, 7), pool, "long decode");
  expect_variants_match(PagedCase(6, 3, 48, 16, {{300, 300}}, 8), pool, "long prefill");
  // MQA decode cut into 6 context slices across 8 threads.
  ThreadPool wide(8);
  expect_variants_match(PagedCase(8, 1, 128, 16, {{1, 1500}}, 9), wide, "sliced decode");
  // Chunked prefill whose last context slice starts at 768, inside the tile's query
  // positions 748..779: rows before it get nothing from that slice.
  expect_variants_match(PagedCase(2, 2, 64, 16, {{32, 780}}, 10), pool, "sliced prefill");
}

TEST(PagedAttention, PrefillEqualsDecodeSteps) {
  // The same sequence run as one prefill of n tokens and as n steps of one token each.
  const int n = 45, heads = 8, kv_heads = 2, d = 64, bs = 7;
  ThreadPool pool(2);
  const PagedCase full(heads, kv_heads, d, bs, {{n, n}}, 21);
  const auto want = full.run(paged_attention, pool);
  const size_t row = static_cast<size_t>(heads) * d;
  for (int t = 0; t < n; ++t) {
    const std::vector<int32_t> qs = {0, 1}, ctx = {t + 1};
    const AttentionBatch step{
        1, qs.data(), ctx.data(), full.block_table.data(), full.batch.max_blocks_per_seq, 0};
    std::vector<float> out(row);
    paged_attention(pool, out.data(), full.q.data() + t * row, full.kv, step, heads,
                    1.0f / std::sqrt(float(d)));
    const std::vector<float> expect(want.begin() + t * row, want.begin() + (t + 1) * row);
    ASSERT_TRUE(test::all_close(out, expect, 1e-5, 2e-6)) << "step " << t;
  }
}

TEST(PagedAttention, ReferenceWindowHandComputed) {
  // The case above with window 1: each query sees only its own token.
  std::vector<float> k = {0, 1, 1, 0}, v = {10, 20, 30, 40};
  const std::vector<int32_t> qs = {0, 2}, ctx = {2}, table = {1, 0};
  const PagedKv kv{k.data(), v.data(), 2, 1, 1, 2};
  const AttentionBatch batch{1, qs.data(), ctx.data(), table.data(), 2, /*window=*/1};
  const std::vector<float> q = {5, 5, 2, 0};
  std::vector<float> out(4);
  ThreadPool pool(1);
  ref::paged_attention(pool, out.data(), q.data(), kv, batch, 1, 0.5f);
  EXPECT_TRUE(test::all_close(out, {30, 40, 10, 20}, 0, 0));
}

// Overwrites with NaN the K/V of every position that no query of its sequence sees under
// the case's window (the first query's window start bounds them all).
void poison_outside_window(PagedCase& c) {
  const size_t row = static_cast<size_t>(c.kv_heads) * c.head_dim;
  for (int s = 0; s < c.batch.num_seqs; ++s) {
    const int q_len = c.query_start[s + 1] - c.query_start[s];
    const int64_t first = attention_window_start(c.context_len[s] - q_len, c.batch.window);
    for (int64_t p = 0; p < first; ++p) {
      const int64_t slot =
          int64_t{c.block_table[s * c.batch.max_blocks_per_seq + p / c.block_size]} * c.block_size +
          p % c.block_size;
      std::fill_n(c.k_pool.begin() + slot * static_cast<int64_t>(row), row, NAN);
      std::fill_n(c.v_pool.begin() + slot * static_cast<int64_t>(row), row, NAN);
    }
  }
}

TEST(PagedAttention, SlidingWindowVariantsMatchReference) {
  ThreadPool pool(3);
  uint32_t seed = 300;
  for (const auto& [name, seqs] : batches())
    for (int window : {1, 5, 63, 64, 65, 129, 2000})
      for (int d : {36, 64})
        for (int bs : {16, 7}) {
          PagedCase c(8, 2, d, bs, seqs, seed++);
          c.batch.window = window;
          poison_outside_window(c);
          expect_variants_match(c, pool, name + " window " + std::to_string(window));
        }
}

TEST(PagedAttention, SlidingWindowLongDecodeAndChunkedPrefill) {
  ThreadPool wide(8);
  // Sliced decode: the window (700 of 1500 keys) is cut into slices across 8 threads.
  PagedCase decode(8, 1, 128, 16, {{1, 1500}, {1, 300}}, 31);
  decode.batch.window = 700;
  poison_outside_window(decode);
  expect_variants_match(decode, wide, "sliced decode window 700");
  // A chunk of 90 queries late in a long context, window shorter than the chunk: rows late in
  // a tile have whole key chunks before their window.
  PagedCase chunked(4, 2, 64, 16, {{90, 500}}, 32);
  chunked.batch.window = 33;
  poison_outside_window(chunked);
  expect_variants_match(chunked, wide, "chunked prefill window 33");
}

TEST(PagedAttention, WindowWiderThanTheContextIsFullAttention) {
  ThreadPool pool(2);
  PagedCase c(8, 2, 64, 7, batches()[2].second, 41);
  const auto full = c.run(paged_attention, pool);
  c.batch.window = 301;  // the longest context is 300
  EXPECT_EQ(c.run(paged_attention, pool), full);
}

TEST(KvWrite, WritesRowsAtSlots) {
  const int hkv = 2, d = 3, bs = 4;
  std::vector<float> kp(3 * bs * hkv * d, 0), vp = kp;
  const PagedKv kv{kp.data(), vp.data(), 3, bs, hkv, d};
  std::vector<float> k(2 * hkv * d), v(2 * hkv * d);
  std::iota(k.begin(), k.end(), 1.0f);
  std::iota(v.begin(), v.end(), 100.0f);
  const std::vector<int32_t> slots = {9, 2};  // block 2 row 1, block 0 row 2
  kv_write(kv, k.data(), v.data(), slots.data(), 2);
  for (int e = 0; e < hkv * d; ++e) {
    EXPECT_EQ(kp[9 * hkv * d + e], k[e]);
    EXPECT_EQ(vp[2 * hkv * d + e], v[hkv * d + e]);
  }
}

}  // namespace
}  // namespace lmstack::kernels
