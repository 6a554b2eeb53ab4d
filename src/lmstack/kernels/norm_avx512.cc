// AVX-512 RMSNorm and LayerNorm (see norm.cc for the references and dispatch). Leaf functions
// over raw pointers only: this file is compiled with AVX-512 flags, so it must not
// instantiate STL code that the linker could share with baseline files. Tails use masked
// loads and stores instead of a scalar loop.
#include <immintrin.h>

#include <cstdint>

namespace lmstack::kernels {
namespace {

inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// Sum of (x[i] - shift)² with two accumulators.
float sum_sq(const float* x, int64_t n, float shift) {
  const __m512 vs = _mm512_set1_ps(shift);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vs);
    const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vs);
    a0 = _mm512_fmadd_ps(d0, d0, a0);
    a1 = _mm512_fmadd_ps(d1, d1, a1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), vs);
    a0 = _mm512_fmadd_ps(d, d, a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

float sum(const float* x, int64_t n) {
  __m512 a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    a = _mm512_add_ps(a, _mm512_maskz_loadu_ps(m, x + i));
  }
  return _mm512_reduce_add_ps(a);
}

// y = ((x - shift) * scale) * g (+ b).
void scale_row(float* y, const float* x, float shift, float scale, const float* g, const float* b,
               int64_t n) {
  const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 xn = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs), vk);
    __m512 v = _mm512_mul_ps(xn, _mm512_maskz_loadu_ps(m, g + i));
    if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

}  // namespace

void rmsnorm_avx512(float* y, const float* x, const float* weight, int64_t rows, int64_t dim,
                    float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float ms = sum_sq(x + r * dim, dim, 0.0f) / static_cast<float>(dim);
    scale_row(y + r * dim, x + r * dim, 0.0f, 1.0f / __builtin_sqrtf(ms + eps), weight, nullptr,
              dim);
  }
}

void layernorm_avx512(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
                      int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float mean = sum(x + r * dim, dim) / static_cast<float>(dim);
    const float var = sum_sq(x + r * dim, dim, mean) / static_cast<float>(dim);
    scale_row(y + r * dim, x + r * dim, mean, 1.0f / __builtin_sqrtf(var + eps), gamma, beta, dim);
  }
}

}  // namespace lmstack::kernels
