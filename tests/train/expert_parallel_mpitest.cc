// `mpirun lmstack train --ep 2` on a Mixtral model against `lmstack train` in one process,
// through the real binary and OpenMPI (ctest train_mpi_ep, label "mpi"): 2 ranks (ep 2) and
// 4 ranks (dp 4 x ep 2: each expert on 2 ranks), the losses and final weights equal the
// single-process run within data_parallel_test.cc's f32 tolerance; `calc check` of the log:
// the world's dense all-reduce and the experts' all-reduce are calc's exactly, the all-to-all
// bytes (which depend on where the router sent the rows) within 35% of calc's uniform-routing
// prediction. The aux loss is off: each rank computes it over its own rows (docs/moe_mla.md).
#include <cmath>

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

std::string train_args(const std::string& data, const std::string& out) {
  return fmt::format(
      "train --model {} --data {} --out {} --steps 6 --batch 4 --seq 16 --grad-accum 2 "
      "--lr 3e-3 --warmup 2 --seed 5 --save-every 3 --threads 1 --moe-aux-loss-coef 0 "
      "--log {}/log.jsonl",
      test::source_path("tests/data/train/mixtral/model"), data, out, out);
}

class MpiExpertParallel : public ::testing::TestWithParam<int> {};

TEST_P(MpiExpertParallel, MatchesOneProcess) {
  const int np = GetParam();
  const std::string data = test_fixtures::make_data(fmt::format("epmpi_data{}", np));
  const std::string single = test::temp_dir(fmt::format("epmpi_single{}", np)),
                    out = test::temp_dir(fmt::format("epmpi_n{}", np));
  std::string log;
  ASSERT_EQ(test::run_command(test::lmstack_binary() + " " + train_args(data, single), &log), 0)
      << log;
  const std::string cmd =
      fmt::format("{} -np {} {} {} {} --ep 2", LMSTACK_MPIEXEC, np, LMSTACK_MPIEXEC_FLAGS,
                  test::lmstack_binary(), train_args(data, out));
  ASSERT_EQ(test::run_command(cmd, &log), 0) << cmd << "\n" << log;
  const std::vector<double> want = test_fixtures::losses_of(path_join(single, "log.jsonl")),
                            have = test_fixtures::losses_of(path_join(out, "log.jsonl"));
  ASSERT_EQ(have.size(), 6u);
  ASSERT_EQ(want.size(), 6u);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "step " << i + 1;
  const CheckpointReader a(*latest_checkpoint(out)), b(*latest_checkpoint(single));
  ASSERT_EQ(a.shapes().size(), b.shapes().size());
  for (const auto& [name, shape] : b.shapes()) {
    std::vector<float> va(static_cast<size_t>(shape.numel())), vb(va.size());
    a.read(StateKind::kWeights, name, 0, shape.numel(), va.data());
    b.read(StateKind::kWeights, name, 0, shape.numel(), vb.data());
    // atol 3e-5, not bit-exact: see moe_trainer_test.cc (one near-zero-gradient expert element
    // of 768 that AdamW moves by summation-order noise; 1.5-1.9e-5 with the f32 softmax).
    EXPECT_TRUE(test::all_close(va, vb, 1e-4, 3e-5)) << name;
  }
  std::string report;
  test::run_command(fmt::format("{} calc check {}/log.jsonl --tolerance 0.001 --json",
                                test::lmstack_binary(), out),
                    &report, false);
  const Json values = Json::parse(report)["values"];
  // The dense all-reduce: 1.00 up to the padding of each bucket to N chunks and the step's
  // scalars (docs/dist_training.md); the experts' all-reduce has neither.
  EXPECT_NEAR(values["comm_bytes_ratio"].get<double>(), 1.0, 0.02) << report;
  const double a2a = values["ep_all_to_all_bytes_ratio"].get<double>();
  EXPECT_GT(a2a, 0.65) << report;
  EXPECT_LT(a2a, 1.35) << report;
  if (np == 4)
    EXPECT_NEAR(values["expert_all_reduce_bytes_ratio"].get<double>(), 1.0, 1e-9) << report;
  else
    EXPECT_FALSE(values.contains("expert_all_reduce_bytes_ratio")) << report;
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiExpertParallel, ::testing::Values(2, 4),
                         [](const auto& i) { return fmt::format("ranks{}", i.param); });

}  // namespace
}  // namespace lmstack::train
