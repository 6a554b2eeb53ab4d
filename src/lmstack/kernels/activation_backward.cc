// Backward of SwiGLU's silu(gate)·up and of the tanh GELU.
// silu(g) = g·σ(g), silu'(g) = σ(g)·(1 + g·(1 - σ(g))):
//   dgate += dout·up·silu'(gate),   dup += dout·silu(gate).
// gelu(x) = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³):
//   gelu'(x) = ½(1 + tanh u) + ½x(1 - tanh²u)·√(2/π)(1 + 3·0.044715x²).
// σ is evaluated as 1/(1 + e^-g), stable for both signs in f32 (e^-g → Inf gives σ = 0), and
// tanh u = 2σ(2u) - 1. AVX2 over 8 lanes with a scalar tail (this file is x86-64-v3).
#include <immintrin.h>

#include <cmath>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {

namespace {

inline __m256 sigmoid_avx2(__m256 z) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), z))));
}

}  // namespace

void silu_mul_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i), d = _mm256_loadu_ps(dout + i);
    const __m256 sig = sigmoid_avx2(g);
    // silu'(g) = σ(1 + g(1 - σ))
    const __m256 dsilu = _mm256_mul_ps(sig, _mm256_fmadd_ps(g, _mm256_sub_ps(one, sig), one));
    const __m256 dg = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(up + i)), dsilu);
    _mm256_storeu_ps(dgate + i, _mm256_add_ps(_mm256_loadu_ps(dgate + i), dg));
    _mm256_storeu_ps(dup + i, _mm256_fmadd_ps(d, _mm256_mul_ps(g, sig), _mm256_loadu_ps(dup + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    dgate[i] += dout[i] * up[i] * (sig * (1.0f + g * (1.0f - sig)));
    dup[i] += dout[i] * (g * sig);
  }
}

void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), two = _mm256_set1_ps(2.0f);
  const __m256 k = _mm256_set1_ps(kSqrt2OverPi), kc = _mm256_set1_ps(kCubic);
  const __m256 k3c = _mm256_set1_ps(3.0f * kCubic);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i), v2 = _mm256_mul_ps(v, v);
    const __m256 u = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(kc, v2), v, v));
    const __m256 t = _mm256_fmsub_ps(two, sigmoid_avx2(_mm256_mul_ps(two, u)), one);
    const __m256 du = _mm256_mul_ps(k, _mm256_fmadd_ps(k3c, v2, one));
    // ½(1 + t) + ½·x·(1 - t²)·du
    const __m256 sech2 = _mm256_fnmadd_ps(t, t, one);
    const __m256 grad =
        _mm256_mul_ps(half, _mm256_fmadd_ps(_mm256_mul_ps(v, sech2), du, _mm256_add_ps(one, t)));
    _mm256_storeu_ps(dx + i,
                     _mm256_fmadd_ps(_mm256_loadu_ps(dy + i), grad, _mm256_loadu_ps(dx + i)));
  }
  for (; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

}  // namespace lmstack::kernels
