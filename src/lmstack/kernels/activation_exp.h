// Vectorized e^x for the activation, softmax and attention kernels: Cody-Waite range
// reduction x = n·ln2 + r, |r| <= ln2/2, then the degree-6 Cephes expf polynomial for e^r
// (relative error about 2 ulp), scaled by 2^n. AVX2 in every file; AVX-512 only where the
// including file is compiled with it (*_avx512.cc). Internal linkage, so each file gets its
// own copy compiled for its own instruction set.
#pragma once

#include <immintrin.h>

namespace lmstack::kernels {
namespace {

// Cephes: ln2 split into a part exact in few bits and a small correction.
constexpr float kExpLn2Hi = 0.693359375f;
constexpr float kExpLn2Lo = -2.12194440e-4f;
constexpr float kExpLog2e = 1.44269504088896341f;
constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

// Inputs are clamped to [-87.33, 88.02]: below, the result is the smallest normal float
// (≈1.2e-38) instead of a denormal or 0; above, ≈1.6e38 instead of Inf.
[[maybe_unused]] inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.02f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kExpLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpP[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpP[i]));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#ifdef __AVX512F__
// Full range: scalef computes p·2^n with correct overflow to Inf and underflow to 0.
[[maybe_unused]] inline __m512 exp_avx512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kExpLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kExpLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpP[i]));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}
#endif

}  // namespace
}  // namespace lmstack::kernels
