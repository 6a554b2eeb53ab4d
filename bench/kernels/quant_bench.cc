// Block-quantized linear layers against this machine's measured roofline (lmstack doctor's
// probe, on the same 2-thread pool). Decode: every linear weight of a smollm-360m- or
// tinyllama-1.1b-shaped model quantized to one type (q8_0, q4_0, q4_K, q6_K, int4_g*), M = 1
// (the weights exceed the LLC, so this streams DRAM), reported as weight GB/s and % of the
// DRAM read bandwidth; bf16 for comparison. Prefill: M = 512 (and 128) GEMMs on the tinyllama
// MLP shape, GFLOP/s against the f32 FMA peak (the packing dequantizes).
// Run: build/<dir>/bench/lmstack_kernels_bench --benchmark_filter='Quant'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lmstack/core/half.h"
#include "lmstack/core/machine_probe.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/kernels/quant_repack.h"

namespace lmstack::kernels {
namespace {

ThreadPool& qpool() {
  static ThreadPool p([] {
    const char* env = std::getenv("LMSTACK_BENCH_THREADS");
    return env ? std::atoi(env) : 2;
  }());
  return p;
}

double dram_gbs() {
  static const double gbs = probe_machine(qpool(), ProbeOptions{}).dram_read_gbs;
  return gbs;
}

// A [n, k] weight of dtype t from normal random values (bf16 and quant types; q4_0x16 and
// q4_Kx16 are q4_0 / q4_K repacked as model/repack.h does at load).
Tensor random_weight(int64_t n, int64_t k, DType t) {
  if (is_row_interleaved(t)) {
    const Tensor plain = random_weight(n, k, row_interleaved_base(t));
    return repack_x16(plain, Tensor::zeros(Shape{plain.nbytes()}, DType::kI8));
  }
  std::mt19937 rng(static_cast<uint32_t>(n * 31 + k));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = normal(rng);
  return quantize_matrix(qpool(), w.data(), n, k, t);
}

// n_copies independent tensors with the bytes of `proto`.
void append_copies(std::vector<Tensor>& out, const Tensor& proto, int n_copies) {
  for (int i = 0; i < n_copies; ++i) {
    Tensor t = Tensor::zeros(proto.shape(), proto.dtype(), MemoryCategory::kWeights);
    std::memcpy(t.raw_data(), proto.raw_data(), static_cast<size_t>(proto.nbytes()));
    out.push_back(std::move(t));
  }
}

struct ModelShape {
  const char* name;
  int layers;
  int64_t hidden, kv_dim, ffn, vocab;
};
const ModelShape kShapes[] = {{"smollm-360m", 32, 960, 320, 2560, 49152},
                              {"tinyllama-1.1b", 22, 2048, 256, 5632, 32000}};

// The model's linear weights (per layer q, k, v, o, gate, up, down; then the head), built
// for one (shape, type) at a time so only one model's worth of memory is held.
const std::vector<Tensor>& model_weights(int which, DType t) {
  static std::vector<Tensor> ws;
  static int cached_which = -1;
  static DType cached_type = DType::kF32;
  if (cached_which == which && cached_type == t) return ws;
  ws.clear();
  const ModelShape& s = kShapes[which];
  const Tensor sq = random_weight(s.hidden, s.hidden, t), kv = random_weight(s.kv_dim, s.hidden, t);
  const Tensor up = random_weight(s.ffn, s.hidden, t), down = random_weight(s.hidden, s.ffn, t);
  for (int l = 0; l < s.layers; ++l) {
    for (const Tensor* p : {&sq, &kv, &kv, &sq, &up, &up, &down}) append_copies(ws, *p, 1);
  }
  append_copies(ws, random_weight(s.vocab, s.hidden, t), 1);
  cached_which = which;
  cached_type = t;
  return ws;
}

// One decode step's matrix products (M rows) over the whole model.
void BM_QuantDecodeStep(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const DType t = static_cast<DType>(state.range(1));
  const int64_t m = state.range(2);
  const auto& ws = model_weights(which, t);
  std::vector<float> x(static_cast<size_t>(m * 6144), 0.5f), y(static_cast<size_t>(m * 50000));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  int64_t bytes = 0;
  for (const auto& w : ws) bytes += w.nbytes();
  for (auto _ : state)
    for (const auto& w : ws) linear(qpool(), y.data(), x.data(), w, m);
  const double total = static_cast<double>(bytes) * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["dram_GB/s"] = dram_gbs();
  state.SetLabel(std::string(kShapes[which].name) + " " + std::string(dtype_name(t)));
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  for (int which : {0, 1})
    for (DType t :
         {DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_0x16, DType::kQ4_K, DType::kQ4_Kx16,
          DType::kQ6_K, DType::kQ6_Kx16, DType::kInt4G32, DType::kInt4G128})
      b->Args({which, static_cast<int>(t), 1});
  b->Args({1, static_cast<int>(DType::kQ4_0), 4});
  b->Args({1, static_cast<int>(DType::kQ4_0x16), 4});
}
BENCHMARK(BM_QuantDecodeStep)->Apply(DecodeArgs)->UseRealTime()->Unit(benchmark::kMillisecond);

// Kernel speed with the memory system out of the way: one L2-resident [64, 2048] matrix on
// one thread, bytes per CPU-second (meaningful on a busy machine). A kernel that reaches well
// above the per-core DRAM share here is not what bounds decode.
void BM_QuantGemvL2(benchmark::State& state) {
  static ThreadPool one(1);
  const DType t = static_cast<DType>(state.range(0));
  const int64_t m = state.range(1), n = 64, k = 2048;
  const Tensor w = random_weight(n, k, t);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  for (auto _ : state) linear(one, y.data(), x.data(), w, m);
  const double bytes = static_cast<double>(w.nbytes()) * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(t)));
}
void GemvArgs(benchmark::internal::Benchmark* b) {
  for (DType t :
       {DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_0x16, DType::kQ4_K, DType::kQ4_Kx16,
        DType::kQ6_K, DType::kQ6_Kx16, DType::kInt4G32, DType::kInt4G128})
    b->Args({static_cast<int>(t), 1});
  b->Args({static_cast<int>(DType::kQ4_0), 4});
  b->Args({static_cast<int>(DType::kQ4_0x16), 4});
  b->Args({static_cast<int>(DType::kQ8_0), 4});
}
BENCHMARK(BM_QuantGemvL2)->Apply(GemvArgs);

// Prefill: y[M, 5632] = x[M, 2048] · W[5632, 2048]ᵀ, GFLOP/s.
void BM_QuantPrefill(benchmark::State& state) {
  const DType t = static_cast<DType>(state.range(0));
  const int64_t m = state.range(1), n = 5632, k = 2048;
  const Tensor w = random_weight(n, k, t);
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), y(static_cast<size_t>(m * n));
  for (auto _ : state) linear(qpool(), y.data(), x.data(), w, m);
  const double flops = 2.0 * m * n * k * static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(t)));
}
void PrefillArgs(benchmark::internal::Benchmark* b) {
  // The x16 layouts are what a loaded Q4_0 / Q4_K (/ Q6_K with AVX-512) model multiplies.
  for (DType t : {DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K,
                  DType::kInt4G128, DType::kQ4_0x16, DType::kQ4_Kx16, DType::kQ6_Kx16})
    for (int64_t m : {128, 512}) b->Args({static_cast<int>(t), m});
}
BENCHMARK(BM_QuantPrefill)->Apply(PrefillArgs)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lmstack::kernels
