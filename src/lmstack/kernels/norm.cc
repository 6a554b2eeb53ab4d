// RMSNorm (Zhang & Sennrich 2019) and LayerNorm (Ba et al. 2016): the scalar references,
// the AVX2 variants, the variant tables and the dispatching ops of ops.h. The AVX-512
// variants are in norm_avx512.cc. References follow Hugging Face: LlamaRMSNorm computes
// y = weight * (x * rsqrt(mean(x²) + eps)); nn.LayerNorm uses the biased variance.
#include <immintrin.h>

#include <cmath>

#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

void rmsnorm_avx512(float* y, const float* x, const float* weight, int64_t rows, int64_t dim,
                    float eps);
void layernorm_avx512(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
                      int64_t dim, float eps);

namespace ref {

void rmsnorm(float* y, const float* x, const float* weight, int64_t rows, int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv_rms) * weight[i];
  }
}

void layernorm(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
               int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double inv_std = 1.0 / std::sqrt(var / dim + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double v = (xr[i] - mean) * inv_std * gamma[i] + (beta ? beta[i] : 0.0);
      yr[i] = static_cast<float>(v);
    }
  }
}

}  // namespace ref

namespace {

float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of x[i] - shift squared, two accumulators to hide FMA latency.
float sum_sq_avx2(const float* x, int64_t n, float shift) {
  const __m256 vs = _mm256_set1_ps(shift);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vs);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vs);
    a0 = _mm256_fmadd_ps(d0, d0, a0);
    a1 = _mm256_fmadd_ps(d1, d1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vs);
    a0 = _mm256_fmadd_ps(d, d, a0);
  }
  float s = hsum_avx2(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += (x[i] - shift) * (x[i] - shift);
  return s;
}

float sum_avx2(const float* x, int64_t n) {
  __m256 a = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) a = _mm256_add_ps(a, _mm256_loadu_ps(x + i));
  float s = hsum_avx2(a);
  for (; i < n; ++i) s += x[i];
  return s;
}

// y = (x - shift) * scale * g (+ b): the shared tail of both norms.
void scale_rows_avx2(float* y, const float* x, float shift, float scale, const float* g,
                     const float* b, int64_t n) {
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xn = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs), vk);
    __m256 v = _mm256_mul_ps(xn, _mm256_loadu_ps(g + i));
    if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
    _mm256_storeu_ps(y + i, v);
  }
  for (; i < n; ++i) y[i] = ((x[i] - shift) * scale) * g[i] + (b ? b[i] : 0.0f);
}

void rmsnorm_avx2(float* y, const float* x, const float* weight, int64_t rows, int64_t dim,
                  float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float ms = sum_sq_avx2(x + r * dim, dim, 0.0f) / static_cast<float>(dim);
    const float inv_rms = 1.0f / std::sqrt(ms + eps);
    scale_rows_avx2(y + r * dim, x + r * dim, 0.0f, inv_rms, weight, nullptr, dim);
  }
}

void layernorm_avx2(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
                    int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float mean = sum_avx2(x + r * dim, dim) / static_cast<float>(dim);
    const float var = sum_sq_avx2(x + r * dim, dim, mean) / static_cast<float>(dim);
    scale_rows_avx2(y + r * dim, x + r * dim, mean, 1.0f / std::sqrt(var + eps), gamma, beta, dim);
  }
}

constexpr KernelVariant<RmsnormFn> kRmsnormVariants[] = {
    {"avx512", rmsnorm_avx512, avx512_supported},
    {"avx2", rmsnorm_avx2, avx2_supported},
    {"ref", ref::rmsnorm, always_supported},
};
constexpr KernelVariant<LayernormFn> kLayernormVariants[] = {
    {"avx512", layernorm_avx512, avx512_supported},
    {"avx2", layernorm_avx2, avx2_supported},
    {"ref", ref::layernorm, always_supported},
};

}  // namespace

std::span<const KernelVariant<RmsnormFn>> rmsnorm_variants() { return kRmsnormVariants; }
std::span<const KernelVariant<LayernormFn>> layernorm_variants() { return kLayernormVariants; }

void rmsnorm(float* y, const float* x, const float* weight, int64_t rows, int64_t dim, float eps) {
  static RmsnormFn* const fn = pick_variant(rmsnorm_variants());
  fn(y, x, weight, rows, dim, eps);
}

void layernorm(float* y, const float* x, const float* gamma, const float* beta, int64_t rows,
               int64_t dim, float eps) {
  static LayernormFn* const fn = pick_variant(layernorm_variants());
  fn(y, x, gamma, beta, rows, dim, eps);
}

}  // namespace lmstack::kernels
