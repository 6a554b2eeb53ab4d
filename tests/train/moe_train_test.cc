// The MoE MLP backward (train/moe_train.cc) against central finite differences of an
// independent float64 forward written here from the routing rules (selection held fixed: top-k
// is piecewise constant), for Mixtral, Qwen2-MoE (unnormalized + gated shared expert),
// DeepSeek-V2 (softmax, group-limited, scaled) and DeepSeek-V3 (sigmoid + bias, groups,
// renormalized, scaled) routers; the load-balancing loss's value and gradient; the V3 bias
// update and the per-expert counts by hand.
#include <cmath>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "lmstack/train/moe_train.h"

namespace lmstack::train {
namespace {

using Vec = std::vector<double>;
constexpr int kRows = 7, kC = 6;

struct MoeCase {
  model::ModelConfig config;
  std::map<std::string, Vec> p;  // f64 parameters by name ("router", "e0.gate", ...)
  std::map<std::string, Shape> shapes;
};

MoeCase make_setup(const std::string& kind) {
  MoeCase s;
  model::ModelConfig& c = s.config;
  model::MoeConfig& m = c.moe;
  c.hidden_size = kC, c.num_layers = 1;
  m.num_experts = kind == "v2" || kind == "v3" ? 8 : 4, m.top_k = 2, m.expert_intermediate = 5;
  m.sparse = {1};
  if (kind == "qwen2") m.norm_topk_prob = false, m.shared_intermediate = 3, m.shared_gate = true;
  if (kind == "v2") m.norm_topk_prob = false, m.num_groups = 4, m.topk_groups = 2;
  if (kind == "v2" || kind == "v3") m.routed_scale = 2.5f, m.shared_intermediate = 4;
  if (kind == "v3") {
    m.score = model::RouterScore::kSigmoid, m.score_bias = true;
    m.num_groups = 4, m.topk_groups = 2, m.group_top2_sum = true;
  }
  std::mt19937 rng(7);
  std::normal_distribution<double> nd(0, 0.5);
  auto add = [&](const std::string& n, Shape sh) {
    Vec v(static_cast<size_t>(sh.numel()));
    for (double& x : v) x = static_cast<float>(nd(rng));  // f32-representable
    s.p[n] = v, s.shapes[n] = sh;
  };
  const int64_t E = m.num_experts, F = m.expert_intermediate, S = m.shared_intermediate;
  add("router", Shape{E, kC});
  for (int e = 0; e < E; ++e) {
    const std::string x = "e" + std::to_string(e) + ".";
    add(x + "gate", Shape{F, kC}), add(x + "up", Shape{F, kC}), add(x + "down", Shape{kC, F});
  }
  if (S > 0) add("s.gate", Shape{S, kC}), add("s.up", Shape{S, kC}), add("s.down", Shape{kC, S});
  if (m.shared_gate) add("s.sg", Shape{1, kC});
  if (m.score_bias) add("bias", Shape{E});
  add("h", Shape{kRows, kC}), add("dy", Shape{kRows, kC});
  return s;
}

Tensor f32(const Vec& v, const Shape& sh) {
  return Tensor::from_f32(sh, std::vector<float>(v.begin(), v.end()));
}

// The f32 weights of `s` (or zeroed tensors of the same shapes, for gradients).
model::MoeLayerWeights weights(const MoeCase& s, bool zero) {
  model::MoeLayerWeights w;
  auto t = [&](const std::string& n) {
    return zero ? Tensor::zeros(s.shapes.at(n), DType::kF32) : f32(s.p.at(n), s.shapes.at(n));
  };
  w.router = t("router");
  for (int e = 0; e < s.config.moe.num_experts; ++e) {
    const std::string x = "e" + std::to_string(e) + ".";
    w.w_gate.push_back(t(x + "gate")), w.w_up.push_back(t(x + "up")),
        w.w_down.push_back(t(x + "down"));
  }
  if (s.p.count("s.gate"))
    w.shared_gate = t("s.gate"), w.shared_up = t("s.up"), w.shared_down = t("s.down");
  if (s.p.count("s.sg")) w.shared_expert_gate = t("s.sg");
  if (s.p.count("bias")) w.score_bias = t("bias");
  return w;
}

// y[rows(W)] = W[out, in] · x[in], f64.
Vec matvec(const Vec& w, const double* x, int64_t out, int64_t in) {
  Vec y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      y[static_cast<size_t>(o)] += w[static_cast<size_t>(o * in + i)] * x[i];
  return y;
}

Vec swiglu64(const std::map<std::string, Vec>& p, const std::string& pre, const double* x,
             int64_t f) {
  const Vec g = matvec(p.at(pre + "gate"), x, f, kC), u = matvec(p.at(pre + "up"), x, f, kC);
  Vec a(static_cast<size_t>(f));
  for (size_t i = 0; i < a.size(); ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  return matvec(p.at(pre + "down"), a.data(), kC, f);
}

// Σ dy ⊙ MoE(h) in f64 with the experts `chosen` [rows, k] held fixed.
double ref_objective(const MoeCase& s, const std::map<std::string, Vec>& p,
                     const std::vector<int32_t>& chosen) {
  const model::MoeConfig& m = s.config.moe;
  const int E = m.num_experts, k = m.top_k;
  double total = 0;
  for (int t = 0; t < kRows; ++t) {
    const double* h = p.at("h").data() + t * kC;
    const Vec z = matvec(p.at("router"), h, E, kC);
    Vec sc(z.size());
    const double mx = *std::max_element(z.begin(), z.end());
    double sum_exp = 0;
    for (double v : z) sum_exp += std::exp(v - mx);
    for (size_t e = 0; e < sc.size(); ++e)
      sc[e] = m.score == model::RouterScore::kSigmoid ? 1 / (1 + std::exp(-z[e]))
                                                      : std::exp(z[e] - mx) / sum_exp;
    double denom = 0;
    for (int j = 0; j < k; ++j)
      denom += sc[static_cast<size_t>(chosen[static_cast<size_t>(t * k + j)])];
    if (!m.norm_topk_prob) denom = 1;
    Vec out(kC, 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = chosen[static_cast<size_t>(t * k + j)];
      const Vec y = swiglu64(p, "e" + std::to_string(e) + ".", h, m.expert_intermediate);
      for (int c = 0; c < kC; ++c)
        out[static_cast<size_t>(c)] +=
            m.routed_scale * sc[static_cast<size_t>(e)] / denom * y[static_cast<size_t>(c)];
    }
    if (m.shared_intermediate > 0) {
      const Vec y = swiglu64(p, "s.", h, m.shared_intermediate);
      const double g = m.shared_gate ? 1 / (1 + std::exp(-matvec(p.at("s.sg"), h, 1, kC)[0])) : 1.0;
      for (int c = 0; c < kC; ++c) out[static_cast<size_t>(c)] += g * y[static_cast<size_t>(c)];
    }
    for (int c = 0; c < kC; ++c)
      total += p.at("dy")[static_cast<size_t>(t * kC + c)] * out[static_cast<size_t>(c)];
  }
  return total;
}

// The analytic gradient of `name` from the model's backward.
Vec analytic(const model::MoeLayerWeights& g, const std::vector<float>& dh, const std::string& n) {
  const Tensor* t = nullptr;
  if (n == "h") return Vec(dh.begin(), dh.end());
  if (n == "router") t = &g.router;
  if (n == "s.gate") t = &g.shared_gate;
  if (n == "s.up") t = &g.shared_up;
  if (n == "s.down") t = &g.shared_down;
  if (n == "s.sg") t = &g.shared_expert_gate;
  if (n[0] == 'e') {
    const size_t e = static_cast<size_t>(std::stoi(n.substr(1)));
    const std::string f = n.substr(n.find('.') + 1);
    t = f == "gate" ? &g.w_gate[e] : f == "up" ? &g.w_up[e] : &g.w_down[e];
  }
  const std::vector<float> v = t->to_f32_vector();
  return Vec(v.begin(), v.end());
}

class MoeBackward : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeBackward, MatchesFiniteDifferencesOfAFloat64Forward) {
  const MoeCase s = make_setup(GetParam());
  const model::ModelConfig& c = s.config;
  ThreadPool pool(1);
  const model::MoeLayerWeights w = weights(s, false);
  model::MoeLayerWeights g = weights(s, true);
  MoeActs a;
  a.allocate(c, kRows);
  std::vector<float> h(s.p.at("h").begin(), s.p.at("h").end()),
      dy(s.p.at("dy").begin(), s.p.at("dy").end()), out(h.size(), 0.0f), dh(h.size(), 0.0f);
  std::vector<int64_t> tokens(static_cast<size_t>(c.moe.num_experts));
  std::vector<double> probs(tokens.size(), 0.0);
  moe_mlp_forward(pool, out.data(), h.data(), kRows, c, w, a, tokens.data(), probs.data());
  MoeGradScratch scratch;
  scratch.allocate(c, kRows);
  moe_mlp_backward(pool, dh.data(), g, dy.data(), h.data(), kRows, c, w, a, nullptr, scratch);
  // The forward's value is the f64 one (f32 rounding apart).
  double fwd = 0;
  for (size_t i = 0; i < out.size(); ++i) fwd += static_cast<double>(out[i]) * dy[i];
  EXPECT_NEAR(fwd, ref_objective(s, s.p, a.routing.chosen), 1e-4);
  for (const auto& [name, values] : s.p) {
    if (name == "dy" || name == "bias") continue;
    const Vec got = analytic(g, dh, name);
    for (size_t i = 0; i < values.size(); ++i) {
      std::map<std::string, Vec> p = s.p;
      const double eps = 1e-6;
      p[name][i] = values[i] + eps;
      const double up = ref_objective(s, p, a.routing.chosen);
      p[name][i] = values[i] - eps;
      const double want = (up - ref_objective(s, p, a.routing.chosen)) / (2 * eps);
      EXPECT_NEAR(got[i], want, 2e-4 + 1e-3 * std::abs(want)) << name << "[" << i << "]";
    }
  }
  // The V3 bias moved the selection: some row's chosen set differs from the unbiased top-k.
  if (c.moe.score_bias) {
    model::MoeRouting plain;
    model::MoeConfig nobias = c.moe;
    model::moe_route(nobias, a.logits.data(), kRows, nullptr, plain);
    EXPECT_NE(plain.chosen, a.routing.chosen);
  }
}

INSTANTIATE_TEST_SUITE_P(Routers, MoeBackward, ::testing::Values("mixtral", "qwen2", "v2", "v3"));

TEST(MoeAuxLoss, ValueAndGradientMatchFiniteDifferences) {
  // 2 layers x 3 rows, E = 3: tokens (over k = 2 slots) and Σ softmax by hand.
  const int E = 3;
  const std::vector<int64_t> tokens = {5, 4, 3};  // 12 = 6 rows x 2 slots
  const std::vector<double> prob_sum = {2.5, 2.0, 1.5};
  std::vector<float> dprob;
  const double aux = moe_aux_loss(tokens.data(), prob_sum.data(), E, 6, 0.1, dprob);
  // E · Σ (t_e / 6)(p_e / 6) = 3 · (12.5 + 8 + 4.5) / 36
  EXPECT_NEAR(aux, 3.0 * 25.0 / 36.0, 1e-12);
  EXPECT_NEAR(dprob[0], 0.1 * 3 * (5.0 / 6) / 6, 1e-7);
  // Router path: dlogits of coef · aux at fixed counts = FD of coef·E·Σ f_e·mean softmax_e.
  model::MoeConfig cfg;
  cfg.num_experts = E, cfg.top_k = 2;
  std::vector<float> logits = {0.3f, -0.2f, 0.9f, 1.1f, 0.0f, -0.7f};  // 2 rows
  model::MoeRouting r;
  model::moe_route(cfg, logits.data(), 2, nullptr, r);
  std::vector<float> dlog(logits.size()), dw(4, 0.0f);
  moe_router_backward(dlog.data(), dw.data(), logits.data(), r, 2, cfg, dprob.data());
  auto objective = [&](const std::vector<double>& z) {
    double o = 0;
    for (int t = 0; t < 2; ++t) {
      double se = 0;
      for (int e = 0; e < E; ++e) se += std::exp(z[static_cast<size_t>(t * E + e)]);
      for (int e = 0; e < E; ++e)
        o += dprob[static_cast<size_t>(e)] * std::exp(z[static_cast<size_t>(t * E + e)]) / se;
    }
    return o;
  };
  for (size_t i = 0; i < logits.size(); ++i) {
    std::vector<double> z(logits.begin(), logits.end());
    z[i] += 1e-6;
    const double up = objective(z);
    z[i] -= 2e-6;
    EXPECT_NEAR(dlog[i], (up - objective(z)) / 2e-6, 1e-6) << i;
  }
}

TEST(MoeScoreBias, UpdateMovesTowardTheMeanLoad) {
  // Loads {6, 2, 4, 4}: mean 4, so e0 (overloaded) falls, e1 rises, e2 and e3 stay.
  std::vector<float> bias = {0.5f, -0.25f, 0.0f, 1.0f};
  const std::vector<int64_t> load = {6, 2, 4, 4};
  moe_update_score_bias(bias.data(), load.data(), 4, 0.125f);
  EXPECT_EQ(bias, (std::vector<float>{0.375f, -0.125f, 0.0f, 1.0f}));
}

TEST(MoeForward, CountsEveryRowOfEachExpertOnce) {
  const MoeCase s = make_setup("mixtral");
  ThreadPool pool(1);
  MoeActs a;
  a.allocate(s.config, kRows);
  std::vector<float> h(s.p.at("h").begin(), s.p.at("h").end()), out(h.size(), 0.0f);
  std::vector<int64_t> tokens(4);
  std::vector<double> probs(4, 0.0);
  moe_mlp_forward(pool, out.data(), h.data(), kRows, s.config, weights(s, false), a, tokens.data(),
                  probs.data());
  std::vector<int64_t> want(4, 0);
  for (int32_t e : a.routing.chosen) ++want[static_cast<size_t>(e)];
  EXPECT_EQ(tokens, want);
  double total = 0;
  for (double p : probs) total += p;
  EXPECT_NEAR(total, kRows, 1e-5);  // each row's softmax sums to 1
}

}  // namespace
}  // namespace lmstack::train
