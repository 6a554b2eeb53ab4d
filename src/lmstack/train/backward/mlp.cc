// Backward of the MLP activations. SwiGLU (Shazeer 2020): out = silu(g) ⊙ u, silu(g) = g·σ(g),
//   term 1  ∂L/∂u = dout ⊙ silu(g)
//   term 2  ∂L/∂g = dout ⊙ u ⊙ silu'(g),  silu'(g) = σ(g)·(1 + g·(1 - σ(g)))
// GELU, tanh form (GPT-2): y = ½x(1 + tanh(z)), z = √(2/π)(x + 0.044715x³),
//   dy/dx = ½(1 + tanh z) + ½x·(1 - tanh² z)·√(2/π)(1 + 3·0.044715x²).
#include <cmath>
#include <numbers>

#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sig;
    const float d = dout[i];
    dup[i] = d * silu;
    dgate[i] = d * up[i] * sig * (1.0f + g * (1.0f - sig));
  }
}

void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = std::tanh(k * (v + 0.044715f * v * v * v));
    const float local =
        0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dy[i] * local;
  }
}

}  // namespace lmstack::train
