// LayerNorm (Ba et al. 2016) forward with saved mean and rstd, and its backward. Per row of C
// values, xhat = (x - mean)·rstd, rstd = 1/sqrt(var + eps) (biased variance), y = xhat ⊙ γ + β.
// With g = dy ⊙ γ:
//   term 1  ∂L/∂γ_i = Σ_rows dy_i xhat_i,  ∂L/∂β_i = Σ_rows dy_i
//   term 2  direct path through xhat:        rstd · g_i
//   term 3  through mean and rstd:           -rstd · (mean(g) + xhat_i · mean(g ⊙ xhat))
// so dx = rstd · (g - mean(g) - xhat · mean(g ⊙ xhat)). Sums accumulate in double.
#include <cmath>

#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int64_t rows, int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const double mu = sum / static_cast<double>(dim);
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mu) * (xr[i] - mu);
    const float s = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(dim) + eps));
    const float m = static_cast<float>(mu);
    mean[r] = m;
    rstd[r] = s;
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - m) * s * gamma[i] + (beta ? beta[i] : 0.0f);
  }
}

void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int64_t rows,
                        int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* gr = dy + r * dim;
    const float s = rstd[r], m = mean[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const float xhat = (xr[i] - m) * s;
      const float g = gr[i] * gamma[i];
      sum_g += g;
      sum_gx += static_cast<double>(g) * xhat;
      dgamma[i] += gr[i] * xhat;
      if (dbeta) dbeta[i] += gr[i];
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(dim));
    const float mean_gx = static_cast<float>(sum_gx / static_cast<double>(dim));
    float* dxr = dx + r * dim;
    for (int64_t i = 0; i < dim; ++i) {
      const float xhat = (xr[i] - m) * s;
      dxr[i] += s * (gr[i] * gamma[i] - mean_g - xhat * mean_gx);
    }
  }
}

}  // namespace lmstack::train
