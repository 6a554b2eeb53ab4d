// Expert parallelism (train/expert_parallel.h, expert_data_parallel.h) over in-process ranks
// (LocalComm): the exchange against a hand-derived one (uneven and zero counts), its bytes
// exactly; the trainer with --ep 2 on 2 ranks and on 4 ranks (dp x ep) equal to one process
// (losses, final weights) on Mixtral and Qwen2-MoE (shared expert and its gate); checkpoints
// written under --ep 2 resumed in one process and under --dp 2, and a single-process
// checkpoint resumed under --ep 2; unsupported combinations refused by name.
#include <cmath>
#include <filesystem>
#include <mutex>

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "lmstack/dist/comm_local.h"
#include "lmstack/model/model_dir.h"
#include "lmstack/train/expert_data_parallel.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;
using test_fixtures::tiny_config;

// Two ranks, four experts (two per rank), C = 2. Rank 0's pairs per expert: 1, 0, 2, 1; rank
// 1's: 0, 3, 1, 0. Row i of rank q holds (100 q + i, -(100 q + i)). Rank 0 owns experts 0, 1
// and receives, expert-major, expert 0: rank 0 row 0; expert 1: rank 1 rows 0-2. Rank 1 owns
// 2, 3: expert 2: rank 0 rows 1, 2 and rank 1 row 3; expert 3: rank 0 row 3.
TEST(EpExchange, DispatchAndReturnAgainstAHandDerivedExchange) {
  dist::run_local(2, [](dist::Comm& comm) {
    const int r = comm.rank();
    const int64_t C = 2;
    const std::vector<int32_t> offsets =
        r == 0 ? std::vector<int32_t>{0, 1, 1, 3, 4} : std::vector<int32_t>{0, 0, 3, 4, 4};
    std::vector<float> rows(8);
    for (int i = 0; i < 4; ++i) rows[2 * i] = 100.0f * r + i, rows[2 * i + 1] = -rows[2 * i];
    const EpExchange x = ep_plan(comm, offsets, C);
    const std::vector<float> want_first =
        r == 0 ? std::vector<float>{0, 100, 101, 102} : std::vector<float>{1, 2, 103, 3};
    ASSERT_EQ(x.num_recv_rows, 4);
    EXPECT_EQ(x.local_offsets,
              (r == 0 ? std::vector<int32_t>{0, 1, 4} : std::vector<int32_t>{0, 3, 4}));
    std::vector<float> got(8), scratch;
    const int64_t before = comm.stats().all_to_all_bytes;
    ep_dispatch(comm, x, rows.data(), got.data(), C, scratch);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[2 * i], want_first[static_cast<size_t>(i)]) << "rank " << r << " row " << i;
      EXPECT_EQ(got[2 * i + 1], -want_first[static_cast<size_t>(i)]);
    }
    // Rows to the other rank: rank 0 sends 3 (experts 2, 3), rank 1 sends 3 (expert 1).
    EXPECT_EQ(x.rows_to_others(r), 3);
    EXPECT_EQ(comm.stats().all_to_all_bytes - before, 3 * C * 4);
    // The return is the transpose: "expert" = x 2, back where each row came from.
    for (float& v : got) v *= 2;
    std::vector<float> back(8);
    ep_return(comm, x, got.data(), back.data(), C, scratch);
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(back[i], 2 * rows[i]) << i;
  });
}

TrainResult run_ranks(int n, TrainConfig c) {
  TrainResult result;
  std::mutex mu;
  dist::run_local(n, [&](dist::Comm& comm) {
    TrainConfig mine = c;
    mine.comm = &comm;
    mine.bucket_bytes = 1;
    ThreadPool pool(1);
    const TrainResult r = run_training(mine, pool);
    std::lock_guard<std::mutex> lock(mu);
    if (comm.rank() == 0) result = r;
  });
  return result;
}

// Every tensor of two checkpoints (any layout) equal within 1e-4 relative + 1e-4 absolute. The
// absolute part is 3% of one AdamW step (lr 3e-3): an expert weight whose summed gradient
// nearly cancels is at f32 rounding noise, which the per-rank reduction order changes, and Adam
// divides by that gradient's own RMS, so its step may differ by a few percent of lr (seen: 2.8e-5
// on one of 768 elements in the unoptimized sanitizer build, where no FMA is contracted). A
// wrong or missing expert gradient moves whole rows by about lr per step.
void expect_same_weights(const std::string& a_dir, const std::string& b_dir) {
  const model::ModelDir a = load_checkpoint_model(a_dir, true), b = load_checkpoint_model(b_dir);
  const auto fa = model::to_hf_tensors(a.config, a.weights),
             fb = model::to_hf_tensors(b.config, b.weights);
  ASSERT_EQ(fa.size(), fb.size());
  for (size_t i = 0; i < fa.size(); ++i)
    EXPECT_TRUE(
        test::all_close(fa[i].second.to_f32_vector(), fb[i].second.to_f32_vector(), 1e-4, 1e-4))
        << fa[i].first;
}

void expect_same_losses(const std::string& have_log, const std::string& want_log, size_t steps) {
  const std::vector<double> want = losses_of(want_log), have = losses_of(have_log);
  ASSERT_EQ(have.size(), steps);
  ASSERT_EQ(want.size(), steps);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "step " << i + 1;
}

struct EpCase {
  std::string arch;
  int ranks, ep, zero;
};

class ExpertParallel : public ::testing::TestWithParam<EpCase> {};

// Tolerance as data_parallel_test.cc's (2e-5 relative on losses, 1e-4 + 1e-5 on weights): the
// experts compute the same rows with the same kernels, but each expert's rows arrive grouped
// by source rank and the gradients are summed per rank, then over ranks (f32 reassociation).
// The aux loss is off: each rank computes it over its own rows, as under --dp.
TEST_P(ExpertParallel, EqualsOneProcess) {
  const EpCase k = GetParam();
  const std::string tag = fmt::format("{}_n{}e{}z{}", k.arch, k.ranks, k.ep, k.zero);
  const std::string data = make_data("ep_data_" + tag);
  TrainConfig single = tiny_config(data, test::temp_dir("ep_single_" + tag), k.arch);
  single.batch = 4, single.moe_aux_loss_coef = 0;
  ThreadPool pool(1);
  const TrainResult ref = run_training(single, pool);
  TrainConfig c = tiny_config(data, test::temp_dir("ep_" + tag), k.arch);
  c.batch = 4, c.moe_aux_loss_coef = 0, c.ep = k.ep, c.zero = k.zero;
  const TrainResult got = run_ranks(k.ranks, c);
  expect_same_losses(c.log_path, single.log_path, 6);
  const std::vector<Json> have = read_train_log(c.log_path), want = read_train_log(single.log_path);
  EXPECT_EQ(have[0]["measured"]["expert_tokens"], want[0]["measured"]["expert_tokens"]);
  EXPECT_EQ(have[0]["setup"]["ep"], k.ep);
  EXPECT_GT(have[0]["measured"]["ep_all_to_all_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(have[0]["measured"]["expert_all_reduce_bytes"].get<int64_t>() > 0, k.ranks > k.ep);
  EXPECT_EQ(got.num_parameters, ref.num_parameters);
  expect_same_weights(got.checkpoint, ref.checkpoint);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ExpertParallel,
                         ::testing::Values(EpCase{"mixtral", 2, 2, 0}, EpCase{"mixtral", 4, 2, 1},
                                           EpCase{"mixtral", 4, 4, 0},
                                           EpCase{"qwen2_moe", 2, 2, 0}),
                         [](const ::testing::TestParamInfo<EpCase>& i) {
                           return fmt::format("{}_n{}_ep{}_zero{}", i.param.arch, i.param.ranks,
                                              i.param.ep, i.param.zero);
                         });

// Six steps with a checkpoint every two, resumed from step 4 (`latest` pointed back at it, so
// the learning-rate schedule is the 6-step one): an --ep 2 checkpoint in one process and under
// --dp 2, and a single-process checkpoint under --ep 2. Each equals the uninterrupted
// single-process run (within the tolerance above: the layouts sum differently).
TEST(ExpertParallelCheckpoint, ResumesAtAnyLayout) {
  const std::string data = make_data("ep_ckpt_data");
  TrainConfig single = tiny_config(data, test::temp_dir("ep_ckpt_single"), "mixtral");
  single.batch = 4, single.moe_aux_loss_coef = 0, single.eval_every = 0;
  ThreadPool pool(1);
  run_training(single, pool);
  auto expect_tail = [&](const std::string& log) {
    const std::vector<double> want = losses_of(single.log_path), have = losses_of(log);
    ASSERT_EQ(have.size(), 2u) << log;
    for (size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(have[i], want[4 + i], 2e-5 * std::fabs(want[4 + i])) << log << " " << i;
  };
  // A copy of `from` whose latest checkpoint is step 4.
  auto at_step4 = [](const std::string& from, const std::string& name) {
    const std::string out = test::temp_dir(name);
    std::filesystem::copy(from, out, std::filesystem::copy_options::recursive);
    write_file_atomic(path_join(out, "latest"), "checkpoints/step-00000004\n");
    return out;
  };
  TrainConfig ep = tiny_config(data, test::temp_dir("ep_ckpt_ep2"), "mixtral");
  ep.batch = 4, ep.moe_aux_loss_coef = 0, ep.eval_every = 0, ep.ep = 2;
  const TrainResult saved = run_ranks(2, ep);
  EXPECT_TRUE(file_exists(
      path_join(ep.out_dir, "checkpoints/step-00000004/shard-00001-of-00002.safetensors")))
      << saved.checkpoint;
  for (int ranks : {1, 2}) {  // --ep 2 -> one process, --dp 2
    const std::string out = at_step4(ep.out_dir, fmt::format("ep_ckpt_resume{}", ranks));
    TrainConfig c = tiny_config(data, out, "mixtral");
    c.batch = 4, c.moe_aux_loss_coef = 0, c.eval_every = 0, c.resume = true;
    c.log_path = path_join(out, "resumed.jsonl");
    if (ranks == 1)
      run_training(c, pool);
    else
      run_ranks(2, c);
    expect_tail(c.log_path);
  }
  // One process -> --ep 2.
  const std::string out = at_step4(single.out_dir, "ep_ckpt_from_single");
  TrainConfig c = tiny_config(data, out, "mixtral");
  c.batch = 4, c.moe_aux_loss_coef = 0, c.eval_every = 0, c.resume = true, c.ep = 2;
  c.log_path = path_join(out, "resumed.jsonl");
  run_ranks(2, c);
  expect_tail(c.log_path);
}

TEST(ExpertParallelConfig, UnsupportedCombinationsAreRefusedByName) {
  const std::string data = make_data("ep_refuse_data");
  auto expect_refused = [&](TrainConfig c, int ranks, const std::string& words) {
    EXPECT_TRUE(test::refused_naming<ConfigError>([&] { run_ranks(ranks, c); }, words));
  };
  TrainConfig c = tiny_config(data, test::temp_dir("ep_refuse1"), "mixtral");
  c.batch = 4, c.ep = 2, c.tp = 2;
  expect_refused(c, 2, "--ep with --tp/--pp");
  c = tiny_config(data, test::temp_dir("ep_refuse2"), "mixtral");
  c.batch = 6, c.ep = 3;
  expect_refused(c, 3, "does not divide the model's 4 routed experts");
  c = tiny_config(data, test::temp_dir("ep_refuse3"), "mixtral");
  c.batch = 4, c.ep = 4;
  expect_refused(c, 2, "does not divide the 2 ranks");
  c = tiny_config(data, test::temp_dir("ep_refuse4"), "llama");
  c.batch = 4, c.ep = 2;
  expect_refused(c, 2, "mixture-of-experts");
  c = tiny_config(data, test::temp_dir("ep_refuse5"), "mixtral");
  c.batch = 4, c.ep = 2, c.zero = 3;
  expect_refused(c, 2, "--zero 3");
}

}  // namespace
}  // namespace lmstack::train
