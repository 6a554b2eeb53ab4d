// AVX-512 row softmax (reference and dispatch in softmax.cc): max, exponentiate-and-sum in
// place, scale by 1/sum. Leaf function over raw pointers; tails use masks.
#include <immintrin.h>

#include <cstdint>

#include "lmstack/kernels/activation_exp.h"

namespace lmstack::kernels {
namespace {

inline __mmask16 mask_for(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xffff)
                         : static_cast<__mmask16>((1u << remaining) - 1u);
}

void softmax_row(float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += 16)
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, mask_for(n - i), x + i));
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_for(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(m, exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm)));
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  const __m512 vinv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = mask_for(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv));
  }
}

}  // namespace

void softmax_rows_avx512(float* x, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * dim, dim);
}

}  // namespace lmstack::kernels
