// AVX-512 silu_mul, gelu_tanh and add_inplace (references, identities and dispatch in
// activation.cc). Leaf functions over raw pointers; tails use masked loads and stores.
#include <immintrin.h>

#include <cstdint>

#include "lmstack/kernels/activation_exp.h"

namespace lmstack::kernels {
namespace {

inline __mmask16 mask_for(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

}  // namespace

void silu_mul_avx512(float* out, const float* gate, const float* up, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_for(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 den = _mm512_add_ps(one, exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g)));
    const __m512 num = _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(num, den));
  }
}

void gelu_tanh_avx512(float* y, const float* x, int64_t n) {
  // x / (1 + e^(-2u)), u = √(2/π)(x + 0.044715 x³).
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 k2 = _mm512_set1_ps(static_cast<float>(-2.0 * 0.7978845608028654));
  const __m512 kc = _mm512_set1_ps(0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_for(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(kc, v), _mm512_mul_ps(v, v), v);
    const __m512 den = _mm512_add_ps(one, exp_avx512(_mm512_mul_ps(k2, inner)));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, den));
  }
}

void add_inplace_avx512(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_for(n - i);
    const __m512 s =
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(y + i, m, s);
  }
}

}  // namespace lmstack::kernels
