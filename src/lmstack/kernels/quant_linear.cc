// Activation quantization for the quantized GEMV and the int8 GEMM (quant_gemv.h,
// gemm_int8.h): one f32 scale per 32 elements, d = amax / 127 and q = round(x / d) (the Q8_0
// rule, so an activation element is off by at most d / 2). linear.cc quantizes x once per call
// (O(m k), against O(n k) weight bytes); in prefill that is m * k elements per layer input, so
// it is vectorized and, for a large x, threaded.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/kernels/ops_variants.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {
namespace {

struct ActivationBuffers {
  std::vector<int8_t> q;
  std::vector<uint8_t> qu;
  std::vector<float> d, sum32, sum16;
};

void quantize_block(const float* x, int8_t* q, float* d, float* sum32, float* sum16) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  int s0 = 0, s1 = 0;
  for (int i = 0; i < 32; ++i) {
    const int v = static_cast<int>(std::nearbyint(x[i] * inv));
    q[i] = static_cast<int8_t>(v);
    (i < 16 ? s0 : s1) += v;
  }
  *d = scale;
  *sum32 = scale * static_cast<float>(s0 + s1);
  sum16[0] = scale * static_cast<float>(s0);
  sum16[1] = scale * static_cast<float>(s1);
}

constexpr KernelVariant<QuantizeBlocksFn> kQuantizeBlocksVariants[] = {
    {"avx2", quantize_blocks_avx2, avx2_supported},
    {"ref", quantize_blocks_ref, always_supported},
};

// Below this many elements one thread quantizes x (a decode step's k: a microsecond or less).
constexpr int64_t kThreadedQuantizeElements = 1 << 16;

}  // namespace

void quantize_blocks_ref(const float* x, int64_t blocks, int8_t* q, float* d, float* sum32,
                         float* sum16) {
  for (int64_t b = 0; b < blocks; ++b)
    quantize_block(x + 32 * b, q + 32 * b, d + b, sum32 + b, sum16 + 2 * b);
}

std::span<const KernelVariant<QuantizeBlocksFn>> quantize_blocks_variants() {
  return kQuantizeBlocksVariants;
}

QuantizedRows quantize_activations(const float* x, int64_t m, int64_t k, ThreadPool* pool,
                                   bool unsigned_codes) {
  LMSTACK_CHECK(k % 32 == 0, "quantize_activations: k {} is not a multiple of 32", k);
  static QuantizeBlocksFn* const quantize = pick_variant(quantize_blocks_variants());
  thread_local ActivationBuffers buf;
  const int64_t nb = k / 32;
  buf.q.resize(static_cast<size_t>(m * k));
  buf.qu.resize(unsigned_codes ? static_cast<size_t>(m * k) : 0);
  buf.d.resize(static_cast<size_t>(m * nb));
  buf.sum32.resize(static_cast<size_t>(m * nb));
  buf.sum16.resize(static_cast<size_t>(2 * m * nb));
  // Rows are contiguous blocks, so any block range is one call. (The pointers are taken here:
  // `buf` named inside the lambda would be the running thread's own thread_local.)
  int8_t* q = buf.q.data();
  uint8_t* qu = unsigned_codes ? buf.qu.data() : nullptr;
  float *d = buf.d.data(), *sum32 = buf.sum32.data(), *sum16 = buf.sum16.data();
  const auto run = [=](int64_t b0, int64_t b1) {
    quantize(x + 32 * b0, b1 - b0, q + 32 * b0, d + b0, sum32 + b0, sum16 + 2 * b0);
    if (qu)
      for (int64_t i = 32 * b0; i < 32 * b1; ++i) qu[i] = static_cast<uint8_t>(q[i] ^ 0x80);
  };
  if (pool && pool->num_threads() > 1 && m * k >= kThreadedQuantizeElements)
    pool->parallel_for(m * nb, run, 64);
  else
    run(0, m * nb);
  return {q, d, sum32, sum16, k, qu};
}

}  // namespace lmstack::kernels
