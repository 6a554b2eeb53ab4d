// Reference GEMM with BLAS semantics (row-major): C = alpha * op(A) * op(B) + beta * C,
// accumulated in double. The truth for gemm_test.cc and gemm_bf16_test.cc; see ops.h for the
// contracts. As in BLAS, beta == 0 means C is not read (NaN in C does not propagate).
#include "lmstack/core/half.h"
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

namespace {

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const void* b, DType b_dtype, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  const auto b_at = [&](int64_t row, int64_t col) {
    const int64_t at = row * ldb + col;
    return b_dtype == DType::kBF16 ? bf16_to_f32(static_cast<const uint16_t*>(b)[at])
                                   : round_bf16(static_cast<const float*>(b)[at]);
  };
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = round_bf16(alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]));
        acc += static_cast<double>(av) * (trans_b ? b_at(j, p) : b_at(p, j));
      }
      float& out = c[i * ldc + j];
      out = static_cast<float>(acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * out));
    }
  }
}

}  // namespace lmstack::kernels::ref
