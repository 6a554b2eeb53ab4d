// Gradient checks of every kernel in train/backward/: each analytic f32 backward is compared
// with central finite differences of an independent float64 forward written here (STYLE.md
// "gradient checks", ggml's grad mode). The scalar checked is L = Σ G ⊙ y for a random
// upstream gradient G, so dy = G. Shapes are tiny and odd so that tails and GQA are covered.
#include <cmath>
#include <functional>
#include <numbers>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "lmstack/kernels/ops.h"
#include "lmstack/train/backward/backward.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

using Vec = std::vector<double>;

std::vector<float> random_f32(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}
Vec to_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }
std::vector<float> to_f32(const Vec& v) { return {v.begin(), v.end()}; }

double dot(const Vec& a, const std::vector<float>& g) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * g[i];
  return s;
}

// Central differences of f with respect to every element of x.
std::vector<float> numeric_grad(Vec x, const std::function<double(const Vec&)>& f) {
  std::vector<float> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::fabs(x[i])), saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    g[i] = static_cast<float>((up - down) / (2 * h));
  }
  return g;
}

constexpr double kRtol = 2e-3, kAtol = 2e-4;

TEST(BackwardTest, Linear) {
  const int64_t m = 3, n = 5, k = 7;
  auto x = random_f32(m * k, 1), w = random_f32(n * k, 2), b = random_f32(n, 3),
       g = random_f32(m * n, 4);
  auto ref = [&](const Vec& xs, const Vec& ws, const Vec& bs) {
    Vec y(static_cast<size_t>(m * n));
    for (int64_t r = 0; r < m; ++r)
      for (int64_t o = 0; o < n; ++o) {
        double s = bs[static_cast<size_t>(o)];
        for (int64_t i = 0; i < k; ++i)
          s += xs[static_cast<size_t>(r * k + i)] * ws[static_cast<size_t>(o * k + i)];
        y[static_cast<size_t>(r * n + o)] = s;
      }
    return dot(y, g);
  };
  ThreadPool pool(2);
  std::vector<float> dx(x.size(), 0.5f), dw(w.size(), 0.0f), db(b.size(), 0.0f);
  linear_backward(pool, dx.data(), dw.data(), db.data(), g.data(), x.data(),
                  Tensor::from_f32({n, k}, w), m);
  for (float& v : dx) v -= 0.5f;  // accumulates onto what was there
  EXPECT_TRUE(test::all_close(
      dx, numeric_grad(to_f64(x), [&](const Vec& v) { return ref(v, to_f64(w), to_f64(b)); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      dw, numeric_grad(to_f64(w), [&](const Vec& v) { return ref(to_f64(x), v, to_f64(b)); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      db, numeric_grad(to_f64(b), [&](const Vec& v) { return ref(to_f64(x), to_f64(w), v); }),
      kRtol, kAtol));
}

TEST(BackwardTest, EmbeddingWithRepeatedIds) {
  const int64_t vocab = 6, dim = 4;
  const std::vector<int32_t> ids = {2, 0, 2, 5, 2};
  auto table = random_f32(vocab * dim, 5), g = random_f32(ids.size() * dim, 6);
  auto ref = [&](const Vec& t) {
    Vec y;
    for (int32_t id : ids)
      for (int64_t i = 0; i < dim; ++i) y.push_back(t[static_cast<size_t>(id * dim + i)]);
    return dot(y, g);
  };
  std::vector<float> dt(table.size(), 0.0f);
  embedding_backward(dt.data(), g.data(), ids.data(), static_cast<int64_t>(ids.size()), dim);
  EXPECT_TRUE(test::all_close(dt, numeric_grad(to_f64(table), ref), kRtol, kAtol));
}

TEST(BackwardTest, RmsNorm) {
  const int64_t rows = 3, dim = 9;
  const float eps = 1e-5f;
  auto x = random_f32(rows * dim, 7), w = random_f32(dim, 8), g = random_f32(rows * dim, 9);
  auto ref = [&](const Vec& xs, const Vec& ws) {
    Vec y(xs.size());
    for (int64_t r = 0; r < rows; ++r) {
      double sq = 0;
      for (int64_t i = 0; i < dim; ++i)
        sq += xs[static_cast<size_t>(r * dim + i)] * xs[static_cast<size_t>(r * dim + i)];
      const double s = 1 / std::sqrt(sq / dim + eps);
      for (int64_t i = 0; i < dim; ++i)
        y[static_cast<size_t>(r * dim + i)] =
            xs[static_cast<size_t>(r * dim + i)] * s * ws[static_cast<size_t>(i)];
    }
    return dot(y, g);
  };
  std::vector<float> y(x.size()), rstd(rows), dx(x.size(), 0.0f), dw(dim, 0.0f);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), rows, dim, eps);
  std::vector<float> y_kernel(x.size());
  kernels::rmsnorm(y_kernel.data(), x.data(), w.data(), rows, dim, eps);
  EXPECT_TRUE(test::all_close(y, y_kernel, 1e-5, 1e-6));
  rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), rows, dim);
  EXPECT_TRUE(test::all_close(
      dx, numeric_grad(to_f64(x), [&](const Vec& v) { return ref(v, to_f64(w)); }), kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      dw, numeric_grad(to_f64(w), [&](const Vec& v) { return ref(to_f64(x), v); }), kRtol, kAtol));
}

TEST(BackwardTest, LayerNorm) {
  const int64_t rows = 3, dim = 7;
  const float eps = 1e-5f;
  auto x = random_f32(rows * dim, 10), gm = random_f32(dim, 11), bt = random_f32(dim, 12),
       g = random_f32(rows * dim, 13);
  auto ref = [&](const Vec& xs, const Vec& gs, const Vec& bs) {
    Vec y(xs.size());
    for (int64_t r = 0; r < rows; ++r) {
      const double* row = &xs[static_cast<size_t>(r * dim)];
      double mu = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mu += row[i] / dim;
      for (int64_t i = 0; i < dim; ++i) var += (row[i] - mu) * (row[i] - mu) / dim;
      for (int64_t i = 0; i < dim; ++i)
        y[static_cast<size_t>(r * dim + i)] =
            (row[i] - mu) / std::sqrt(var + eps) * gs[static_cast<size_t>(i)] +
            bs[static_cast<size_t>(i)];
    }
    return dot(y, g);
  };
  std::vector<float> y(x.size()), mean(rows), rstd(rows), dx(x.size(), 0.0f), dg(dim, 0.0f),
      db(dim, 0.0f), y_kernel(x.size());
  layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), gm.data(), bt.data(), rows, dim,
                    eps);
  kernels::layernorm(y_kernel.data(), x.data(), gm.data(), bt.data(), rows, dim, eps);
  EXPECT_TRUE(test::all_close(y, y_kernel, 1e-5, 1e-5));
  layernorm_backward(dx.data(), dg.data(), db.data(), g.data(), x.data(), gm.data(), mean.data(),
                     rstd.data(), rows, dim);
  EXPECT_TRUE(test::all_close(
      dx, numeric_grad(to_f64(x), [&](const Vec& v) { return ref(v, to_f64(gm), to_f64(bt)); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      dg, numeric_grad(to_f64(gm), [&](const Vec& v) { return ref(to_f64(x), v, to_f64(bt)); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      db, numeric_grad(to_f64(bt), [&](const Vec& v) { return ref(to_f64(x), to_f64(gm), v); }),
      kRtol, kAtol));
}

TEST(BackwardTest, Rope) {
  const int64_t tokens = 3;
  const int heads = 2, head_dim = 6;
  const std::vector<int32_t> pos = {0, 7, 30};
  std::vector<float> inv(head_dim / 2);
  kernels::rope_inv_freq(inv.data(), head_dim, 10000.0f, "default", 1, 1, 4, 8192);
  auto x = random_f32(tokens * heads * head_dim, 14), g = random_f32(x.size(), 15);
  auto ref = [&](const Vec& xs) {
    Vec y(xs.size());
    const int half = head_dim / 2;
    for (int64_t t = 0; t < tokens; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < half; ++i) {
          const double ang = static_cast<double>(static_cast<float>(pos[static_cast<size_t>(t)]) *
                                                 inv[static_cast<size_t>(i)]);
          const size_t a = static_cast<size_t>((t * heads + h) * head_dim + i), b = a + half;
          y[a] = xs[a] * std::cos(ang) - xs[b] * std::sin(ang);
          y[b] = xs[b] * std::cos(ang) + xs[a] * std::sin(ang);
        }
    return dot(y, g);
  };
  std::vector<float> dx = g;
  rope_backward(dx.data(), pos.data(), tokens, heads, head_dim, inv.data());
  EXPECT_TRUE(test::all_close(dx, numeric_grad(to_f64(x), ref), kRtol, kAtol));
}

// float64 causal attention with GQA, the layout of attention_forward.
Vec attention_ref(const Vec& q, const Vec& k, const Vec& v, const AttentionDims& d) {
  Vec out(q.size(), 0.0);
  const int group = d.heads / d.kv_heads, dh = d.head_dim;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int h = 0; h < d.heads; ++h)
      for (int64_t t = 0; t < d.seq; ++t) {
        // Under a sliding window the keys before `first` are masked (score -inf, weight 0).
        const int64_t first = d.window > 0 ? std::max<int64_t>(0, t - d.window + 1) : 0;
        std::vector<double> s(static_cast<size_t>(t + 1), -INFINITY);
        double mx = -1e300, sum = 0;
        auto qi = [&](int64_t tt, int i) {
          return q[static_cast<size_t>(((b * d.seq + tt) * d.heads + h) * dh + i)];
        };
        auto kv = [&](const Vec& m, int64_t tt, int i) {
          return m[static_cast<size_t>(((b * d.seq + tt) * d.kv_heads + h / group) * dh + i)];
        };
        for (int64_t j = first; j <= t; ++j) {
          double acc = 0;
          for (int i = 0; i < dh; ++i) acc += qi(t, i) * kv(k, j, i);
          s[static_cast<size_t>(j)] = acc * d.scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int i = 0; i < dh; ++i) {
          double acc = 0;
          for (int64_t j = 0; j <= t; ++j) acc += s[static_cast<size_t>(j)] / sum * kv(v, j, i);
          out[static_cast<size_t>(((b * d.seq + t) * d.heads + h) * dh + i)] = acc;
        }
      }
  return out;
}

class AttentionWindow : public ::testing::TestWithParam<int> {};

TEST_P(AttentionWindow, CausalAttentionGqa) {
  AttentionDims d{.batch = 2, .seq = 5, .heads = 4, .kv_heads = 2, .head_dim = 3};
  d.scale = 1.0f / std::sqrt(3.0f);
  d.window = GetParam();
  const size_t nq = static_cast<size_t>(d.batch * d.seq * d.heads * d.head_dim);
  const size_t nkv = static_cast<size_t>(d.batch * d.seq * d.kv_heads * d.head_dim);
  auto q = random_f32(nq, 16), k = random_f32(nkv, 17), v = random_f32(nkv, 18),
       g = random_f32(nq, 19);
  ThreadPool pool(2);
  std::vector<float> out(nq);
  attention_forward(pool, out.data(), q.data(), k.data(), v.data(), d);
  EXPECT_TRUE(
      test::all_close(out, to_f32(attention_ref(to_f64(q), to_f64(k), to_f64(v), d)), 1e-5, 1e-6));
  std::vector<float> dq(nq, 0.0f), dk(nkv, 0.0f), dv(nkv, 0.0f);  // accumulated into
  attention_backward(pool, dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                     out.data(), d);
  const Vec q64 = to_f64(q), k64 = to_f64(k), v64 = to_f64(v);
  EXPECT_TRUE(test::all_close(
      dq, numeric_grad(q64, [&](const Vec& x) { return dot(attention_ref(x, k64, v64, d), g); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      dk, numeric_grad(k64, [&](const Vec& x) { return dot(attention_ref(q64, x, v64, d), g); }),
      kRtol, kAtol));
  EXPECT_TRUE(test::all_close(
      dv, numeric_grad(v64, [&](const Vec& x) { return dot(attention_ref(q64, k64, x, d), g); }),
      kRtol, kAtol));
}

// 0: full causal; 1: each token alone (the probabilities are one-hot); 2, 3: sliding windows
// shorter than the 5 tokens.
INSTANTIATE_TEST_SUITE_P(Windows, AttentionWindow, ::testing::Values(0, 1, 2, 3));

TEST(BackwardTest, SwiGlu) {
  const int64_t n = 11;
  auto gate = random_f32(n, 20, 4.0f), up = random_f32(n, 21), g = random_f32(n, 22);
  auto ref = [&](const Vec& gs, const Vec& us) {
    Vec y(gs.size());
    for (size_t i = 0; i < gs.size(); ++i) y[i] = gs[i] / (1 + std::exp(-gs[i])) * us[i];
    return dot(y, g);
  };
  std::vector<float> dgate(n), dup(n);
  swiglu_backward(dgate.data(), dup.data(), g.data(), gate.data(), up.data(), n);
  EXPECT_TRUE(test::all_close(
      dgate, numeric_grad(to_f64(gate), [&](const Vec& v) { return ref(v, to_f64(up)); }), kRtol,
      kAtol));
  EXPECT_TRUE(test::all_close(
      dup, numeric_grad(to_f64(up), [&](const Vec& v) { return ref(to_f64(gate), v); }), kRtol,
      kAtol));
}

TEST(BackwardTest, GeluTanh) {
  const int64_t n = 13;
  auto x = random_f32(n, 23, 4.0f), g = random_f32(n, 24);
  auto ref = [&](const Vec& xs) {
    Vec y(xs.size());
    const double k = std::sqrt(2 / std::numbers::pi);
    for (size_t i = 0; i < xs.size(); ++i)
      y[i] = 0.5 * xs[i] * (1 + std::tanh(k * (xs[i] + 0.044715 * xs[i] * xs[i] * xs[i])));
    return dot(y, g);
  };
  std::vector<float> dx(n);
  gelu_tanh_backward(dx.data(), g.data(), x.data(), n);
  EXPECT_TRUE(test::all_close(dx, numeric_grad(to_f64(x), ref), kRtol, kAtol));
}

TEST(BackwardTest, CrossEntropyFusedWithSoftmax) {
  const int64_t rows = 4, vocab = 9;
  const std::vector<int32_t> targets = {3, 0, 8, 3};
  const float scale = 0.25f;
  auto logits = random_f32(rows * vocab, 25, 3.0f);
  auto ref = [&](const Vec& z) {
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(z[static_cast<size_t>(r * vocab + i)]);
      total += std::log(sum) - z[static_cast<size_t>(r * vocab + targets[static_cast<size_t>(r)])];
    }
    return total * scale;
  };
  std::vector<float> losses(rows), grad = logits;
  const double loss = cross_entropy_loss(logits.data(), losses.data(), targets.data(), rows, vocab);
  EXPECT_NEAR(loss * scale, ref(to_f64(logits)), 1e-5);
  const double fused = cross_entropy_forward_backward(grad.data(), losses.data(), targets.data(),
                                                      rows, vocab, scale);
  EXPECT_DOUBLE_EQ(fused, loss);
  EXPECT_TRUE(test::all_close(grad, numeric_grad(to_f64(logits), ref), kRtol, kAtol));
  const std::vector<int32_t> bad = {3, 0, 9, 3};
  EXPECT_THROW(cross_entropy_loss(logits.data(), losses.data(), bad.data(), rows, vocab),
               RequestError);
}

}  // namespace
}  // namespace lmstack::train
