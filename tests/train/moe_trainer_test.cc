// The trainer with MoE models (tests/data/train/{mixtral,qwen2_moe}): data parallelism over
// in-process ranks (LocalComm) at ZeRO 0-3 equals one process, since expert tensors are
// ordinary parameters; a resume is bit-exact, expert loads included; the logged expert counts
// are each layer's rows x top_k; the V3 bias update follows the loads; unsupported
// combinations are refused by name.
#include <cmath>
#include <filesystem>
#include <mutex>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/model/moe.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/moe_balance.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;
using test_fixtures::tiny_config;

TrainResult run_ranks(int n, TrainConfig c, int zero) {
  TrainResult result;
  std::mutex mu;
  dist::run_local(n, [&](dist::Comm& comm) {
    TrainConfig mine = c;
    mine.comm = &comm;
    mine.zero = zero;
    mine.bucket_bytes = 1;  // a bucket per group: all-reduces overlap the backward
    ThreadPool pool(1);
    const TrainResult r = run_training(mine, pool);
    std::lock_guard<std::mutex> lock(mu);
    if (comm.rank() == 0) result = r;
  });
  return result;
}

std::vector<Json> expert_tokens_of(const std::string& log) {
  std::vector<Json> out;
  for (const Json& j : read_train_log(log)) out.push_back(j["measured"]["expert_tokens"]);
  return out;
}

struct DpCase {
  std::string arch;
  int zero;
};

class MoeDataParallel : public ::testing::TestWithParam<DpCase> {};

// The aux loss is off here: each rank computes it over its own rows (as transformers does under
// DDP), which is not the loss of the whole batch; everything else is the same sum.
TEST_P(MoeDataParallel, TwoRanksEqualOneProcess) {
  const DpCase k = GetParam();
  const std::string tag = fmt::format("{}_z{}", k.arch, k.zero);
  const std::string data = make_data("moe_dp_data_" + tag);
  TrainConfig single = tiny_config(data, test::temp_dir("moe_dp_single_" + tag), k.arch);
  single.batch = 4, single.moe_aux_loss_coef = 0;
  ThreadPool pool(1);
  const TrainResult ref = run_training(single, pool);
  TrainConfig c = tiny_config(data, test::temp_dir("moe_dp_" + tag), k.arch);
  c.batch = 4, c.moe_aux_loss_coef = 0;
  const TrainResult got = run_ranks(2, c, k.zero);
  const std::vector<double> want = losses_of(single.log_path), have = losses_of(c.log_path);
  ASSERT_EQ(have.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "step " << i + 1;
  // Same weights at step 1: the same choices, counted over both ranks' rows.
  EXPECT_EQ(expert_tokens_of(c.log_path)[0], expert_tokens_of(single.log_path)[0]);
  const model::ModelDir a = load_checkpoint_model(got.checkpoint, true),
                        b = load_checkpoint_model(ref.checkpoint, true);
  const auto fa = model::to_hf_tensors(a.config, a.weights),
             fb = model::to_hf_tensors(b.config, b.weights);
  ASSERT_EQ(fa.size(), fb.size());
  // Within rounding, not bit-exact: the two runs sum the gradients in different orders, and
  // AdamW's m/√v turns that noise of a near-zero gradient (an expert row few tokens reach)
  // into up to ~1% of a step (lr 3e-3); the f32 softmax of the fused cross-entropy put one
  // such element of 768 at 1.5e-5, hence atol 3e-5.
  for (size_t i = 0; i < fa.size(); ++i)
    EXPECT_TRUE(
        test::all_close(fa[i].second.to_f32_vector(), fb[i].second.to_f32_vector(), 1e-4, 3e-5))
        << fa[i].first;
}

INSTANTIATE_TEST_SUITE_P(Stages, MoeDataParallel,
                         ::testing::Values(DpCase{"mixtral", 0}, DpCase{"mixtral", 1},
                                           DpCase{"mixtral", 2}, DpCase{"mixtral", 3},
                                           DpCase{"qwen2_moe", 2}),
                         [](const ::testing::TestParamInfo<DpCase>& i) {
                           return fmt::format("{}_zero{}", i.param.arch, i.param.zero);
                         });

TEST(MoeTrainer, ResumeIsBitExactAndLogsExpertLoads) {
  const std::string data = make_data("moe_resume_data");
  ThreadPool pool(2);
  const TrainConfig full = tiny_config(data, test::temp_dir("moe_full"), "qwen2_moe");
  run_training(full, pool);
  ASSERT_EQ(losses_of(full.log_path).size(), 6u);
  // Resume: a copy of the run's directory rewound to its step-4 checkpoint.
  TrainConfig part = tiny_config(data, test::temp_dir("moe_part"), "qwen2_moe");
  std::filesystem::copy(
      full.out_dir, part.out_dir,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  write_file_atomic(path_join(part.out_dir, "latest"), "checkpoints/step-00000004\n");
  part.resume = true;
  const TrainResult r = run_training(part, pool);
  EXPECT_EQ(r.first_step, 4);
  EXPECT_EQ(losses_of(part.log_path), losses_of(full.log_path));
  EXPECT_EQ(expert_tokens_of(part.log_path), expert_tokens_of(full.log_path));
  // Layer 0 is sparse (4 experts, top-2), layer 1 dense: rows x k = 2 micro-batches x 2 x 16 x 2.
  for (const Json& line : read_train_log(full.log_path)) {
    const Json& m = line["measured"];
    ASSERT_EQ(m["expert_layers"], Json::array({0}));
    int64_t total = 0;
    for (const Json& t : m["expert_tokens"][0]) total += t.get<int64_t>();
    EXPECT_EQ(total, 2 * 2 * 16 * 2);
    EXPECT_GE(m["moe_max_load_ratio"].get<double>(), 1.0);
    EXPECT_GT(m["moe_aux_loss"].get<double>(), 0.0);
  }
}

TEST(MoeTrainer, ScoreBiasFollowsTheStepsLoads) {
  // tests/data/train/qwen3_moe_v3routing with routing.json applied (moe_parity_test.cc).
  const std::string dir = test::source_path("tests/data/train/qwen3_moe_v3routing");
  model::ModelDir md = model::load_model_dir(dir + "/model");
  model::MoeConfig& m = md.config.moe;
  m.score = model::RouterScore::kSigmoid, m.score_bias = true, m.num_groups = 4;
  m.topk_groups = 2, m.group_top2_sum = true, m.routed_scale = 2.5f;
  for (auto& l : md.weights.layers)
    l.moe->score_bias = Tensor::from_f32(Shape{m.num_experts}, std::vector<float>(8, 0.0f));
  ThreadPool pool(1);
  TrainModel tm(md.config, md.weights, pool, {});
  std::vector<int32_t> in(32), tg(32);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i * 5 % 64), tg[i] = in[i];
  MoeStepLoads loads;
  moe_begin_step(loads, md.config);
  for (int micro = 0; micro < 2; ++micro) {
    tm.forward_backward(in.data(), tg.data(), 2, 16, 1.0f / 64);
    moe_add_micro_batch(loads, tm);
  }
  moe_update_score_biases(tm, loads, 0.01f);
  for (int l = 0; l < md.config.num_layers; ++l) {
    // 2 micro-batches x 32 rows x top-2 = 128 assignments over 8 experts: mean 16.
    const std::vector<float> bias =
        tm.master().layers[static_cast<size_t>(l)].moe->score_bias.to_f32_vector();
    for (int e = 0; e < 8; ++e) {
      const int64_t load = loads.tokens[static_cast<size_t>(l * 8 + e)];
      EXPECT_EQ(load % 2, 0);  // the two micro-batches are the same batch
      EXPECT_FLOAT_EQ(bias[static_cast<size_t>(e)], load < 16   ? 0.01f
                                                    : load > 16 ? -0.01f
                                                                : 0.0f)
          << "layer " << l << " expert " << e << " load " << load;
    }
  }
}

TEST(MoeTrainer, UnsupportedCombinationsAreRefusedByName) {
  const std::string data = make_data("moe_refuse_data");
  ThreadPool pool(1);
  auto expect_refused = [&](TrainConfig c, const std::string& words) {
    EXPECT_TRUE(test::refused_naming<ConfigError>([&] { run_training(c, pool); }, words));
  };
  TrainConfig c = tiny_config(data, test::temp_dir("moe_refuse"), "mixtral");
  c.moe_bias_update_rate = 0.001f;
  expect_refused(c, "e_score_correction_bias");
  c = tiny_config(data, test::temp_dir("moe_refuse2"), "mixtral");
  c.tp = 2;
  expect_refused(c, "--tp/--pp with experts");
  c = tiny_config(data, test::temp_dir("moe_refuse3"), "llama");
  c.moe_aux_loss_coef = 0.1;
  expect_refused(c, "mixture-of-experts");
}

}  // namespace
}  // namespace lmstack::train
