// Backward of a linear layer y[M, N] = x[M, K] · w[N, K]ᵀ + b. From y_mn = Σ_k x_mk w_nk + b_n:
//   term 1  ∂L/∂x_mk = Σ_n dy_mn w_nk        ->  dx = dy · w        (gemm, no transposes)
//   term 2  ∂L/∂w_nk = Σ_m dy_mn x_mk        ->  dw = dyᵀ · x       (gemm, A transposed)
//   term 3  ∂L/∂b_n  = Σ_m dy_mn             ->  column sums of dy
// Both products run on kernels::gemm_f32 with beta = 1, so they accumulate; for a bf16 w
// (bf16 mixed precision, backward.h) on kernels::gemm_bf16, which reads w as stored.
#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void linear_forward(ThreadPool& pool, float* y, const float* x, const Tensor& w, int64_t m,
                    const float* bias, bool accumulate) {
  if (w.dtype() == DType::kBF16)
    kernels::linear_bf16(pool, y, x, w, m, bias, accumulate);
  else
    kernels::linear(pool, y, x, w, m, bias, accumulate);
}

void linear_backward(ThreadPool& pool, float* dx, float* dw, float* db, const float* dy,
                     const float* x, const Tensor& w, int64_t m) {
  LMSTACK_CHECK(w.rank() == 2, "linear weight must be 2-D, got {}", w.shape().str());
  LMSTACK_CHECK(w.dtype() == DType::kF32 || w.dtype() == DType::kBF16,
                "linear_backward: weight dtype {}", dtype_name(w.dtype()));
  const int64_t n = w.dim(0), k = w.dim(1);
  if (w.dtype() == DType::kBF16) {
    if (dx)
      kernels::gemm_bf16(pool, false, false, m, k, n, 1.0f, dy, n, w.raw_data(), DType::kBF16, k,
                         1.0f, dx, k);
    kernels::gemm_bf16(pool, true, false, n, k, m, 1.0f, dy, n, x, DType::kF32, k, 1.0f, dw, k);
  } else {
    if (dx)
      kernels::gemm_f32(pool, false, false, m, k, n, 1.0f, dy, n, w.data<float>(), k, 1.0f, dx, k);
    kernels::gemm_f32(pool, true, false, n, k, m, 1.0f, dy, n, x, k, 1.0f, dw, k);
  }
  if (db) {
    pool.parallel_for(
        n,
        [&](int64_t begin, int64_t end) {
          for (int64_t r = 0; r < m; ++r) {
            const float* row = dy + r * n;
            for (int64_t j = begin; j < end; ++j) db[j] += row[j];
          }
        },
        64);
  }
}

}  // namespace lmstack::train
