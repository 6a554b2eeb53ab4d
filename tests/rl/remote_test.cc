// GRPO with rollouts on other ranks (rl/remote.h) against the one-process run, in one process:
// LocalComm ranks as threads, rank 0 training and ranks 1..2 rolling out (3 prompts per step,
// so the two rollout ranks get uneven slices). Same seeds, so the sampled token ids, finish
// reasons, rewards, losses, KL, held-out accuracy and final weights are bit-identical; the
// engine's log-probs (and the logged gap) agree to 1e-5, their last bits depending on how
// many sequences share a batch; after every sync each rollout rank's
// weights equal the trainer's bit for bit. A rollout rank that fails names itself.
// Needs the lmstack binary (init-model). About 3 s.
#include "lmstack/rl/remote.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "lmstack/core/file.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/rl/driver.h"
#include "lmstack/train/train_log.h"
#include "test_util.h"

namespace lmstack::rl {
namespace {

// All f32 weights of `w` in weight_fields order, as one vector (a snapshot).
std::vector<float> flatten(const model::ModelWeights& w, bool tied) {
  model::ModelWeights handles = w;
  std::vector<float> out;
  for (auto& [name, t] : train::weight_fields(handles, tied)) {
    const float* p = t->data<float>();
    out.insert(out.end(), p, p + t->numel());
  }
  return out;
}

// Passes every call on, keeping what the loop saw: each generate's rollouts and the weights
// it sent at each sync.
class Recorder : public RolloutBackend {
 public:
  Recorder(RolloutBackend& inner, bool tied) : inner_(inner), tied_(tied) {}
  std::vector<Rollout> generate(const std::vector<std::vector<int32_t>>& prompts, int n,
                                const model::SamplingParams& params) override {
    rollouts.push_back(inner_.generate(prompts, n, params));
    return rollouts.back();
  }
  SyncStats sync(const model::ModelWeights& policy) override {
    synced.push_back(flatten(policy, tied_));
    return inner_.sync(policy);
  }
  std::vector<std::vector<Rollout>> rollouts;
  std::vector<std::vector<float>> synced;

 private:
  RolloutBackend& inner_;
  bool tied_;
};

class RemoteRolloutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(test::temp_dir("rl_remote"));
    std::string log;
    ASSERT_EQ(test::run_command(test::lmstack_binary() +
                                    " init-model --preset tiny-llama --dtype f32 --seed 3 --out " +
                                    *dir_ + "/init",
                                &log),
              0)
        << log;
  }
  void SetUp() override {
    md_ = model::load_model_dir(*dir_ + "/init");
    tok_.emplace(tokenizer::Tokenizer::load(*dir_ + "/init"));
    so_.kv_tokens = 4096;
    so_.max_batch_tokens = 256;
    so_.lr = 1e-3f;
    for (int id : md_.config.eos_token_ids) so_.eos_ids.push_back(id);
    if (auto id = tok_->eos_id()) so_.eos_ids.push_back(*id);
    ro_.algo = "grpo";
    ro_.task = "add:1";
    // The untrained model never answers, so exact match would give zero advantages and no
    // update; the JSON's length (completion included) varies per sample.
    ro_.reward_cmd = "wc -c";
    ro_.seed = ro_.sampling.seed = 7;
    ro_.steps = 3;
    ro_.prompts_per_step = 3;
    ro_.group_size = 4;
    ro_.sampling.max_tokens = 6;
    ro_.eval_every = 0;
    ro_.eval_examples = 5;
  }
  bool tied() const { return md_.config.tie_word_embeddings; }
  std::vector<Json> log_lines(const std::string& out) {
    return train::read_train_log(path_join(out, "log.jsonl"));
  }

  static std::string* dir_;
  model::ModelDir md_;
  std::optional<tokenizer::Tokenizer> tok_;
  SessionOptions so_;
  RunOptions ro_;
};
std::string* RemoteRolloutTest::dir_ = nullptr;

TEST_F(RemoteRolloutTest, GrpoMatchesTheOneProcessRunBitForBit) {
  // One process.
  ro_.out_dir = *dir_ + "/one";
  ThreadPool pool(1);
  RlSession one(md_.config, md_.weights, md_.weights, pool, so_);
  LocalRollouts local(one);
  Recorder want(local, tied());
  ASSERT_EQ(run_rl(ro_, one, want, md_, *tok_), 0);
  const std::vector<float> want_final = flatten(one.policy().master(), tied());

  // Rank 0 trains, ranks 1 and 2 roll out.
  RunOptions ro = ro_;
  ro.out_dir = *dir_ + "/three";
  std::vector<float> have_final, initial;
  std::vector<std::vector<Rollout>> have_rollouts;
  std::vector<std::vector<float>> have_synced;
  std::vector<std::vector<std::vector<float>>> replica_synced(3);  // [rank][sync]
  dist::run_local(3, [&](dist::Comm& comm) {
    ThreadPool rank_pool(1);
    if (comm.rank() > 0) {
      EngineReplica replica(md_.config, md_.weights, rank_pool, so_);
      serve_rollouts(comm, replica, [&](const EngineReplica& r) {
        replica_synced[static_cast<size_t>(comm.rank())].push_back(flatten(r.weights(), tied()));
      });
      return;
    }
    SessionOptions so = so_;
    so.local_engine = false;
    RlSession s(md_.config, md_.weights, md_.weights, rank_pool, so);
    initial = flatten(s.policy().master(), tied());
    RemoteRollouts remote(comm, md_.config, s.policy().master());
    Recorder rec(remote, tied());
    ASSERT_EQ(run_rl(ro, s, rec, md_, *tok_), 0);
    remote.stop();
    have_final = flatten(s.policy().master(), tied());
    have_rollouts = rec.rollouts;
    have_synced = rec.synced;
  });

  // eval at step 0, 3 steps, eval at the end
  ASSERT_EQ(want.rollouts.size(), 5u);
  ASSERT_EQ(have_rollouts.size(), want.rollouts.size());
  for (size_t c = 0; c < want.rollouts.size(); ++c) {
    ASSERT_EQ(have_rollouts[c].size(), want.rollouts[c].size()) << "call " << c;
    for (size_t i = 0; i < want.rollouts[c].size(); ++i) {
      const Rollout &h = have_rollouts[c][i], &w = want.rollouts[c][i];
      EXPECT_EQ(h.group, w.group);
      EXPECT_EQ(h.prompt, w.prompt);
      EXPECT_EQ(h.response, w.response) << "call " << c << " rollout " << i;
      // The engine's log-probs round differently in other batch shapes (fewer sequences per
      // rank); the sampled ids, and so everything the trainer computes, are exact.
      ASSERT_EQ(h.engine_logprobs.size(), w.engine_logprobs.size());
      for (size_t t = 0; t < w.engine_logprobs.size(); ++t)
        EXPECT_NEAR(h.engine_logprobs[t], w.engine_logprobs[t], 1e-5) << "call " << c;
      EXPECT_EQ(h.finish_reason, w.finish_reason);
    }
  }
  // The logs: rewards, losses, KL, gaps, ... equal; only the timings differ.
  const auto wl = log_lines(ro_.out_dir), hl = log_lines(ro.out_dir);
  ASSERT_EQ(hl.size(), wl.size());
  int steps = 0;
  for (size_t i = 0; i < wl.size(); ++i) {
    steps += wl[i]["kind"] == "rl";
    for (const auto& [key, value] : wl[i]["measured"].items()) {
      if (key.starts_with("logprob_gap")) {  // engine rounding, as above
        EXPECT_NEAR(hl[i]["measured"].at(key).get<double>(), value.get<double>(), 1e-5) << key;
      } else if (key.size() < 2 || key.substr(key.size() - 2) != "_s") {
        EXPECT_EQ(hl[i]["measured"].at(key), value) << "line " << i << " " << key;
      }
    }
  }
  EXPECT_EQ(steps, 3);
  EXPECT_GT(wl[1]["measured"]["sync_bytes"].get<double>(), 0);
  EXPECT_EQ(have_final, want_final);
  EXPECT_NE(have_final, initial);  // the run trained
  // The rollout ranks hold the trainer's weights after every sync (the first: at start).
  ASSERT_EQ(have_synced.size(), 3u);
  for (int r = 1; r <= 2; ++r) {
    const auto& got = replica_synced[static_cast<size_t>(r)];
    ASSERT_EQ(got.size(), 4u) << "rank " << r;
    EXPECT_EQ(got[0], initial) << "rank " << r;
    for (size_t k = 0; k < have_synced.size(); ++k)
      EXPECT_EQ(got[k + 1], have_synced[k]) << "rank " << r << " sync " << k + 1;
  }
}

TEST_F(RemoteRolloutTest, AFailingRolloutRankNamesItself) {
  ro_.out_dir = *dir_ + "/fail";
  try {
    dist::run_local(3, [&](dist::Comm& comm) {
      ThreadPool rank_pool(1);
      if (comm.rank() > 0) {
        SessionOptions so = so_;
        if (comm.rank() == 2) so.block_size = so.kv_tokens = 4;  // too small for any request
        EngineReplica replica(md_.config, md_.weights, rank_pool, so);
        serve_rollouts(comm, replica);
        return;
      }
      SessionOptions so = so_;
      so.local_engine = false;
      RlSession s(md_.config, md_.weights, md_.weights, rank_pool, so);
      RemoteRollouts remote(comm, md_.config, s.policy().master());
      run_rl(ro_, s, remote, md_, *tok_);
    });
    FAIL() << "the run should have failed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rollout rank 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lmstack::rl
