// Row-wise softmax, numerically stable form softmax(x)_i = e^(x_i - max x) / Σ_j e^(x_j - max x):
// scalar reference, AVX2 variant, table and dispatch (AVX-512 variant in softmax_avx512.cc).
// Three passes over each row: max, exponentiate-and-sum (in place), scale by 1/sum.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

void softmax_rows_avx512(float* x, int64_t rows, int64_t dim);

namespace ref {

void softmax_rows(float* x, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * dim;
    float max_v = -INFINITY;
    for (int64_t i = 0; i < dim; ++i) max_v = std::max(max_v, xr[i]);
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += std::exp(static_cast<double>(xr[i]) - max_v);
    for (int64_t i = 0; i < dim; ++i)
      xr[i] = static_cast<float>(std::exp(static_cast<double>(xr[i]) - max_v) / sum);
  }
}

}  // namespace ref

namespace {

float hmax_avx2(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void softmax_row_avx2(float* x, int64_t n) {
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max_v = hmax_avx2(vmax);
  for (; i < n; ++i) max_v = std::max(max_v, x[i]);
  const __m256 vm = _mm256_set1_ps(max_v);
  __m256 vsum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum_avx2(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max_v);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  const __m256 vinv = _mm256_set1_ps(inv);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

void softmax_rows_avx2(float* x, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) softmax_row_avx2(x + r * dim, dim);
}

constexpr KernelVariant<SoftmaxRowsFn> kSoftmaxVariants[] = {
    {"avx512", softmax_rows_avx512, avx512_supported},
    {"avx2", softmax_rows_avx2, avx2_supported},
    {"ref", ref::softmax_rows, always_supported},
};

}  // namespace

std::span<const KernelVariant<SoftmaxRowsFn>> softmax_rows_variants() { return kSoftmaxVariants; }

// Backward: ∂y_i/∂x_j = y_i(δ_ij - y_j), so dx_j = y_j·(dy_j - Σ_i dy_i·y_i).
void softmax_rows_backward(float* dx, const float* dy, const float* y, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * dim;
    const float* dyr = dy + r * dim;
    double dot = 0;
    for (int64_t i = 0; i < dim; ++i) dot += static_cast<double>(dyr[i]) * yr[i];
    const auto dotf = static_cast<float>(dot);
    for (int64_t i = 0; i < dim; ++i) dx[r * dim + i] += yr[i] * (dyr[i] - dotf);
  }
}

void softmax_rows(float* x, int64_t rows, int64_t dim) {
  static SoftmaxRowsFn* const fn = pick_variant(softmax_rows_variants());
  fn(x, rows, dim);
}

}  // namespace lmstack::kernels
