// Backward of RMSNorm and LayerNorm, statistics recomputed from x (no saved buffers).
// RMSNorm, per row of n: r = (Σx²/n + eps)^(-1/2), y_i = w_i·x_i·r. With ∂r/∂x_j = -r³x_j/n,
//   dx_j = r·dy_j·w_j - (r³/n)·x_j·Σ_i dy_i·w_i·x_i,   dw_i += dy_i·x_i·r.
// LayerNorm: x̂ = (x - μ)·r, r = (var + eps)^(-1/2), y = γ·x̂ + β; with g = dy·γ (llm.c's
// derivation), dx = r·(g - mean(g) - x̂·mean(g·x̂)),   dγ += dy·x̂,   dβ += dy.
// Row sums accumulate in double; the elementwise loops are left to the compiler to vectorize.
#include <cmath>

#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {

void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x,
                      const float* weight, int64_t rows, int64_t dim, float eps) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    const float* dyr = dy + row * dim;
    float* dxr = dx + row * dim;
    double sum_sq = 0, dot = 0;
    for (int64_t i = 0; i < dim; ++i) {
      sum_sq += static_cast<double>(xr[i]) * xr[i];
      dot += static_cast<double>(dyr[i]) * weight[i] * xr[i];
    }
    const double r = 1.0 / std::sqrt(sum_sq / dim + eps);
    const auto rf = static_cast<float>(r);
    const auto k = static_cast<float>(r * r * r / dim * dot);
    for (int64_t i = 0; i < dim; ++i) {
      dxr[i] += rf * dyr[i] * weight[i] - k * xr[i];
      dweight[i] += dyr[i] * xr[i] * rf;
    }
  }
}

void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, int64_t rows, int64_t dim, float eps) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x + row * dim;
    const float* dyr = dy + row * dim;
    float* dxr = dx + row * dim;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const double r = 1.0 / std::sqrt(var / dim + eps);
    double g_mean = 0, gx_mean = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double g = static_cast<double>(dyr[i]) * gamma[i];
      g_mean += g;
      gx_mean += g * (xr[i] - mean) * r;
    }
    g_mean /= dim;
    gx_mean /= dim;
    const auto mf = static_cast<float>(mean), rf = static_cast<float>(r);
    const auto gmf = static_cast<float>(g_mean), gxf = static_cast<float>(gx_mean);
    for (int64_t i = 0; i < dim; ++i) {
      const float xhat = (xr[i] - mf) * rf;
      dxr[i] += rf * (dyr[i] * gamma[i] - gmf - xhat * gxf);
      dgamma[i] += dyr[i] * xhat;
      if (dbeta) dbeta[i] += dyr[i];
    }
  }
}

}  // namespace lmstack::kernels
