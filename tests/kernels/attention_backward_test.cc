// causal_attention and causal_attention_backward: the forward against an f64 evaluation, and
// dQ, dK, dV against finite differences of it (f64), for MHA, GQA and MQA, several sequences
// and an odd head dim, with and without a sliding window (1, 2, 3 keys); gradients accumulate
// onto nonzero buffers.
// Legend: B sequences, T tokens, H query heads, Hkv kv heads, D head dim.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grad_check.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/ops_ref.h"
#include "lmstack/kernels/ops_variants.h"

namespace lmstack::kernels {
namespace {

using test::Vec64;

struct Shape {
  int64_t b, t;
  int h, hkv, d;
  int window = 0;  // 0: full causal
};

// out[B, T, H, D] of causal attention in f64; under a window W query i sees i - W < j <= i.
Vec64 attention64(const Shape& s, const Vec64& q, const Vec64& k, const Vec64& v, double scale) {
  Vec64 out(q.size(), 0.0);
  const int g = s.h / s.hkv;
  for (int64_t b = 0; b < s.b; ++b)
    for (int64_t i = 0; i < s.t; ++i)
      for (int h = 0; h < s.h; ++h) {
        const size_t qi = static_cast<size_t>(((b * s.t + i) * s.h + h) * s.d);
        const int64_t first = s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0;
        Vec64 sc(static_cast<size_t>(i + 1), -INFINITY);
        for (int64_t j = first; j <= i; ++j) {
          const size_t kj = static_cast<size_t>(((b * s.t + j) * s.hkv + h / g) * s.d);
          sc[static_cast<size_t>(j)] = 0;
          for (int e = 0; e < s.d; ++e) sc[static_cast<size_t>(j)] += q[qi + e] * k[kj + e] * scale;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (auto& x : sc) sum += (x = std::exp(x - m));
        for (int64_t j = first; j <= i; ++j) {
          const size_t vj = static_cast<size_t>(((b * s.t + j) * s.hkv + h / g) * s.d);
          for (int e = 0; e < s.d; ++e) out[qi + e] += sc[static_cast<size_t>(j)] / sum * v[vj + e];
        }
      }
  return out;
}

TEST(CausalAttention, ForwardAndBackwardMatchF64) {
  ThreadPool pool(2);
  for (const Shape& s :
       {Shape{2, 5, 2, 2, 4}, Shape{1, 7, 4, 2, 3}, Shape{2, 4, 3, 1, 8}, Shape{2, 6, 2, 2, 4, 2},
        Shape{1, 7, 4, 2, 3, 3}, Shape{1, 5, 2, 1, 5, 1}}) {
    SCOPED_TRACE("window " + std::to_string(s.window));
    const size_t nq = static_cast<size_t>(s.b * s.t * s.h * s.d);
    const size_t nkv = static_cast<size_t>(s.b * s.t * s.hkv * s.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    const auto q = test::random_floats(nq, 1, -2, 2), k = test::random_floats(nkv, 2, -2, 2);
    const auto v = test::random_floats(nkv, 3), dout = test::random_floats(nq, 4);
    const Vec64 q64 = test::to64(q), k64 = test::to64(k), v64 = test::to64(v);
    std::vector<float> out(nq);
    causal_attention(pool, out.data(), q.data(), k.data(), v.data(), s.b, s.t, s.h, s.hkv, s.d,
                     scale, s.window);
    const Vec64 want = attention64(s, q64, k64, v64, scale);
    EXPECT_TRUE(test::all_close(out, {want.begin(), want.end()}, 1e-5, 1e-6));

    const auto dq0 = test::random_floats(nq, 5), dk0 = test::random_floats(nkv, 6),
               dv0 = test::random_floats(nkv, 7);
    const auto num_dq = test::numeric_grad(
        [&](const Vec64& at) { return attention64(s, at, k64, v64, scale); }, q64, dout);
    const auto num_dk = test::numeric_grad(
        [&](const Vec64& at) { return attention64(s, q64, at, v64, scale); }, k64, dout);
    const auto num_dv = test::numeric_grad(
        [&](const Vec64& at) { return attention64(s, q64, k64, at, scale); }, v64, dout);
    for (const auto& variant : causal_attention_backward_variants()) {
      if (!variant.supported()) continue;
      SCOPED_TRACE(variant.name);
      auto dq = dq0, dk = dk0, dv = dv0;
      variant.fn(pool, dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                 out.data(), s.b, s.t, s.h, s.hkv, s.d, scale, s.window);
      EXPECT_TRUE(test::grad_close(dq, dq0, num_dq)) << "dq H " << s.h << " Hkv " << s.hkv;
      EXPECT_TRUE(test::grad_close(dk, dk0, num_dk)) << "dk H " << s.h << " Hkv " << s.hkv;
      EXPECT_TRUE(test::grad_close(dv, dv0, num_dv)) << "dv H " << s.h << " Hkv " << s.hkv;
    }
  }
}

// Every vector variant against the reference on shapes with tails in T (not a multiple of 8
// or 16, and 1), D (odd, above one vector, and 192 as MLA pads to) and windows.
TEST(CausalAttention, BackwardVariantsMatchReference) {
  ThreadPool pool(2);
  for (const Shape& s : {Shape{2, 37, 4, 2, 19}, Shape{1, 1, 2, 1, 8}, Shape{1, 70, 2, 2, 32, 21},
                         Shape{1, 33, 2, 1, 192}, Shape{3, 17, 3, 3, 5, 1}}) {
    SCOPED_TRACE("T " + std::to_string(s.t) + " D " + std::to_string(s.d));
    const size_t nq = static_cast<size_t>(s.b * s.t * s.h * s.d);
    const size_t nkv = static_cast<size_t>(s.b * s.t * s.hkv * s.d);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    const auto q = test::random_floats(nq, 11, -2, 2), k = test::random_floats(nkv, 12, -2, 2);
    const auto v = test::random_floats(nkv, 13), dout = test::random_floats(nq, 14);
    std::vector<float> out(nq);
    causal_attention(pool, out.data(), q.data(), k.data(), v.data(), s.b, s.t, s.h, s.hkv, s.d,
                     scale, s.window);
    const auto dq0 = test::random_floats(nq, 15), dk0 = test::random_floats(nkv, 16),
               dv0 = test::random_floats(nkv, 17);
    auto want_dq = dq0, want_dk = dk0, want_dv = dv0;
    ref::causal_attention_backward(pool, want_dq.data(), want_dk.data(), want_dv.data(),
                                   dout.data(), q.data(), k.data(), v.data(), out.data(), s.b, s.t,
                                   s.h, s.hkv, s.d, scale, s.window);
    for (const auto& variant : causal_attention_backward_variants()) {
      if (!variant.supported()) continue;
      SCOPED_TRACE(variant.name);
      auto dq = dq0, dk = dk0, dv = dv0;
      variant.fn(pool, dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                 out.data(), s.b, s.t, s.h, s.hkv, s.d, scale, s.window);
      EXPECT_TRUE(test::all_close(dq, want_dq, 1e-4, 1e-5));
      EXPECT_TRUE(test::all_close(dk, want_dk, 1e-4, 1e-5));
      EXPECT_TRUE(test::all_close(dv, want_dv, 1e-4, 1e-5));
    }
  }
}

}  // namespace
}  // namespace lmstack::kernels
