// SwiGLU's silu(gate)·up (Shazeer 2020), GPT-2's tanh GELU (Hendrycks & Gimpel 2016, eq. in
// §2) and the residual add: scalar references, AVX2 variants, tables and dispatch. AVX-512
// variants are in activation_avx512.cc. The vector forms use the identities
// silu(z) = z / (1 + e^-z) and 0.5·x·(1 + tanh(u)) = x / (1 + e^(-2u)), which avoid the
// cancellation of 1 + tanh(u) for negative u.
#include <immintrin.h>

#include <cmath>

#include "lmstack/kernels/activation_exp.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

void silu_mul_avx512(float* out, const float* gate, const float* up, int64_t n);
void gelu_tanh_avx512(float* y, const float* x, int64_t n);
void add_inplace_avx512(float* y, const float* x, int64_t n);

namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
constexpr double kGeluCubic = 0.044715;
}  // namespace

namespace ref {

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_tanh(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v *
                              (1.0 + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v))));
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace ref

namespace {

void silu_mul_avx2(float* out, const float* gate, const float* up, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 den = _mm256_add_ps(one, exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g)));
    _mm256_storeu_ps(out + i, _mm256_div_ps(_mm256_mul_ps(g, _mm256_loadu_ps(up + i)), den));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh_avx2(float* y, const float* x, int64_t n) {
  const auto k2 = static_cast<float>(-2.0 * kSqrt2OverPi);
  const auto kc = static_cast<float>(kGeluCubic);
  const __m256 one = _mm256_set1_ps(1.0f), vk2 = _mm256_set1_ps(k2), vkc = _mm256_set1_ps(kc);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(vkc, v), _mm256_mul_ps(v, v), v);
    const __m256 den = _mm256_add_ps(one, exp_avx2(_mm256_mul_ps(vk2, inner)));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, den));
  }
  for (; i < n; ++i) {
    const float v = x[i];
    y[i] = v / (1.0f + std::exp(k2 * (v + kc * v * v * v)));
  }
}

void add_inplace_avx2(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

constexpr KernelVariant<SiluMulFn> kSiluMulVariants[] = {
    {"avx512", silu_mul_avx512, avx512_supported},
    {"avx2", silu_mul_avx2, avx2_supported},
    {"ref", ref::silu_mul, always_supported},
};
constexpr KernelVariant<GeluTanhFn> kGeluTanhVariants[] = {
    {"avx512", gelu_tanh_avx512, avx512_supported},
    {"avx2", gelu_tanh_avx2, avx2_supported},
    {"ref", ref::gelu_tanh, always_supported},
};
constexpr KernelVariant<AddInplaceFn> kAddInplaceVariants[] = {
    {"avx512", add_inplace_avx512, avx512_supported},
    {"avx2", add_inplace_avx2, avx2_supported},
    {"ref", ref::add_inplace, always_supported},
};

}  // namespace

std::span<const KernelVariant<SiluMulFn>> silu_mul_variants() { return kSiluMulVariants; }
std::span<const KernelVariant<GeluTanhFn>> gelu_tanh_variants() { return kGeluTanhVariants; }
std::span<const KernelVariant<AddInplaceFn>> add_inplace_variants() { return kAddInplaceVariants; }

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  static SiluMulFn* const fn = pick_variant(silu_mul_variants());
  fn(out, gate, up, n);
}

void gelu_tanh(float* y, const float* x, int64_t n) {
  static GeluTanhFn* const fn = pick_variant(gelu_tanh_variants());
  fn(y, x, n);
}

void add_inplace(float* y, const float* x, int64_t n) {
  static AddInplaceFn* const fn = pick_variant(add_inplace_variants());
  fn(y, x, n);
}

}  // namespace lmstack::kernels
