// RoPE: inverse-frequency tables against values derived in NumPy (tools/ref/
// gen_rope_inv_freq.py) for the default, linear and llama3 scalings; the rotation against a
// direct evaluation of the Hugging Face formulas for both pair conventions and partial
// rotary dims; every variant against the reference.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"
#include "test_util.h"

namespace lmstack::kernels {
namespace {

TEST(RopeInvFreq, DefaultAndLinear) {
  std::vector<float> f(4);
  rope_inv_freq(f.data(), 8, 10000.0f, "default", 1, 0, 0, 0);
  EXPECT_TRUE(test::all_close(f, {1.0f, 0.1f, 0.01f, 0.001f}, 1e-6, 0));
  rope_inv_freq(f.data(), 8, 10000.0f, "linear", 4, 0, 0, 0);
  EXPECT_TRUE(test::all_close(f, {0.25f, 0.025f, 0.0025f, 0.00025f}, 1e-6, 0));
}

TEST(RopeInvFreq, Llama3MatchesNumpy) {
  // Llama 3.1 8B: rotary dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
  const std::vector<float> want = {
      1.000000000e+00, 8.146172339e-01, 6.636012377e-01, 5.405810046e-01, 4.403666027e-01,
      3.587302238e-01, 2.922278226e-01, 2.380538205e-01, 1.939227447e-01, 1.579728099e-01,
      1.286873734e-01, 1.048309522e-01, 8.539710029e-02, 6.956594961e-02, 5.666962145e-02,
      4.616405027e-02, 3.760603093e-02, 3.063452089e-02, 2.495540867e-02, 2.032910598e-02,
      1.656044008e-02, 1.349041989e-02, 1.098952853e-02, 8.952259336e-03, 7.292664737e-03,
      5.940730376e-03, 4.839421346e-03, 3.942276030e-03, 3.211445995e-03, 2.166570764e-03,
      1.371893568e-03, 8.567514129e-04, 5.248461610e-04, 3.126937504e-04, 1.785078128e-04,
      9.556212354e-05, 7.784655274e-05, 6.341514346e-05, 5.165906875e-05, 4.208236769e-05,
      3.428102196e-05, 2.792591128e-05, 2.274892860e-05, 1.853166929e-05, 1.509621718e-05,
      1.229763868e-05, 1.001786840e-05, 8.160728247e-06, 6.647869871e-06, 5.415469365e-06,
      4.411534675e-06, 3.593712174e-06, 2.927499870e-06, 2.384791846e-06, 1.942692537e-06,
      1.582550821e-06, 1.289173172e-06, 1.050182683e-06, 8.554969126e-07, 6.969025286e-07,
      5.677088101e-07, 4.624653805e-07, 3.767322690e-07, 3.068925989e-07};
  std::vector<float> f(64);
  rope_inv_freq(f.data(), 128, 500000.0f, "llama3", 8, 1, 4, 8192);
  EXPECT_TRUE(test::all_close(f, want, 2e-6, 0));
}

TEST(RopeInvFreq, YarnMatchesTransformers) {
  // DeepSeek-V2-Lite's RoPE: rotary dim 64, theta 10000, yarn factor 40, original 4096, beta
  // 32 / 1; transformers 4.57.6's _compute_yarn_parameters (float32 torch). The ramp runs from
  // dim 10 to 23: below it the frequencies are kept, above it divided by 40.
  const std::vector<float> want = {
      1.000000000e+00, 7.498942018e-01, 5.623413324e-01, 4.216965139e-01, 3.162277639e-01,
      2.371373624e-01, 1.778279394e-01, 1.333521456e-01, 1.000000015e-01, 7.498941571e-02,
      5.623412877e-02, 3.900692612e-02, 2.687936090e-02, 1.837814413e-02, 1.244795602e-02,
      8.334509097e-03, 5.500000436e-03, 3.561997321e-03, 2.249365207e-03, 1.370513462e-03,
      7.905694074e-04, 4.149904125e-04, 1.778279402e-04, 3.333803397e-05, 2.499999937e-05,
      1.874735426e-05, 1.405853254e-05, 1.054241238e-05, 7.905694474e-06, 5.928434348e-06,
      4.445698323e-06, 3.333803534e-06};
  std::vector<float> f(32);
  rope_inv_freq_yarn(f.data(), 64, 10000.0f, 40, 4096, 32, 1, true);
  EXPECT_TRUE(test::all_close(f, want, 2e-6, 0));
  EXPECT_THROW(rope_inv_freq_yarn(f.data(), 64, 1e4f, 40, 0, 32, 1, true), ConfigError);
  EXPECT_THROW(rope_inv_freq_yarn(f.data(), 64, 1e4f, -1, 4096, 32, 1, true), ConfigError);
}

TEST(RopeInvFreq, RejectsBadConfig) {
  std::vector<float> f(8);
  EXPECT_THROW(rope_inv_freq(f.data(), 8, 1e4f, "yarn", 2, 0, 0, 0), ConfigError);
  EXPECT_THROW(rope_inv_freq(f.data(), 7, 1e4f, "default", 1, 0, 0, 0), ConfigError);
  EXPECT_THROW(rope_inv_freq(f.data(), 8, 1e4f, "llama3", 8, 4, 1, 8192), ConfigError);
}

// Direct evaluation of HF apply_rotary_pos_emb (rotate-half) and GPT-J's rotate_every_two.
std::vector<double> rotate_direct(const std::vector<float>& x, int pos, int head_dim,
                                  int rotary_dim, const std::vector<float>& inv_freq,
                                  RopeStyle style) {
  std::vector<double> y(x.begin(), x.end());
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];
    const int a = style == RopeStyle::kRotateHalf ? i : 2 * i;
    const int b = style == RopeStyle::kRotateHalf ? i + half : 2 * i + 1;
    y[static_cast<size_t>(a)] =
        x[static_cast<size_t>(a)] * std::cos(angle) - x[static_cast<size_t>(b)] * std::sin(angle);
    y[static_cast<size_t>(b)] =
        x[static_cast<size_t>(b)] * std::cos(angle) + x[static_cast<size_t>(a)] * std::sin(angle);
  }
  return y;
}

TEST(Rope, ReferenceMatchesDirectFormula) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved}) {
    for (auto [head_dim, rotary_dim] : {std::pair{8, 8}, {10, 4}, {64, 64}, {40, 24}}) {
      const int heads = 3;
      const std::vector<int32_t> positions = {0, 1, 7, 4095};
      std::vector<float> inv(static_cast<size_t>(rotary_dim / 2));
      rope_inv_freq(inv.data(), rotary_dim, 10000.0f, "default", 1, 0, 0, 0);
      std::vector<float> x(positions.size() * heads * static_cast<size_t>(head_dim));
      for (auto& v : x) v = dist(rng);
      std::vector<float> want;
      for (size_t t = 0; t < positions.size(); ++t)
        for (int h = 0; h < heads; ++h) {
          const auto* xh = x.data() + (t * heads + static_cast<size_t>(h)) * head_dim;
          const auto y =
              rotate_direct({xh, xh + head_dim}, positions[t], head_dim, rotary_dim, inv, style);
          want.insert(want.end(), y.begin(), y.end());
        }
      for (const auto& variant : rope_variants()) {
        if (!variant.supported()) continue;
        std::vector<float> got = x;
        variant.fn(got.data(), positions.data(), 4, heads, head_dim, rotary_dim, inv.data(), style);
        EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6))
            << variant.name << " head_dim " << head_dim << " rotary " << rotary_dim;
      }
      std::vector<float> got = x;
      rope(got.data(), positions.data(), 4, heads, head_dim, rotary_dim, inv.data(), style);
      EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
    }
  }
}

}  // namespace
}  // namespace lmstack::kernels
