// Backward of rotary position embedding (Su et al. 2021). For each pair (a, b) = (i, i + D/2)
// the forward is the rotation [ya; yb] = R(θ)·[xa; xb], R(θ) = [[c, -s], [s, c]], θ = pos·f_i.
// R is orthogonal, so ∂L/∂x = R(θ)ᵀ·∂L/∂y = R(-θ)·∂L/∂y: the backward is the forward rotation
// at negated positions. kernels::rope computes θ = f32(pos)·inv_freq, and f32(-p) = -f32(p)
// exactly, so cos(-θ) = cos θ and sin(-θ) = -sin θ bit for bit.
#include <vector>

#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"

namespace lmstack::train {

void rope_backward(float* dx, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                   const float* inv_freq) {
  std::vector<int32_t> negated(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) negated[static_cast<size_t>(t)] = -positions[t];
  kernels::rope(dx, negated.data(), tokens, heads, head_dim, head_dim, inv_freq,
                kernels::RopeStyle::kRotateHalf);
}

}  // namespace lmstack::train
