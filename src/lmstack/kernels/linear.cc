// linear() and gemm_f32() dispatch: the variant tables and the run-time choice among them.
#include <span>

#include "lmstack/core/cpu_features.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

bool always() { return true; }

void linear_ref_variant(ThreadPool&, float* y, const float* x, const Tensor& w, int64_t m,
                        const float* bias, bool accumulate) {
  ref::linear(y, x, w, m, bias, accumulate);
}

void gemm_ref_variant(ThreadPool&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float beta, float* c, int64_t ldc) {
  ref::gemm_f32(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

constexpr KernelVariant<LinearFn> kLinearVariants[] = {
    {"ref", linear_ref_variant, always},
};
constexpr KernelVariant<GemmF32Fn> kGemmVariants[] = {
    {"ref", gemm_ref_variant, always},
};

}  // namespace

std::span<const KernelVariant<LinearFn>> linear_variants() { return kLinearVariants; }
std::span<const KernelVariant<GemmF32Fn>> gemm_f32_variants() { return kGemmVariants; }

void linear(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
            const float* bias, bool accumulate) {
  static LinearFn* const fn = pick_variant(linear_variants());
  fn(pool, y, x, w, m, bias, accumulate);
}

void gemm_f32(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
  static GemmF32Fn* const fn = pick_variant(gemm_f32_variants());
  fn(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace lmstack::kernels
