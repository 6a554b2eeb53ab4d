// `mpirun -np 2 lmstack train --dp 2` on a Mixtral model against `lmstack train` in one
// process, through the real binary and OpenMPI (ctest label "mpi", train_mpi_moe): expert
// tensors are ordinary parameters, so at ZeRO 1 the losses and final weights equal the
// single-process run within data_parallel_test.cc's f32 tolerance, and the logged expert counts
// of step 1 (summed over the ranks) are the single process's. The aux loss is off: each rank
// computes it over its own rows (docs/moe_mla.md).
#include <cmath>

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

std::string train_args(const std::string& data, const std::string& out) {
  return fmt::format(
      "train --model {} --data {} --out {} --steps 8 --batch 4 --seq 16 --grad-accum 2 "
      "--lr 3e-3 --warmup 2 --seed 5 --save-every 4 --threads 1 --moe-aux-loss-coef 0 "
      "--log {}/log.jsonl",
      test::source_path("tests/data/train/mixtral/model"), data, out, out);
}

TEST(MpiMoeTrain, TwoRanksMatchOneProcess) {
  const std::string data = test_fixtures::make_data("moempi_data");
  const std::string single = test::temp_dir("moempi_single"), out = test::temp_dir("moempi_n2");
  std::string log;
  ASSERT_EQ(test::run_command(test::lmstack_binary() + " " + train_args(data, single), &log), 0)
      << log;
  const std::string cmd =
      fmt::format("{} -np 2 {} {} {} --dp 2 --zero 1", LMSTACK_MPIEXEC, LMSTACK_MPIEXEC_FLAGS,
                  test::lmstack_binary(), train_args(data, out));
  ASSERT_EQ(test::run_command(cmd, &log), 0) << cmd << "\n" << log;
  const std::vector<double> want = test_fixtures::losses_of(path_join(single, "log.jsonl")),
                            have = test_fixtures::losses_of(path_join(out, "log.jsonl"));
  ASSERT_EQ(have.size(), 8u);
  ASSERT_EQ(want.size(), 8u);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "step " << i + 1;
  EXPECT_EQ(read_train_log(path_join(out, "log.jsonl"))[0]["measured"]["expert_tokens"],
            read_train_log(path_join(single, "log.jsonl"))[0]["measured"]["expert_tokens"]);
  const CheckpointReader a(*latest_checkpoint(out)), b(*latest_checkpoint(single));
  for (const auto& [name, shape] : b.shapes()) {
    std::vector<float> va(static_cast<size_t>(shape.numel())), vb(va.size());
    a.read(StateKind::kWeights, name, 0, shape.numel(), va.data());
    b.read(StateKind::kWeights, name, 0, shape.numel(), vb.data());
    // atol 3e-5, not bit-exact: see moe_trainer_test.cc (one near-zero-gradient expert element
    // of 768 that AdamW moves by summation-order noise; 1.5-1.9e-5 with the f32 softmax).
    EXPECT_TRUE(test::all_close(va, vb, 1e-4, 3e-5)) << name;
  }
}

}  // namespace
}  // namespace lmstack::train
