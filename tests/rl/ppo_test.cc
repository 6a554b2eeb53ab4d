// PPO's pieces by hand (GAE, the clipped value loss and its slope, the value head's gradient
// through one Adam step), and one update of the tiny llama over rollouts with a learnable
// reward: the value loss falls across epochs. About 1 s.
#include "lmstack/rl/ppo.h"

#include <gtest/gtest.h>

#include "rl_fixtures.h"

namespace lmstack::rl {
namespace {

TEST(Ppo, GaeByHand) {
  // γ = 1, λ = 0.9, V = (0.5, 0.2, 0.8), r = (0, 0, 1): δ = (−0.3, 0.6, 0.2),
  // A2 = 0.2, A1 = 0.6 + 0.9·0.2 = 0.78, A0 = −0.3 + 0.9·0.78 = 0.402.
  EXPECT_TRUE(test::all_close(gae({0, 0, 1}, {0.5f, 0.2f, 0.8f}, 1.0f, 0.9f), {0.402f, 0.78f, 0.2f},
                              1e-6, 1e-6));
  // γ = 0.5, λ = 1: A_t = Σ γ^l r_{t+l} − V_t (Monte-Carlo return minus the baseline).
  EXPECT_TRUE(test::all_close(gae({1, 2}, {0.25f, 1.0f}, 0.5f, 1.0f), {1.0f + 1.0f - 0.25f, 1.0f},
                              1e-6, 1e-6));
}

TEST(Ppo, ClippedValueLossByHand) {
  double dv = 0;
  // Inside the clip range both terms agree: ½(V − G)², slope V − G.
  EXPECT_NEAR(clipped_value_loss(1.1, 1.0, 2.0, 0.2f, &dv), 0.5 * 0.81, 1e-12);
  EXPECT_NEAR(dv, -0.9, 1e-12);
  // V moved past V_old + ε away from G: the clipped term (1.2 − 0)² = 1.44 is smaller than
  // (2 − 0)² = 4, so the unclipped term rules.
  EXPECT_NEAR(clipped_value_loss(2.0, 1.0, 0.0, 0.2f, &dv), 2.0, 1e-12);
  EXPECT_NEAR(dv, 2.0, 1e-12);
  // V moved past V_old − ε toward G = 0... from V_old = 1 to 0.1: the clipped value 0.8 is
  // farther from G, so the clipped term (0.64) rules, and it is flat in V.
  EXPECT_NEAR(clipped_value_loss(0.1, 1.0, 0.0, 0.2f, &dv), 0.5 * 0.64, 1e-7);  // ε is a float
  EXPECT_EQ(dv, 0.0);
}

TEST(Ppo, ValueHeadGradientAndAdamStepByHand) {
  ValueHead head(3, train::AdamWConfig{});
  PackedBatch b;
  b.batch = 1, b.seq = 2, b.first = {0}, b.length = {2};
  const std::vector<float> hidden = {0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.5f};
  // loss = Σ_k dv_k·V_k with dv fixed: ∂loss/∂w = Σ dv_k h_k; step with Adam moves w against it.
  head.accumulate_grad(hidden.data(), b, {1.0, -2.0});
  ThreadPool pool(1);
  head.step(pool, 0.1f);
  // Adam's first step is −lr·sign(g): g = (0.5 − 3, −1 − 0.5, 2 + 1) = (−2.5, −1.5, 3).
  const float* w = head.weight().data<float>();
  EXPECT_NEAR(w[0], 0.1f, 1e-6);
  EXPECT_NEAR(w[1], 0.1f, 1e-6);
  EXPECT_NEAR(w[2], -0.1f, 1e-6);
  const std::vector<float> v = head.values(hidden.data(), b);
  // bias moved by −lr·sign(1 − 2) = +0.1.
  EXPECT_NEAR(v[0], 0.1f * 0.5f + 0.1f * -1.0f - 0.1f * 2.0f + 0.1f, 1e-6);
}

TEST(Ppo, UpdateLowersTheValueLossAcrossEpochs) {
  ThreadPool pool(2);
  // A slow policy (the hidden states the head reads barely move) and no value clipping: the
  // head alone fits the fixed returns, so its loss must fall. (With clipping on, a value may
  // move only ε from its old value per batch, by design.)
  SessionOptions o = test_fixtures::golden_options();
  o.lr = 1e-5f;
  RlSession s(test_fixtures::policy_dir().config, test_fixtures::policy_dir().weights,
              test_fixtures::ref_dir().weights, pool, o);
  std::vector<Rollout> rollouts;
  for (int i = 0; i < 8; ++i) {
    Rollout r;
    r.group = i;
    r.prompt = {1 + i, 2 + i};
    r.response = {3 + i, 4 + i, 5};
    r.reward = i % 2;
    rollouts.push_back(r);
  }
  PpoConfig c;
  c.epochs = 6;
  c.minibatches = 1;
  c.value_lr = 3e-2f;
  c.value_clip = 1e6f;
  ValueHead head(s.config().hidden_size, s.options().adam);
  const PpoStats st = ppo_update(s, head, rollouts, c);
  ASSERT_EQ(st.value_losses.size(), 6u);
  EXPECT_LT(st.value_losses.back(), 0.7 * st.value_losses.front());
  EXPECT_GT(st.grad_norms.front(), 0);
  for (double g : st.grad_norms) EXPECT_TRUE(std::isfinite(g));
  EXPECT_EQ(st.clip_fracs.front(), 0.0);  // the first pass runs at ratio 1
}

}  // namespace
}  // namespace lmstack::rl
