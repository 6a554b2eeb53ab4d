// rope_backward: finite-difference check (f64) for both pair conventions with a partial
// rotary dim, and the round trip rope then rope_backward returning the input.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "grad_check.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::kernels {
namespace {

using test::Vec64;

TEST(RopeBackward, MatchesFiniteDifferences) {
  const int tokens = 3, heads = 2, head_dim = 10, rotary_dim = 6;
  const std::vector<int32_t> positions = {0, 5, 1234};
  std::vector<float> inv(rotary_dim / 2);
  rope_inv_freq(inv.data(), rotary_dim, 10000.0f, "default", 1, 0, 0, 0);
  for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved}) {
    const auto x = test::random_floats(static_cast<size_t>(tokens * heads * head_dim), 1);
    const auto dy = test::random_floats(x.size(), 2);
    auto f = [&](const Vec64& v) {
      Vec64 y = v;
      for (int t = 0; t < tokens; ++t)
        for (int h = 0; h < heads; ++h)
          for (int i = 0; i < rotary_dim / 2; ++i) {
            const int a = style == RopeStyle::kRotateHalf ? i : 2 * i;
            const int b = style == RopeStyle::kRotateHalf ? i + rotary_dim / 2 : 2 * i + 1;
            const double angle = static_cast<float>(positions[t]) * inv[i];
            const size_t base = (static_cast<size_t>(t) * heads + h) * head_dim;
            y[base + a] = v[base + a] * std::cos(angle) - v[base + b] * std::sin(angle);
            y[base + b] = v[base + b] * std::cos(angle) + v[base + a] * std::sin(angle);
          }
      return y;
    };
    std::vector<float> dx = dy;
    rope_backward(dx.data(), positions.data(), tokens, heads, head_dim, rotary_dim, inv.data(),
                  style);
    const std::vector<float> zeros(x.size(), 0.0f);
    EXPECT_TRUE(test::grad_close(dx, zeros, test::numeric_grad(f, test::to64(x), dy)));
    std::vector<float> round_trip = x;
    rope(round_trip.data(), positions.data(), tokens, heads, head_dim, rotary_dim, inv.data(),
         style);
    rope_backward(round_trip.data(), positions.data(), tokens, heads, head_dim, rotary_dim,
                  inv.data(), style);
    EXPECT_TRUE(test::all_close(round_trip, x, 1e-6, 1e-6));
  }
}

TEST(EmbeddingBackward, AccumulatesRowsForRepeatedIds) {
  const int64_t vocab = 6, width = 5;
  const std::vector<int32_t> ids = {2, 4, 2};
  const auto dout = test::random_floats(ids.size() * width, 3);
  auto dtable = test::random_floats(static_cast<size_t>(vocab * width), 4);
  auto want = dtable;
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t c = 0; c < width; ++c) want[ids[t] * width + c] += dout[t * width + c];
  embedding_backward(dtable.data(), dout.data(), ids.data(), 3, vocab, width);
  EXPECT_EQ(dtable, want);
}

}  // namespace
}  // namespace lmstack::kernels
