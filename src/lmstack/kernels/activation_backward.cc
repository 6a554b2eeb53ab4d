// Backward of SwiGLU's silu(gate)·up and of the tanh GELU.
// silu(g) = g·σ(g), silu'(g) = σ(g)·(1 + g·(1 - σ(g))):
//   dgate += dout·up·silu'(gate),   dup += dout·silu(gate).
// gelu(x) = ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³):
//   gelu'(x) = ½(1 + tanh u) + ½x(1 - tanh²u)·√(2/π)(1 + 3·0.044715x²).
// σ is evaluated as 1/(1 + e^-g), stable for both signs in f32 (e^-g → Inf gives σ = 0).
#include <cmath>

#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {

void silu_mul_backward(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sig;
    dgate[i] += dout[i] * up[i] * (sig * (1.0f + g * (1.0f - sig)));
    dup[i] += dout[i] * silu;
  }
}

void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] += dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

}  // namespace lmstack::kernels
