// Rotary position embedding (Su et al. 2021, RoFormer §3.4.2 eq. 34): the inverse-frequency
// table with its scalings, the scalar reference rotation, the variant table and dispatch.
// Angles follow Hugging Face: angle = f32(position) * inv_freq in f32, then cos/sin (here in
// double, rounded once), out = x·cos + rotate(x)·sin with the pair convention of RopeStyle.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {

namespace {

// Rotates pairs by ±angle: sin_sign +1 is the forward, -1 its inverse (the backward).
void rotate(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
            int rotary_dim, const float* inv_freq, RopeStyle style, float sin_sign) {
  LMSTACK_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim {} head_dim {}",
                rotary_dim, head_dim);
  const int half = rotary_dim / 2;
  std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq[i];
      cos_t[static_cast<size_t>(i)] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_t[static_cast<size_t>(i)] =
          sin_sign * static_cast<float>(std::sin(static_cast<double>(angle)));
    }
    for (int h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        // Rotate-half pairs (i, i + half); interleaved pairs (2i, 2i + 1).
        const int a = style == RopeStyle::kRotateHalf ? i : 2 * i;
        const int b = style == RopeStyle::kRotateHalf ? i + half : 2 * i + 1;
        const float c = cos_t[static_cast<size_t>(i)], s = sin_t[static_cast<size_t>(i)];
        const float xa = xh[a], xb = xh[b];
        xh[a] = xa * c - xb * s;
        xh[b] = xb * c + xa * s;
      }
    }
  }
}

}  // namespace

namespace ref {

void rope(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
          int rotary_dim, const float* inv_freq, RopeStyle style) {
  rotate(x, positions, tokens, heads, head_dim, rotary_dim, inv_freq, style, 1.0f);
}

}  // namespace ref

namespace {

// The fast form: f32 sin/cos (glibc's sinf/cosf are within 1 ulp after full range reduction,
// like PyTorch's f32 cos/sin) and one loop per pair convention with unit-stride inner loops
// the compiler vectorizes (AVX2 in this file).
void rotate_fast(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                 int rotary_dim, const float* inv_freq, RopeStyle style, float sin_sign) {
  LMSTACK_CHECK(rotary_dim % 2 == 0 && rotary_dim <= head_dim, "rotary_dim {} head_dim {}",
                rotary_dim, head_dim);
  const int half = rotary_dim / 2;
  std::vector<float> table(static_cast<size_t>(rotary_dim));
  float* cos_t = table.data();
  float* sin_t = cos_t + half;
  for (int64_t t = 0; t < tokens; ++t) {
    const auto pos = static_cast<float>(positions[t]);
    for (int i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      cos_t[i] = std::cos(angle);
      sin_t[i] = sin_sign * std::sin(angle);
    }
    for (int h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      if (style == RopeStyle::kRotateHalf) {
        float* xb = xh + half;
        for (int i = 0; i < half; ++i) {
          const float a = xh[i], b = xb[i];
          xh[i] = a * cos_t[i] - b * sin_t[i];
          xb[i] = b * cos_t[i] + a * sin_t[i];
        }
      } else {
        for (int i = 0; i < half; ++i) {
          const float a = xh[2 * i], b = xh[2 * i + 1];
          xh[2 * i] = a * cos_t[i] - b * sin_t[i];
          xh[2 * i + 1] = b * cos_t[i] + a * sin_t[i];
        }
      }
    }
  }
}

void rope_avx2(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
               int rotary_dim, const float* inv_freq, RopeStyle style) {
  rotate_fast(x, positions, tokens, heads, head_dim, rotary_dim, inv_freq, style, 1.0f);
}

constexpr KernelVariant<RopeFn> kRopeVariants[] = {
    {"avx2", rope_avx2, avx2_supported},
    {"ref", ref::rope, always_supported},
};

// Llama 3.1 (Hugging Face _compute_llama3_parameters): keep high frequencies, divide low
// ones by `factor`, interpolate linearly in 1/wavelength between the two thresholds.
double llama3_scale(double inv_freq, double factor, double low_freq_factor, double high_freq_factor,
                    double original_max_position) {
  const double low_freq_wavelen = original_max_position / low_freq_factor;
  const double high_freq_wavelen = original_max_position / high_freq_factor;
  const double wavelen = 2 * std::numbers::pi / inv_freq;
  if (wavelen < high_freq_wavelen) return inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / factor;
  const double smooth =
      (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
  return (1 - smooth) * inv_freq / factor + smooth * inv_freq;
}

}  // namespace

std::span<const KernelVariant<RopeFn>> rope_variants() { return kRopeVariants; }

void rope(float* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
          int rotary_dim, const float* inv_freq, RopeStyle style) {
  static RopeFn* const fn = pick_variant(rope_variants());
  fn(x, positions, tokens, heads, head_dim, rotary_dim, inv_freq, style);
}

void rope_backward(float* dx, const int32_t* positions, int64_t tokens, int heads, int head_dim,
                   int rotary_dim, const float* inv_freq, RopeStyle style) {
  // The Jacobian of a rotation is the rotation; its transpose rotates by -angle.
  rotate_fast(dx, positions, tokens, heads, head_dim, rotary_dim, inv_freq, style, -1.0f);
}

void rope_inv_freq(float* inv_freq, int rotary_dim, float theta, const char* scaling_type,
                   float factor, float low_freq_factor, float high_freq_factor,
                   int original_max_position) {
  const std::string type = scaling_type ? scaling_type : "default";
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    throw_error<ConfigError>("rope: rotary dimension {} must be positive and even", rotary_dim);
  if (type != "default" && type != "linear" && type != "llama3")
    throw_error<ConfigError>(
        "rope_scaling.rope_type '{}' is not supported (default, linear, "
        "llama3)",
        type);
  if (type != "default" && !(factor > 0))
    throw_error<ConfigError>("rope_scaling.factor {} must be positive", factor);
  if (type == "llama3" &&
      !(high_freq_factor > low_freq_factor && low_freq_factor > 0 && original_max_position > 0))
    throw_error<ConfigError>(
        "rope_scaling llama3: need high_freq_factor ({}) > low_freq_factor ({}) > 0 and "
        "original_max_position_embeddings ({}) > 0",
        high_freq_factor, low_freq_factor, original_max_position);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(theta), 2.0 * i / rotary_dim);
    if (type == "linear") f /= factor;
    if (type == "llama3")
      f = llama3_scale(f, factor, low_freq_factor, high_freq_factor, original_max_position);
    inv_freq[i] = static_cast<float>(f);
  }
}

void rope_inv_freq_yarn(float* inv_freq, int rotary_dim, float theta, float factor,
                        int original_max_position, float beta_fast, float beta_slow,
                        bool truncate) {
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    throw_error<ConfigError>("rope: rotary dimension {} must be positive and even", rotary_dim);
  if (!(factor > 0) || original_max_position <= 0 || !(beta_fast > 0) || !(beta_slow > 0) ||
      !(theta > 1))
    throw_error<ConfigError>(
        "rope_scaling yarn: need factor ({}), original_max_position_embeddings ({}), beta_fast "
        "({}), beta_slow ({}) > 0 and rope_theta ({}) > 1",
        factor, original_max_position, beta_fast, beta_slow, theta);
  const double dim = rotary_dim, base = theta;
  // The dim whose wavelength makes `rotations` turns over the original context (YaRN eq. 17).
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(original_max_position / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(base));
  };
  double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
  if (truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const double f = 1.0 / std::pow(base, 2.0 * i / dim);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    inv_freq[i] = static_cast<float>(f / factor * ramp + f * (1 - ramp));
  }
}

}  // namespace lmstack::kernels
