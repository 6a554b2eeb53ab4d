// GRPO against tools/ref/gen_rl_golden.py (PyTorch float64 autograd, each sequence run alone):
// advantages, old log-probs, and per optimizer step the loss, KL, clip fraction and gradient
// norm of 2 epochs x 2 mini-batches on fixed rollouts, then the final weights; a sequence-mean
// update; group advantages by hand. Regenerate: /work/venv/bin/python tools/ref/gen_rl_golden.py
// --out tests/data/rl. About 1 s.
#include "lmstack/rl/grpo.h"

#include <gtest/gtest.h>

#include "lmstack/core/json.h"
#include "lmstack/model/safetensors.h"
#include "rl_fixtures.h"

namespace lmstack::rl {
namespace {

struct Golden {
  Json j;
  std::vector<Rollout> rollouts;
  GrpoConfig config;
};

Golden load_golden() {
  Golden g;
  g.j = read_json_file(test::source_path("tests/data/rl/grpo.json"));
  for (const Json& r : g.j["rollouts"]) {
    Rollout x;
    x.group = r["group"].get<int>();
    x.prompt = r["prompt"].get<std::vector<int32_t>>();
    x.response = r["response"].get<std::vector<int32_t>>();
    x.reward = r["reward"].get<double>();
    g.rollouts.push_back(x);
  }
  const Json& hp = g.j["hparams"];
  g.config.loss = {hp["clip_eps"].get<float>(), hp["kl_coef"].get<float>(), hp["tau"].get<float>()};
  g.config.adv_eps = hp["adv_eps"].get<float>();
  return g;
}

void expect_series(const std::vector<double>& got, const Json& want, double rtol, double atol,
                   const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double w = want[i].get<double>();
    EXPECT_NEAR(got[i], w, atol + rtol * std::abs(w)) << what << " at update " << i
                                                      << "; regenerate: python "
                                                         "tools/ref/gen_rl_golden.py";
  }
}

TEST(GrpoGolden, TokenMeanTwoEpochsTwoMinibatches) {
  Golden g = load_golden();
  g.config.epochs = g.j["hparams"]["epochs"].get<int>();
  g.config.minibatches = g.j["hparams"]["minibatches"].get<int>();
  ThreadPool pool(2);
  auto s = test_fixtures::make_session(pool);
  const int group = g.j["hparams"]["group_size"].get<int>();
  const UpdateStats st = grpo_update(*s, g.rollouts, group, g.config);
  const Json& want = g.j["token_mean"];
  EXPECT_TRUE(
      test::all_close(st.advantages, want["advantages"].get<std::vector<float>>(), 1e-5, 1e-5));
  for (size_t i = 0; i < g.rollouts.size(); ++i)
    EXPECT_TRUE(test::all_close(st.old_logprobs[i],
                                want["old_logprobs"][i].get<std::vector<float>>(), 1e-5, 1e-5))
        << "rollout " << i;
  expect_series(st.losses, want["losses"], 1e-4, 1e-5, "loss");
  expect_series(st.kls, want["kls"], 1e-4, 1e-5, "kl");
  expect_series(st.clip_fracs, want["clip_fracs"], 0, 1e-9, "clip fraction");
  expect_series(st.grad_norms, want["grad_norms"], 1e-4, 1e-6, "grad norm");
  // A clipped token and a nonzero KL are both exercised, or the golden tests less than it says.
  EXPECT_GT(want["clip_fracs"][2].get<double>(), 0);
  EXPECT_GT(want["kls"][0].get<double>(), 0.01);
  const model::SafetensorsFile final_w(test::source_path("tests/data/rl/grpo_final.safetensors"));
  for (auto& [name, t] : model::to_hf_tensors(s->config(), s->policy().master()))
    EXPECT_TRUE(
        test::all_close(t.to_f32_vector(), final_w.tensor(name).to_f32_vector(), 1e-4, 2e-5))
        << name;
}

TEST(GrpoGolden, SequenceMeanUpdate) {
  Golden g = load_golden();
  g.config.agg = LossAgg::kSeqMean;
  ThreadPool pool(2);
  auto s = test_fixtures::make_session(pool);
  const UpdateStats st =
      grpo_update(*s, g.rollouts, g.j["hparams"]["group_size"].get<int>(), g.config);
  expect_series(st.losses, g.j["seq_mean"]["losses"], 1e-4, 1e-6, "seq-mean loss");
  expect_series(st.grad_norms, g.j["seq_mean"]["grad_norms"], 1e-4, 1e-6, "seq-mean grad norm");
}

TEST(Grpo, GroupAdvantagesByHand) {
  // Group 1: rewards 0, 1, 1, 0 → mean 0.5, unbiased std sqrt(1/3); group 2 constant → 0.
  const std::vector<float> a = group_advantages({0, 1, 1, 0, 2, 2, 2, 2}, 4, 1e-6f);
  const float s = 0.5f / (std::sqrt(1.0f / 3.0f) + 1e-6f);
  EXPECT_TRUE(test::all_close(a, {-s, s, s, -s, 0, 0, 0, 0}, 1e-6, 1e-6));
  EXPECT_TRUE(test::all_close(group_advantages({3}, 1, 1e-6f), {0}, 0, 0));
}

TEST(Grpo, K3IsZeroOnlyAtEqualLogprobs) {
  EXPECT_EQ(k3_mean({-1.0f, -2.0f}, {-1.0f, -2.0f}), 0.0);
  // q = ref − logp = 1: e − 2.
  EXPECT_NEAR(k3_mean({-2.0f}, {-1.0f}), std::exp(1.0) - 2.0, 1e-6);
}

}  // namespace
}  // namespace lmstack::rl
