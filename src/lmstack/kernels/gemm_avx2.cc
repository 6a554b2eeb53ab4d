// AVX2+FMA pieces of the blocked GEMM (driver: gemm_driver.cc), for machines without
// AVX-512: a 6 x 16 microkernel (12 ymm accumulators + 2 B vectors + one broadcast of 16
// registers; 2 B loads and 6 broadcasts per 12 FMAs) and scalar B packers that convert
// bf16/f16 to f32 once per call. Compiled for the x86-64-v3 baseline.
#include <immintrin.h>

#include "lmstack/core/half.h"
#include "lmstack/kernels/gemm_kernels.h"

namespace lmstack::kernels {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

float element(WeightType wt, const void* b, int64_t at) {
  if (wt == WeightType::kF32) return static_cast<const float*>(b)[at];
  const uint16_t h = static_cast<const uint16_t*>(b)[at];
  return wt == WeightType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// One A panel, ap[kk * MR + ii] = alpha * op(A)(ii, kk), zero rows past `rows`.
void pack_a(const float* a, int64_t lda, bool trans, int rows, int64_t k, float alpha, float* ap) {
  if (trans) {
    for (int64_t kk = 0; kk < k; ++kk)
      for (int ii = 0; ii < kMr; ++ii) ap[kk * kMr + ii] = ii < rows ? alpha * a[kk * lda + ii] : 0;
    return;
  }
  for (int ii = 0; ii < kMr; ++ii) {
    const float* src = a + ii * lda;
    if (ii >= rows) {
      for (int64_t kk = 0; kk < k; ++kk) ap[kk * kMr + ii] = 0;
      continue;
    }
    for (int64_t kk = 0; kk < k; ++kk) ap[kk * kMr + ii] = alpha * src[kk];
  }
}

// B [N, K] -> 16-column panels, column by column (each column is a contiguous row of B).
void pack_b_nt(WeightType wt, const void* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0,
               int64_t kc, float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    for (int64_t jj = 0; jj < kNr; ++jj) {
      const int64_t j = jp + jj;
      for (int64_t kk = 0; kk < kc; ++kk)
        panel[kk * kNr + jj] = j < nc ? element(wt, b, (n0 + j) * ldb + k0 + kk) : 0.0f;
    }
  }
}

void pack_b_nn(const float* b, int64_t ldb, int64_t n0, int64_t nc, int64_t k0, int64_t kc,
               float* bp) {
  for (int64_t jp = 0; jp < nc; jp += kNr) {
    float* panel = bp + jp / kNr * kc * kNr;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const float* src = b + (k0 + kk) * ldb + n0 + jp;
      for (int64_t jj = 0; jj < kNr; ++jj) panel[kk * kNr + jj] = jp + jj < nc ? src[jj] : 0.0f;
    }
  }
}

// Stores one 8-wide row piece of n (<= 8) valid lanes, adding the old values if asked.
inline void store8(float* dst, __m256 v, int64_t n, bool add) {
  if (n >= 8) {
    if (add) v = _mm256_add_ps(v, _mm256_loadu_ps(dst));
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float buf[8];
  _mm256_store_ps(buf, v);
  for (int64_t j = 0; j < n; ++j) dst[j] = add ? dst[j] + buf[j] : buf[j];
}

void micro(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int mr, int nr,
           bool add) {
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_loadu_ps(bp + kk * kNr);
    const __m256 b1 = _mm256_loadu_ps(bp + kk * kNr + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m256 av = _mm256_broadcast_ss(ap + kk * kMr + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {  // constant bounds keep acc[] in registers
    if (i >= mr) break;
    store8(c + i * ldc, acc[i][0], nr, add);
    if (nr > 8) store8(c + i * ldc + 8, acc[i][1], nr - 8, add);
  }
}

}  // namespace

extern const GemmIsa kGemmIsaAvx2 = {"avx2", kMr, kNr, pack_a, pack_b_nt, pack_b_nn, micro};

}  // namespace lmstack::kernels
