// Llama 3 RoPE scaling in GGUF. llama.cpp's converter does not store rope_scaling's
// parameters; it writes rope_freqs.weight, one factor per frequency that divides
// theta^(-2i/D) (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors). Loading turns the
// table back into RopeScaling: the scaled band is fixed by factor = max table value and, in the
// smooth band, 1/r = (1 - s)/factor + s with s = (orig/wavelen - low)/(high - low), which is
// linear in 1/wavelen, so two smooth points give low and high for a chosen orig (only the
// ratios orig/low and orig/high matter). The fit is then checked against the whole table.
#include <cmath>
#include <numbers>

#include "lmstack/kernels/ops.h"
#include "lmstack/model/gguf_model.h"

namespace lmstack::model::detail {
namespace {

constexpr double kOrig = 8192;  // Meta's original_max_position_embeddings for Llama 3.x

std::vector<double> wavelengths(int head_dim, float theta) {
  std::vector<double> wl(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < wl.size(); ++i)
    wl[i] = 2 * std::numbers::pi * std::pow(static_cast<double>(theta), 2.0 * i / head_dim);
  return wl;
}

bool matches(const std::vector<float>& factors, const RopeScaling& s, int head_dim, float theta) {
  std::vector<float> inv(factors.size()), plain(factors.size());
  kernels::rope_inv_freq(inv.data(), head_dim, theta, s.type.c_str(), s.factor, s.low_freq_factor,
                         s.high_freq_factor, s.original_max_position);
  kernels::rope_inv_freq(plain.data(), head_dim, theta, "default", 1, 1, 4, 8192);
  for (size_t i = 0; i < factors.size(); ++i) {
    const double want = plain[i] / factors[i];
    if (std::abs(inv[i] - want) > 1e-4 * std::abs(want)) return false;
  }
  return true;
}

}  // namespace

std::vector<float> llama3_rope_factors(const RopeScaling& s, int head_dim, float theta) {
  const double low_wl = s.original_max_position / s.low_freq_factor;
  const double high_wl = s.original_max_position / s.high_freq_factor;
  std::vector<float> out;
  for (double wl : wavelengths(head_dim, theta)) {
    if (wl < high_wl) {
      out.push_back(1.0f);
    } else if (wl > low_wl) {
      out.push_back(s.factor);
    } else {
      const double smooth = (s.original_max_position / wl - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

RopeScaling llama3_scaling_from_factors(const std::vector<float>& factors, int head_dim,
                                        float theta, const std::string& source) {
  if (factors.size() != static_cast<size_t>(head_dim / 2))
    throw_error<ConfigError>("{}: rope_freqs.weight has {} entries, head dim {} needs {}", source,
                             factors.size(), head_dim, head_dim / 2);
  RopeScaling s;
  float factor = 1;
  for (float r : factors) factor = std::max(factor, r);
  if (factor <= 1.0f + 1e-6f) return s;  // all ones: no scaling
  const std::vector<double> wl = wavelengths(head_dim, theta);
  // Bands by index (wavelength grows with i): [0, first_mid) kept, [first_mid, first_low)
  // smooth, [first_low, n) divided by factor.
  size_t first_mid = 0, first_low = factors.size();
  while (first_mid < factors.size() && std::abs(factors[first_mid] - 1) < 1e-5f) ++first_mid;
  while (first_low > first_mid && std::abs(factors[first_low - 1] - factor) < 1e-5f * factor)
    --first_low;
  const double below = first_mid > 0 ? wl[first_mid - 1] : wl[0] / 4;
  const double above = first_low < wl.size() ? wl[first_low] : wl.back() * 4;
  auto smooth_at = [&](size_t i) { return (1 / factors[i] - 1 / factor) / (1 - 1 / factor); };
  double low, high;
  if (first_low - first_mid >= 2) {  // two smooth points fix the line exactly
    const size_t a = first_mid, b = first_low - 1;
    const double d = (kOrig / wl[a] - kOrig / wl[b]) / (smooth_at(a) - smooth_at(b));
    low = kOrig / wl[a] - smooth_at(a) * d;
    high = low + d;
  } else if (first_low - first_mid == 1) {  // pick the kept band's edge, solve the other
    high = kOrig / std::sqrt(below * wl[first_mid]);
    const double x = kOrig / wl[first_mid], s1 = smooth_at(first_mid);
    low = (x - s1 * high) / (1 - s1);
  } else {  // no smooth point: both edges between the bands
    high = kOrig / (std::cbrt(below * below * above));
    low = kOrig / (std::cbrt(below * above * above));
  }
  s.type = "llama3";
  s.factor = factor;
  s.low_freq_factor = static_cast<float>(low);
  s.high_freq_factor = static_cast<float>(high);
  s.original_max_position = static_cast<int>(kOrig);
  if (!(high > low && low > 0) || !matches(factors, s, head_dim, theta))
    throw_error<ConfigError>(
        "{}: rope_freqs.weight is not a Llama 3 RoPE scaling table (max factor {}); other "
        "per-frequency factors are not supported",
        source, factor);
  return s;
}

}  // namespace lmstack::model::detail
