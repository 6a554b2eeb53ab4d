// gemm_f32(): BLAS-semantics front end over the blocked driver (gemm_driver.cc) and its
// variant table. beta is applied here (C = beta * C unless beta is 0 or 1), alpha is folded
// into the packed A, so the microkernel only ever stores or adds.
#include <span>

#include "lmstack/core/cpu_features.h"
#include "lmstack/kernels/gemm_blocking.h"
#include "lmstack/kernels/gemm_kernels.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

void gemm_with(const GemmIsa& isa, ThreadPool& pool, bool trans_a, bool trans_b, int64_t m,
               int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
               int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || !prepare_c(m, n, k, alpha, beta, c, ldc)) return;
  gemm_blocked(pool, isa, m, n, k, alpha, a, lda, trans_a, WeightType::kF32, b, ldb, trans_b, c,
               ldc, beta != 0.0f);
}

void gemm_avx512(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                 float* c, int64_t ldc) {
  gemm_with(kGemmIsaAvx512, pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_avx2(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  gemm_with(kGemmIsaAvx2, pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_ref_variant(ThreadPool&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float beta, float* c, int64_t ldc) {
  ref::gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool avx512_ok() { return cpu_features().has_avx512(); }
bool avx2_ok() { return cpu_features().has_avx2_fma(); }
bool always() { return true; }

constexpr KernelVariant<GemmF32Fn> kGemmVariants[] = {
    {"avx512", gemm_avx512, avx512_ok},
    {"avx2", gemm_avx2, avx2_ok},
    {"ref", gemm_ref_variant, always},
};

}  // namespace

std::span<const KernelVariant<GemmF32Fn>> gemm_f32_variants() { return kGemmVariants; }

void gemm_f32(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
  static GemmF32Fn* const fn = pick_variant(gemm_f32_variants());
  fn(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace lmstack::kernels
