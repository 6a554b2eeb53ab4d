// The fused classifier of training (llm.c's fused_classifier, chunked): for a chunk of rows,
// logits = x·Wᵀ, then softmax and loss in place (cross_entropy_softmax_rows), then both
// products of the lm_head backward from that chunk, so the [rows, V] logits are never held
// for all rows at once. The derivation of ∂L/∂z is in cross_entropy.cc, that
// of the two products in linear.cc; classifier_test.cc compares this with those unfused steps.
#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {
namespace {

// max of x[0, n), in 16 independent lanes so the compiler can keep them in one vector.
float row_max(const float* x, int64_t n) {
  float lanes[16];
  std::fill_n(lanes, 16, -INFINITY);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) lanes[k] = lanes[k] < x[i + k] ? x[i + k] : lanes[k];
  float m = *std::max_element(lanes, lanes + 16);
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  return m;
}

}  // namespace

double cross_entropy_softmax_rows(ThreadPool& pool, float* logits, float* losses,
                                  const int32_t* targets, int64_t rows, int64_t vocab,
                                  float grad_scale) {
  for (int64_t r = 0; r < rows; ++r)  // before the pool: a throw must not leave a task
    if (targets[r] < 0 || targets[r] >= vocab)
      throw_error<RequestError>("target token {} at row {} is outside the vocabulary of {}",
                                targets[r], r, vocab);
  pool.parallel_for(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          float* z = logits + r * vocab;
          const int32_t y = targets[r];
          const float z_y = z[y], z_max = row_max(z, vocab);
          kernels::softmax_rows(z, 1, vocab);
          // L = -log p_y. When p_y underflowed (z_y far below the max) the float softmax
          // cannot give it: then L = log Σ e^(z - max) - (z_y - max), where the largest p,
          // the one at the max, is 1/Σ e^(z - max).
          if (z[y] > 1e-30f) {
            losses[r] = -std::log(z[y]);
          } else {
            const float p_max = row_max(z, vocab);
            losses[r] = static_cast<float>(-std::log(static_cast<double>(p_max)) -
                                           (static_cast<double>(z_y) - z_max));
          }
          for (int64_t i = 0; i < vocab; ++i) z[i] *= grad_scale;
          z[y] -= grad_scale;
        }
      },
      8);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) total += losses[r];
  return total;
}

double classifier_forward_backward(ThreadPool& pool, float* dx, float* dw, float* losses,
                                   const ClassifierArgs& a) {
  const int64_t v = a.w.dim(0), c = a.w.dim(1);
  double total = 0;
  for (int64_t r0 = 0; r0 < a.rows; r0 += a.chunk_rows) {
    const int64_t m = std::min(a.chunk_rows, a.rows - r0);
    const float* x = a.x + r0 * c;
    linear_forward(pool, a.chunk, x, a.w, m);
    total +=
        cross_entropy_softmax_rows(pool, a.chunk, losses + r0, a.targets + r0, m, v, a.grad_scale);
    if (a.w.dtype() == DType::kBF16) {  // bf16 mixed precision, as linear_backward
      kernels::gemm_bf16(pool, false, false, m, c, v, 1.0f, a.chunk, v, a.w.raw_data(),
                         DType::kBF16, c, 1.0f, dx + r0 * c, c);
      kernels::gemm_bf16(pool, true, false, v, c, m, 1.0f, a.chunk, v, x, DType::kF32, c, 1.0f, dw,
                         c);
    } else {
      kernels::gemm_f32(pool, false, false, m, c, v, 1.0f, a.chunk, v, a.w_f32, c, 1.0f,
                        dx + r0 * c, c);
      kernels::gemm_f32(pool, true, false, v, c, m, 1.0f, a.chunk, v, x, c, 1.0f, dw, c);
    }
  }
  return total;
}

}  // namespace lmstack::train
