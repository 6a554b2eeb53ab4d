// Activation quantization for the quantized GEMV (quant_gemv.h): one f32 scale per 32
// elements, d = amax / 127 and q = round(x / d) (the Q8_0 rule, so an activation element is
// off by at most d / 2). linear.cc quantizes x once per call (O(m k), against O(n k) weight
// bytes) and splits the weight rows into contiguous ranges per thread.
#include <algorithm>
#include <cmath>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/quant_gemv.h"

namespace lmstack::kernels {
namespace {

struct ActivationBuffers {
  std::vector<int8_t> q;
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

}  // namespace

QuantizedRows quantize_activations(const float* x, int64_t m, int64_t k) {
  LMSTACK_CHECK(k % 32 == 0, "quantize_activations: k {} is not a multiple of 32", k);
  thread_local ActivationBuffers buf;
  const int64_t nb = k / 32;
  buf.q.resize(static_cast<size_t>(m * k));
  buf.d.resize(static_cast<size_t>(m * nb));
  buf.sum32.resize(static_cast<size_t>(m * nb));
  buf.sum16.resize(static_cast<size_t>(2 * m * nb));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < nb; ++b)
      quantize_block(x + r * k + 32 * b, buf.q.data() + r * k + 32 * b, &buf.d[r * nb + b],
                     &buf.sum32[r * nb + b], &buf.sum16[2 * (r * nb + b)]);
  return {buf.q.data(), buf.d.data(), buf.sum32.data(), buf.sum16.data(), k};
}

}  // namespace lmstack::kernels
