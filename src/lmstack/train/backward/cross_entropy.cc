// Cross-entropy fused with softmax (llm.c's fused classifier). For one row of logits z with
// target y: L = logsumexp(z) - z_y, p = softmax(z), and
//   ∂L/∂z_i = p_i - [i = y]
// so the gradient needs only p, computed in place over the logits (no [rows, V] copy).
// logsumexp subtracts the row max first; sums run in double.
#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {
namespace {

// Returns (max, log Σ exp(z - max)).
void row_logsumexp(const float* z, int64_t vocab, float* max_out, double* log_sum) {
  float mx = z[0];
  for (int64_t i = 1; i < vocab; ++i) mx = z[i] > mx ? z[i] : mx;
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(z[i] - mx));
  *max_out = mx;
  *log_sum = std::log(sum);
}

void check_target(int32_t target, int64_t vocab, int64_t row) {
  if (target < 0 || target >= vocab)
    throw_error<RequestError>("target token {} at row {} is outside the vocabulary of {}", target,
                              row, vocab);
}

}  // namespace

double cross_entropy_forward_backward(float* logits, float* losses, const int32_t* targets,
                                      int64_t rows, int64_t vocab, float grad_scale) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    check_target(targets[r], vocab, r);
    float* z = logits + r * vocab;
    float mx;
    double log_sum;
    row_logsumexp(z, vocab, &mx, &log_sum);
    const double loss = log_sum - static_cast<double>(z[targets[r]] - mx);
    losses[r] = static_cast<float>(loss);
    total += loss;
    for (int64_t i = 0; i < vocab; ++i) {
      const double p = std::exp(static_cast<double>(z[i] - mx) - log_sum);
      z[i] = static_cast<float>(p * grad_scale);
    }
    z[targets[r]] -= grad_scale;
  }
  return total;
}

double cross_entropy_loss(const float* logits, float* losses, const int32_t* targets, int64_t rows,
                          int64_t vocab) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    check_target(targets[r], vocab, r);
    const float* z = logits + r * vocab;
    float mx;
    double log_sum;
    row_logsumexp(z, vocab, &mx, &log_sum);
    const double loss = log_sum - static_cast<double>(z[targets[r]] - mx);
    losses[r] = static_cast<float>(loss);
    total += loss;
  }
  return total;
}

}  // namespace lmstack::train
