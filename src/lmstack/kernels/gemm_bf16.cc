// gemm_bf16() and linear_bf16(): the matrix products of training in bf16 mixed precision
// (ops.h has the contracts). Both operands are rounded to bf16 and the products summed in
// f32, which is what PyTorch's autocast does to a CPU matmul (oneDNN's bf16 GEMM), so the
// CPU's native bf16 dot product can run it. The variants: vdpbf16ps through the blocked
// driver of gemm_bf16_driver.cc where the CPU has AVX512_BF16; elsewhere the operands are
// rounded into f32 copies and go through gemm_f32 (same products, up to summation order);
// the reference last.
#include <algorithm>
#include <span>
#include <vector>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/error.h"
#include "lmstack/core/half.h"
#include "lmstack/kernels/gemm_blocking.h"
#include "lmstack/kernels/gemm_kernels.h"
#include "lmstack/kernels/linear_variants.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"

namespace lmstack::kernels {
namespace {

void gemm_bf16_avx512(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const void* b, DType b_dtype,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || !prepare_c(m, n, k, alpha, beta, c, ldc)) return;
  const WeightType bt = b_dtype == DType::kBF16 ? WeightType::kBF16 : WeightType::kF32;
  gemm_blocked_bf16(pool, kGemmBf16IsaAvx512, m, n, k, alpha, a, lda, trans_a, bt, b, ldb, trans_b,
                    c, ldc, beta != 0.0f);
}

// rows x cols elements of src (row stride ld, f32 or bf16) times scale, rounded to bf16 and
// widened back to f32 into dst [rows, cols].
void round_copy(ThreadPool& pool, const void* src, DType dt, int64_t ld, int64_t rows, int64_t cols,
                float scale, float* dst) {
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* out = dst + r * cols;
      if (dt == DType::kBF16) {
        const uint16_t* in = static_cast<const uint16_t*>(src) + r * ld;
        for (int64_t j = 0; j < cols; ++j) out[j] = bf16_to_f32(in[j]);
      } else {
        const float* in = static_cast<const float*>(src) + r * ld;
        for (int64_t j = 0; j < cols; ++j) out[j] = bf16_to_f32(f32_to_bf16(scale * in[j]));
      }
    }
  });
}

void gemm_bf16_rounded_f32(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n,
                           int64_t k, float alpha, const float* a, int64_t lda, const void* b,
                           DType b_dtype, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    gemm_f32(pool, false, false, m, n, 0, 1.0f, nullptr, 1, nullptr, 1, beta, c, ldc);
    return;
  }
  thread_local std::vector<float> ra, rb;
  const int64_t a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  ra.resize(static_cast<size_t>(a_rows * a_cols));
  rb.resize(static_cast<size_t>(b_rows * b_cols));
  round_copy(pool, a, DType::kF32, lda, a_rows, a_cols, alpha, ra.data());
  round_copy(pool, b, b_dtype, ldb, b_rows, b_cols, 1.0f, rb.data());
  gemm_f32(pool, trans_a, trans_b, m, n, k, 1.0f, ra.data(), a_cols, rb.data(), b_cols, beta, c,
           ldc);
}

void gemm_bf16_ref_variant(ThreadPool&, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                           float alpha, const float* a, int64_t lda, const void* b, DType b_dtype,
                           int64_t ldb, float beta, float* c, int64_t ldc) {
  ref::gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, b_dtype, ldb, beta, c, ldc);
}

bool avx512_bf16_ok() { return cpu_features().has_avx512() && cpu_features().avx512_bf16; }
bool always() { return true; }

constexpr KernelVariant<GemmBf16Fn> kVariants[] = {
    {"avx512_bf16", gemm_bf16_avx512, avx512_bf16_ok},
    {"rounded_f32", gemm_bf16_rounded_f32, always},
    {"ref", gemm_bf16_ref_variant, always},
};

}  // namespace

std::span<const KernelVariant<GemmBf16Fn>> gemm_bf16_variants() { return kVariants; }

void gemm_bf16(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const void* b, DType b_dtype, int64_t ldb,
               float beta, float* c, int64_t ldc) {
  LMSTACK_CHECK(b_dtype == DType::kF32 || b_dtype == DType::kBF16, "gemm_bf16: B dtype {}",
                dtype_name(b_dtype));
  static GemmBf16Fn* const fn = pick_variant(gemm_bf16_variants());
  fn(pool, trans_a, trans_b, m, n, k, alpha, a, lda, b, b_dtype, ldb, beta, c, ldc);
}

void linear_bf16(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                 const float* bias, bool accumulate) {
  LMSTACK_CHECK(w.rank() == 2, "linear weight must be 2-D, got {}", w.shape().str());
  const int64_t n = w.dim(0), k = w.dim(1);
  if (bias) {  // y = (y or 0) + bias first, then the product accumulates onto it
    pool.parallel_for(m, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) y[r * n + j] = (accumulate ? y[r * n + j] : 0.0f) + bias[j];
    });
  }
  gemm_bf16(pool, false, true, m, n, k, 1.0f, x, k, w.raw_data(), w.dtype(), k,
            bias || accumulate ? 1.0f : 0.0f, y, n);
}

}  // namespace lmstack::kernels
