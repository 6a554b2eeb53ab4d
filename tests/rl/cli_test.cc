// `lmstack rl` end to end through the binary on a tiny init-model llama: GRPO, PPO and DPO
// each run from the CLI and write their log and policy, plot draws the reward curve,
// --write-sft writes the task's format, and bad options are refused by name (--rollout-ranks
// without mpirun among them). About 5 s.
#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/train/train_log.h"
#include "test_util.h"

namespace lmstack::rl {
namespace {

class RlCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir("rl_cli");
    ASSERT_EQ(run("init-model --preset tiny-llama --dtype f32 --seed 3 --out " + dir_ + "/init"),
              0);
  }
  int run(const std::string& args) {
    const int rc = test::run_command(test::lmstack_binary() + " " + args, &out_);
    return rc;
  }
  std::vector<Json> lines(const std::string& log, const std::string& kind) {
    std::vector<Json> out;
    for (const Json& j : train::read_train_log(log))
      if (j.value("kind", "") == kind) out.push_back(j);
    return out;
  }
  std::string dir_, out_;
};

TEST_F(RlCliTest, GrpoLogsEveryStepAndPlotDrawsTheReward) {
  const std::string common = " -m " + dir_ + "/init --task add:1 --prompts-per-step 2 -n 4 " +
                             "--max-tokens 6 --eval-examples 8 --eval-every 1 -t 2 ";
  ASSERT_EQ(run("rl --algo grpo" + common + "--steps 2 --out " + dir_ + "/grpo"), 0) << out_;
  EXPECT_NE(out_.find("step 2/2"), std::string::npos) << out_;
  EXPECT_NE(out_.find("logp gap max"), std::string::npos) << out_;
  const auto steps = lines(dir_ + "/grpo/log.jsonl", "rl");
  ASSERT_EQ(steps.size(), 2u);
  for (const char* key : {"reward", "kl", "entropy", "response_len", "rollout_s", "train_s",
                          "sync_s", "logprob_gap_max", "logprob_gap_mean", "loss"})
    EXPECT_TRUE(steps[1]["measured"][key].is_number()) << key;
  EXPECT_EQ(steps[0]["measured"]["kl"].get<double>(), 0.0);  // policy = reference at step 1
  EXPECT_LT(steps[1]["measured"]["logprob_gap_max"].get<double>(), 1e-3);
  EXPECT_EQ(lines(dir_ + "/grpo/log.jsonl", "rl_eval").size(), 3u);  // steps 0, 1, 2
  EXPECT_TRUE(file_exists(dir_ + "/grpo/model/config.json"));
  // --steps 0 measures the held-out accuracy once and trains nothing.
  ASSERT_EQ(run("rl --algo grpo" + common + "--steps 0 --out " + dir_ + "/eval0"), 0) << out_;
  EXPECT_EQ(lines(dir_ + "/eval0/log.jsonl", "rl_eval").size(), 1u);
  EXPECT_TRUE(lines(dir_ + "/eval0/log.jsonl", "rl").empty());
  EXPECT_FALSE(file_exists(dir_ + "/eval0/model/config.json"));
  ASSERT_EQ(run("plot " + dir_ + "/grpo/log.jsonl --metric reward --eval-metric eval_accuracy " +
                "--out " + dir_ + "/reward.png"),
            0)
      << out_;
  EXPECT_NE(out_.find("2 train and 3 eval points"), std::string::npos) << out_;
  // The policy it wrote loads as a model again (here: as the next run's start).
  ASSERT_EQ(
      run("rl --algo ppo -m " + dir_ + "/grpo/model --task add:1 --prompts-per-step 2 -n 2 " +
          "--max-tokens 6 --eval-examples 0 --epochs 2 --minibatches 2 --steps 1 -t 2 --out " +
          dir_ + "/ppo"),
      0)
      << out_;
  const auto ppo = lines(dir_ + "/ppo/log.jsonl", "rl");
  ASSERT_EQ(ppo.size(), 1u);
  EXPECT_TRUE(ppo[0]["measured"]["value_loss"].is_number());
}

TEST_F(RlCliTest, DpoOnPreferencePairs) {
  write_file_atomic(dir_ + "/pairs.jsonl",
                    R"({"prompt": "Q: 1+2\nA:", "chosen": " 3\n", "rejected": " 4\n"})"
                    "\n"
                    R"({"prompt": "Q: 2+2\nA:", "chosen": " 4\n", "rejected": " 5\n"})"
                    "\n");
  ASSERT_EQ(run("rl --algo dpo -m " + dir_ + "/init --prompts " + dir_ +
                "/pairs.jsonl --pairs-per-step 2 --steps 3 --lr 1e-3 --beta 0.1 -t 2 --out " +
                dir_ + "/dpo"),
            0)
      << out_;
  const auto steps = lines(dir_ + "/dpo/log.jsonl", "rl");
  ASSERT_EQ(steps.size(), 3u);
  // The same two pairs every step: the loss starts at log 2 (policy = reference) and falls.
  EXPECT_NEAR(steps[0]["measured"]["loss"].get<double>(), std::log(2.0), 1e-6);
  EXPECT_LT(steps[2]["measured"]["loss"].get<double>(), steps[0]["measured"]["loss"].get<double>());
}

TEST_F(RlCliTest, WriteSftAndBadOptions) {
  ASSERT_EQ(run("rl --task add:2 --write-sft " + dir_ + "/sft.txt --sft-examples 3"), 0) << out_;
  const std::string text = read_file(dir_ + "/sft.txt");
  EXPECT_TRUE(text.starts_with("Q: ")) << text;
  EXPECT_NE(text.find("\nA: "), std::string::npos) << text;
  EXPECT_NE(text.find("\n%\n"), std::string::npos) << text;
  EXPECT_NE(run("rl --algo sac -m " + dir_ + "/init --task add --out " + dir_ + "/x"), 0);
  EXPECT_NE(out_.find("--algo sac"), std::string::npos) << out_;
  EXPECT_NE(run("rl --algo grpo -m " + dir_ + "/init --task divide --out " + dir_ + "/x"), 0);
  EXPECT_NE(out_.find("divide"), std::string::npos) << out_;
  // Rollout ranks need a world of 1 + R processes; this one is a world of 1 (no mpirun).
  EXPECT_NE(
      run("rl --algo grpo -m " + dir_ + "/init --task add --rollout-ranks 1 --out " + dir_ + "/x"),
      0);
  EXPECT_NE(out_.find("world of 1 process"), std::string::npos) << out_;
  EXPECT_NE(out_.find("mpirun -np 2"), std::string::npos) << out_;
}

}  // namespace
}  // namespace lmstack::rl
