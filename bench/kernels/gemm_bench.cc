// Matrix-product benchmarks against this machine's measured roofline (lmstack doctor's
// probe, run once at start-up on the same 2-thread pool). Decode: every linear layer of a
// smollm-360m- and a tinyllama-1.1b-shaped bf16 model at M = 1 (weights >> LLC, so this
// reads DRAM), reported as weight GB/s and % of the DRAM read bandwidth; one LLC-resident
// matrix against the LLC bandwidth. Prefill: M = 512 GEMMs, GFLOP/s and % of the f32 peak.
// Training: the backward products in f32 (GemmF32) and the bf16 products (GemmBf16).
// Run: build/<dir>/bench/lmstack_kernels_bench --benchmark_filter='Decode|Gemv|Prefill'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lmstack/core/half.h"
#include "lmstack/core/machine_probe.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

// 2 threads (this machine's cores) unless LMSTACK_BENCH_THREADS says otherwise; with 1
// thread the CPU-time column is the kernel's own time even on a busy machine.
ThreadPool& pool() {
  static ThreadPool p([] {
    const char* env = std::getenv("LMSTACK_BENCH_THREADS");
    return env ? std::atoi(env) : 2;
  }());
  return p;
}

const MachineReport& machine() {
  static const MachineReport r = probe_machine(pool(), ProbeOptions{});
  return r;
}

Tensor filled(int64_t n, int64_t k, DType dt) {
  Tensor w = Tensor::zeros(Shape{n, k}, dt);
  const uint16_t h = dt == DType::kBF16 ? f32_to_bf16(0.01f) : f32_to_f16(0.01f);
  if (dt == DType::kF32)
    for (int64_t i = 0; i < n * k; ++i) w.data<float>()[i] = 0.01f;
  else
    for (int64_t i = 0; i < n * k; ++i) w.data<uint16_t>()[i] = h;
  return w;
}

struct ModelShape {
  int layers;
  int64_t hidden, kv_dim, ffn, vocab;
};
// smollm-360m: 32 layers, C 960, 5 KV heads x 64, F 2560, V 49152 (tied head).
// tinyllama-1.1b: 22 layers, C 2048, 4 KV heads x 64, F 5632, V 32000.
const ModelShape kShapes[] = {{32, 960, 320, 2560, 49152}, {22, 2048, 256, 5632, 32000}};

// All linear weights of a model in forward order: q, k, v, o, gate, up, down per layer, head.
const std::vector<Tensor>& model_weights(int which) {
  static std::map<int, std::vector<Tensor>> cache;
  auto& ws = cache[which];
  if (!ws.empty()) return ws;
  const ModelShape& s = kShapes[which];
  for (int l = 0; l < s.layers; ++l) {
    ws.push_back(filled(s.hidden, s.hidden, DType::kBF16));
    ws.push_back(filled(s.kv_dim, s.hidden, DType::kBF16));
    ws.push_back(filled(s.kv_dim, s.hidden, DType::kBF16));
    ws.push_back(filled(s.hidden, s.hidden, DType::kBF16));
    ws.push_back(filled(s.ffn, s.hidden, DType::kBF16));
    ws.push_back(filled(s.ffn, s.hidden, DType::kBF16));
    ws.push_back(filled(s.hidden, s.ffn, DType::kBF16));
  }
  ws.push_back(filled(s.vocab, s.hidden, DType::kBF16));
  return ws;
}

// One decode step's matrix products (M = 1) over the whole model.
void BM_DecodeStep(benchmark::State& state) {
  const auto& ws = model_weights(static_cast<int>(state.range(0)));
  std::vector<float> x(8 * 6000, 0.5f), y(8 * 50000);
  const int64_t m = state.range(1);
  int64_t bytes = 0;
  for (const auto& w : ws) bytes += w.nbytes();
  for (auto _ : state)
    for (const auto& w : ws) linear(pool(), y.data(), x.data(), w, m);
  const double gbs = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(gbs / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["dram_GB/s"] = machine().dram_read_gbs;
  state.SetLabel(state.range(0) == 0 ? "smollm-360m bf16" : "tinyllama-1.1b bf16");
}
BENCHMARK(BM_DecodeStep)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 4})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// One matrix, small enough to stay in the LLC across iterations: the cache roofline.
void BM_Gemv(benchmark::State& state) {
  const DType dt = static_cast<DType>(state.range(2));
  const Tensor w = filled(state.range(0), state.range(1), dt);
  std::vector<float> x(static_cast<size_t>(state.range(1)), 0.5f),
      y(static_cast<size_t>(state.range(0)));
  for (auto _ : state) linear(pool(), y.data(), x.data(), w, 1);
  const double bytes = static_cast<double>(w.nbytes()) * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["llc_GB/s"] = machine().llc_read_gbs;
  state.SetLabel(std::string(dtype_name(dt)));
}
BENCHMARK(BM_Gemv)
    ->Args({5632, 2048, static_cast<int>(DType::kBF16)})
    ->Args({2560, 960, static_cast<int>(DType::kBF16)})
    ->Args({5632, 2048, static_cast<int>(DType::kF32)})
    ->UseRealTime();

// Prefill: y[512, N] = x[512, K] · W[N, K]ᵀ with bf16 weights, per variant (the last
// argument indexes linear_variants(): 0 avx512_vnni, 1 avx512, 2 avx2).
void BM_Prefill(benchmark::State& state) {
  const int64_t m = 512, n = state.range(0), k = state.range(1);
  const auto& v = linear_variants()[static_cast<size_t>(state.range(2))];
  if (!v.supported()) {
    state.SkipWithError("variant not supported here");
    return;
  }
  const Tensor w = filled(n, k, DType::kBF16);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  const LinearOut out{y.data(), &w};
  for (auto _ : state) v.fn(pool(), x.data(), m, {&out, 1});
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = machine().peak_f32_gflops();
  state.SetLabel(v.name);
}
BENCHMARK(BM_Prefill)
    ->Args({1536, 576, 0})
    ->Args({2560, 960, 0})
    ->Args({960, 2560, 0})
    ->Args({5632, 2048, 0})
    ->Args({2048, 5632, 0})
    ->Args({256, 2048, 0})
    ->Args({5632, 2048, 1})
    ->Args({1536, 576, 2})
    ->Args({5632, 2048, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Between decode and prefill (batched decode, small prefill chunks): where GEMV hands over
// to the blocked GEMM (linear.cc's kGemvMaxRows). Args: M, N, K (TinyLlama's MLP up, and
// smollm-135m's, whose K = 576 makes the per-output reductions weigh).
void BM_MidM(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const Tensor w = filled(n, k, DType::kBF16);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  for (auto _ : state) linear(pool(), y.data(), x.data(), w, m);
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MidM)
    ->ArgsProduct({{4, 8, 12, 16, 24, 32, 64}, {5632}, {2048}})
    ->ArgsProduct({{1, 4, 16}, {1536}, {576}})
    ->UseRealTime();

// Training's backward products in f32: dX = dY · W (no transpose), dW = dYᵀ · X (trans_a).
void BM_GemmF32(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool trans_a = state.range(3) != 0;
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f),
      c(static_cast<size_t>(m * n));
  for (auto _ : state)
    gemm_f32(pool(), trans_a, false, m, n, k, 1.0f, a.data(), trans_a ? m : k, b.data(), n, 0.0f,
             c.data(), n);
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = machine().peak_f32_gflops();
}
BENCHMARK(BM_GemmF32)
    ->Args({512, 2048, 5632, 0})
    ->Args({2048, 5632, 512, 1})
    ->Args({4096, 256, 768, 0})  // the default model's bf16 training shapes, as below
    ->Args({768, 256, 4096, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Training's products in bf16 (gemm_bf16, vdpbf16ps where the CPU has it), the default
// model's MLP at batch 16 x seq 256 and its lm_head: mode 0 forward y = x · Wᵀ (bf16 W [N, K]),
// mode 1 dX = dY · W (bf16 W [K, N]), mode 2 dW = dYᵀ · X (trans_a, f32 X).
void BM_GemmBf16(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2), mode = state.range(3);
  std::vector<float> a(static_cast<size_t>(m * k), 0.5f), b(static_cast<size_t>(k * n), 0.25f),
      c(static_cast<size_t>(m * n));
  const std::vector<uint16_t> b16(b.size(), f32_to_bf16(0.25f));
  const void* bp = mode == 2 ? static_cast<const void*>(b.data()) : b16.data();
  const DType bt = mode == 2 ? DType::kF32 : DType::kBF16;
  for (auto _ : state)
    gemm_bf16(pool(), mode == 2, mode == 0, m, n, k, 1.0f, a.data(), mode == 2 ? m : k, bp, bt,
              mode == 0 ? k : n, 0.0f, c.data(), n);
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_GemmBf16)
    ->Args({4096, 768, 256, 0})
    ->Args({4096, 256, 768, 1})
    ->Args({768, 256, 4096, 2})
    ->Args({512, 8192, 256, 0})  // the tied lm_head over one 512-row classifier chunk
    ->Args({512, 256, 8192, 1})
    ->Args({8192, 256, 512, 2})
    ->Args({512, 2048, 5632, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lmstack::kernels
