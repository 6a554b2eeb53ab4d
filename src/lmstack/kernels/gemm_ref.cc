// Reference GEMM with BLAS semantics (row-major): C = alpha * op(A) * op(B) + beta * C,
// accumulated in double. The truth for gemm_test.cc; see ops.h for the contract. As in BLAS,
// beta == 0 means C is not read (NaN in C does not propagate).
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels::ref {

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = trans_a ? a[p * lda + i] : a[i * lda + p];
        const float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        acc += static_cast<double>(av) * bv;
      }
      float& out = c[i * ldc + j];
      const double prior = beta == 0.0f ? 0.0 : static_cast<double>(beta) * out;
      out = static_cast<float>(static_cast<double>(alpha) * acc + prior);
    }
  }
}

}  // namespace lmstack::kernels::ref
