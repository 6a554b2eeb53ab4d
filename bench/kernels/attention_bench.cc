// Paged attention benchmarks for each supported variant, Llama-3-8B head shapes (H 32, Hkv 8,
// D 128, KV blocks of 16 tokens, shuffled block tables). Prefill: one causal sequence of T
// tokens, reported as GFLOP/s (QKᵀ and PV: 4·H·D·T(T+1)/2 FLOPs) and % of the f32 peak
// measured by lmstack doctor's probe. Decode: S sequences of one query over C tokens of
// context, reported as GB/s of K and V read (2·S·C·Hkv·D·4 bytes for f32; bf16 and int8
// pools, AttentionDecode/<variant>/<dtype>, read 2·S·C·Hkv·kv_row_bytes) and % of DRAM read
// bandwidth. AttentionDecodeSmall: one sequence of a small model's decode (smollm-135m: H 9,
// Hkv 3, D 64, bf16 pool) over C tokens, in microseconds per call: here per-call fixed costs
// (planning, waking the pool, 3 kv heads on the threads) weigh more than the bytes.
// Threads: LMSTACK_THREADS, else the physical cores.
// Run: build/<dir>/bench/lmstack_kernels_bench --benchmark_filter=Attention
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "lmstack/core/machine_probe.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {
namespace {

constexpr int kBlock = 16;

struct HeadShape {
  int heads, kv_heads, head_dim;
};
constexpr HeadShape kLlama3{32, 8, 128}, kSmolLm135m{9, 3, 64};

ThreadPool& bench_pool() {
  static ThreadPool p(std::getenv("LMSTACK_THREADS") ? std::atoi(std::getenv("LMSTACK_THREADS"))
                                                     : 0);
  return p;
}

const MachineReport& bench_machine() {
  static const MachineReport r = probe_machine(bench_pool(), ProbeOptions{});
  return r;
}

// Sequences of the given (queries, context) with their KV in a shuffled paged pool.
struct Batch {
  std::vector<char> k, v;  // pools of `dtype`
  std::vector<float> k_scale, v_scale, q, out;
  std::vector<int32_t> query_start{0}, context_len, block_table;
  PagedKv kv;
  AttentionBatch batch;

  HeadShape shape;

  Batch(int num_seqs, int q_len, int context, DType dtype = DType::kF32, HeadShape hs = kLlama3)
      : shape(hs) {
    const int kKvHeads = hs.kv_heads, kHeadDim = hs.head_dim, kHeads = hs.heads;
    const int blocks_per_seq = (context + kBlock - 1) / kBlock;
    const int64_t num_blocks = int64_t{num_seqs} * blocks_per_seq;
    const int64_t slots = num_blocks * kBlock;
    const size_t rows = static_cast<size_t>(slots) * kKvHeads;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    const size_t value_bytes = dtype == DType::kF32 ? 4 : dtype == DType::kBF16 ? 2 : 1;
    k.resize(rows * kHeadDim * value_bytes);
    v.resize(k.size());
    k_scale.resize(rows);
    v_scale.resize(rows);
    kv = {k.data(), v.data(), num_blocks,     kBlock,        kKvHeads,
          kHeadDim, dtype,    k_scale.data(), v_scale.data()};
    // Every slot written through kv_write, so bf16/int8 pools hold real rounded rows.
    std::vector<float> kf(rows * kHeadDim), vf(kf.size());
    for (size_t i = 0; i < kf.size(); ++i) kf[i] = dist(rng), vf[i] = dist(rng);
    std::vector<int32_t> all(static_cast<size_t>(slots));
    std::iota(all.begin(), all.end(), 0);
    kv_write(kv, kf.data(), vf.data(), all.data(), slots);
    block_table.resize(static_cast<size_t>(num_blocks));
    std::iota(block_table.begin(), block_table.end(), 0);
    std::shuffle(block_table.begin(), block_table.end(), rng);
    for (int s = 0; s < num_seqs; ++s) {
      query_start.push_back(query_start.back() + q_len);
      context_len.push_back(context);
    }
    q.resize(static_cast<size_t>(query_start.back()) * kHeads * kHeadDim);
    for (auto& x : q) x = dist(rng);
    out.resize(q.size());
    batch = {num_seqs,           query_start.data(), context_len.data(),
             block_table.data(), blocks_per_seq,     0};
  }
  void run(PagedAttentionFn* fn) {
    fn(bench_pool(), out.data(), q.data(), kv, batch, shape.heads,
       1.0f / std::sqrt(float(shape.head_dim)));
  }
};

void bm_prefill(benchmark::State& state, PagedAttentionFn* fn) {
  const auto t = static_cast<int>(state.range(0));
  Batch b(1, t, t);
  for (auto _ : state) b.run(fn);
  const double flops = 4.0 * kLlama3.heads * kLlama3.head_dim * (double(t) * (t + 1) / 2);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = bench_machine().peak_f32_gflops();
  state.counters["threads"] = bench_pool().num_threads();
}

void bm_decode(benchmark::State& state, PagedAttentionFn* fn, DType dtype, HeadShape hs) {
  const auto seqs = static_cast<int>(state.range(0)), context = static_cast<int>(state.range(1));
  Batch b(seqs, 1, context, dtype, hs);
  for (auto _ : state) b.run(fn);
  const double bytes =
      2.0 * seqs * context * hs.kv_heads * double(kv_row_bytes(dtype, hs.head_dim));
  state.counters["KV_GB/s"] =
      benchmark::Counter(bytes * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["dram_GB/s"] = bench_machine().dram_read_gbs;
  state.counters["threads"] = bench_pool().num_threads();
}

// One benchmark per optimized variant (the scalar reference would take seconds per call).
// With one thread the rates use CPU time (robust on a shared machine); with more, wall time.
const bool kRegistered = [] {
  const bool wall = bench_pool().num_threads() > 1;
  for (const auto& v : paged_attention_variants()) {
    if (!v.supported() || std::string(v.name) == "ref") continue;
    auto* prefill = benchmark::RegisterBenchmark(
        ("AttentionPrefill/" + std::string(v.name)).c_str(), bm_prefill, v.fn);
    prefill->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond);
    if (wall) prefill->UseRealTime();
    for (DType t : {DType::kF32, DType::kBF16, DType::kI8}) {
      const std::string suffix = t == DType::kF32 ? "" : "/" + std::string(dtype_name(t));
      auto* decode = benchmark::RegisterBenchmark(
          ("AttentionDecode/" + std::string(v.name) + suffix).c_str(), bm_decode, v.fn, t, kLlama3);
      decode->Args({1, 4096})->Args({8, 1024})->Args({16, 4096})->Unit(benchmark::kMicrosecond);
      if (wall) decode->UseRealTime();
    }
    for (DType t : {DType::kF32, DType::kBF16}) {
      auto* small = benchmark::RegisterBenchmark(
          ("AttentionDecodeSmall/" + std::string(v.name) + "/" + std::string(dtype_name(t)))
              .c_str(),
          bm_decode, v.fn, t, kSmolLm135m);
      small->Args({1, 64})->Args({1, 128})->Args({1, 256})->Unit(benchmark::kMicrosecond);
      if (wall) small->UseRealTime();
    }
  }
  return true;
}();

}  // namespace
}  // namespace lmstack::kernels
