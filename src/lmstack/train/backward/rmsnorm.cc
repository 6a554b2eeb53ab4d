// RMSNorm (Zhang & Sennrich 2019) forward with saved statistics, and its backward. Per row of
// C values, r = 1/sqrt(mean(x²) + eps), xhat = x·r, y = xhat ⊙ w. With g = dy ⊙ w:
//   term 1  ∂L/∂w_i = Σ_rows dy_i · xhat_i
//   term 2  direct path through xhat:       g_i · r
//   term 3  path through r (∂r/∂x_j = -r³ x_j / C):  -r³/C · x_i · Σ_j g_j x_j
// so dx = r · (g - xhat · mean(g ⊙ xhat)). Sums accumulate in double.
#include <cmath>

#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* weight, int64_t rows,
                     int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += static_cast<double>(xr[i]) * xr[i];
    const float s = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(dim) + eps));
    rstd[r] = s;
    float* yr = y + r * dim;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s * weight[i];
  }
}

void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x,
                      const float* weight, const float* rstd, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* gr = dy + r * dim;
    const float s = rstd[r];
    double dot = 0;  // Σ_j (dy_j w_j) · xhat_j
    for (int64_t i = 0; i < dim; ++i) {
      const float xhat = xr[i] * s;
      dot += static_cast<double>(gr[i]) * weight[i] * xhat;
      dweight[i] += gr[i] * xhat;
    }
    const float mean_dot = static_cast<float>(dot / static_cast<double>(dim));
    float* dxr = dx + r * dim;
    for (int64_t i = 0; i < dim; ++i) dxr[i] += s * (gr[i] * weight[i] - xr[i] * s * mean_dot);
  }
}

}  // namespace lmstack::train
