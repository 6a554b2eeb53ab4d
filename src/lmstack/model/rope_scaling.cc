// RoPE tables and attention scales from a ModelConfig (model/rope_scaling.h).
#include "lmstack/model/rope_scaling.h"

#include <cmath>

#include "lmstack/kernels/ops.h"

namespace lmstack::model {
namespace {

bool is_yarn(const ModelConfig& c) { return c.rope_scaling.type == "yarn"; }

// YaRN eq. 21, transformers' yarn_get_mscale.
double yarn_mscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  std::vector<float> inv(static_cast<size_t>(c.head_dim / 2));
  const RopeScaling& s = c.rope_scaling;
  if (is_yarn(c)) {
    kernels::rope_inv_freq_yarn(
        inv.data(), c.head_dim, c.rope_theta, s.factor,
        s.original_max_position > 0 ? s.original_max_position : c.max_position,
        s.beta_fast > 0 ? s.beta_fast : 32.0f, s.beta_slow > 0 ? s.beta_slow : 1.0f, s.truncate);
  } else {
    kernels::rope_inv_freq(inv.data(), c.head_dim, c.rope_theta, s.type.c_str(), s.factor,
                           s.low_freq_factor, s.high_freq_factor, s.original_max_position);
  }
  return inv;
}

float rope_magnitude(const ModelConfig& c) {
  if (!is_yarn(c)) return 1.0f;
  const RopeScaling& s = c.rope_scaling;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    return static_cast<float>(yarn_mscale(s.factor, s.mscale) /
                              yarn_mscale(s.factor, s.mscale_all_dim));
  return static_cast<float>(yarn_mscale(s.factor, 1.0));
}

float attention_scale(const ModelConfig& c) {
  // Computed in f32 as before YaRN existed, so unscaled models keep bit-identical logits.
  if (c.mla.enabled()) {
    float scale = 1.0f / std::sqrt(static_cast<float>(c.mla.qk_head_dim()));
    if (is_yarn(c) && c.rope_scaling.mscale_all_dim != 0) {
      const auto m =
          static_cast<float>(yarn_mscale(c.rope_scaling.factor, c.rope_scaling.mscale_all_dim));
      scale *= m * m;
    }
    return scale;
  }
  const float m = rope_magnitude(c);
  return m * m / std::sqrt(static_cast<float>(c.head_dim));
}

}  // namespace lmstack::model
