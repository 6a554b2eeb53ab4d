// `mpirun -np N lmstack train --dp N --zero Z` against `lmstack train` in one process, through
// the real binary and OpenMPI (ctest label "mpi"; the test launches mpirun itself): for every
// ZeRO stage at N = 2 and 4 (oversubscribed), the 20 losses and the final weights equal the
// single-process run with the same global batch, within the f32 tolerance of
// data_parallel_test.cc (the sums of the gradients are reassociated over ranks). A rank killed
// mid-run ends the whole job within seconds, and --resume continues from the last complete
// checkpoint to the uninterrupted run's losses, bit for bit (same ranks, same reduction order).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/train/checkpoint.h"
#include "lmstack/train/sharded_checkpoint.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;

std::string train_args(const std::string& data, const std::string& out, int steps) {
  return fmt::format(
      "train --model {} --data {} --out {} --steps {} --batch 4 --seq 16 --grad-accum 2 "
      "--lr 3e-3 --warmup 2 --seed 5 --save-every 4 --threads 1 --log {}/log.jsonl",
      test::source_path("tests/data/train/llama/model"), data, out, steps, out);
}

std::string mpirun(int np) {
  return fmt::format("{} -np {} {}", LMSTACK_MPIEXEC, np, LMSTACK_MPIEXEC_FLAGS);
}

// The single-process reference, once per data directory.
const std::string& reference_dir(const std::string& data) {
  static const std::string out = [&] {
    const std::string dir = test::temp_dir("dpmpi_single");
    std::string log;
    EXPECT_EQ(test::run_command(test::lmstack_binary() + " " + train_args(data, dir, 20), &log), 0)
        << log;
    return dir;
  }();
  return out;
}

double max_weight_error(const std::string& a_dir, const std::string& b_dir) {
  const CheckpointReader a(a_dir), b(b_dir);
  double worst = 0;
  for (const auto& [name, shape] : b.shapes()) {
    std::vector<float> va(static_cast<size_t>(shape.numel())), vb(va.size());
    a.read(StateKind::kWeights, name, 0, shape.numel(), va.data());
    b.read(StateKind::kWeights, name, 0, shape.numel(), vb.data());
    for (size_t i = 0; i < va.size(); ++i)
      worst = std::max(worst, std::fabs(va[i] - vb[i]) / (std::fabs(vb[i]) + 1e-3));
  }
  return worst;
}

class MpiTrainParity : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(MpiTrainParity, MatchesOneProcess) {
  const auto [np, zero] = GetParam();
  static const std::string data = make_data("dpmpi_data");
  const std::string& single = reference_dir(data);
  const std::string out = test::temp_dir(fmt::format("dpmpi_n{}_z{}", np, zero));
  std::string log;
  const std::string cmd = fmt::format("{} {} {} --dp {} --zero {} --bucket-mb 0.01", mpirun(np),
                                      test::lmstack_binary(), train_args(data, out, 20), np, zero);
  ASSERT_EQ(test::run_command(cmd, &log), 0) << cmd << "\n" << log;
  const std::vector<double> want = losses_of(path_join(single, "log.jsonl"));
  const std::vector<double> have = losses_of(path_join(out, "log.jsonl"));
  ASSERT_EQ(have.size(), 20u);
  ASSERT_EQ(want.size(), 20u);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * std::fabs(want[i])) << "step " << i + 1;
  EXPECT_LT(max_weight_error(*latest_checkpoint(out), *latest_checkpoint(single)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Stages, MpiTrainParity,
                         ::testing::Values(std::pair{2, 0}, std::pair{2, 1}, std::pair{2, 2},
                                           std::pair{2, 3}, std::pair{4, 0}, std::pair{4, 1},
                                           std::pair{4, 2}, std::pair{4, 3}),
                         [](const auto& i) {
                           return fmt::format("np{}_zero{}", i.param.first, i.param.second);
                         });

// The pids of the processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::ifstream in(fmt::format("/proc/{}/task/{}/children", parent, parent));
  for (pid_t p; in >> p;) out.push_back(p);
  return out;
}

TEST(MpiTrainFault, KilledRankEndsTheJobAndTheRunResumes) {
  const std::string data = make_data("dpmpi_fault_data");
  const std::string full = test::temp_dir("dpmpi_fault_full");
  const std::string base = fmt::format("{} {}", mpirun(2), test::lmstack_binary());
  std::string log;
  const std::string opts = " --zero 2 --schedule constant";  // the same lr whatever --steps
  ASSERT_EQ(test::run_command(base + " " + train_args(data, full, 200) + opts, &log), 0) << log;
  const std::string out = test::temp_dir("dpmpi_fault");
  const std::string cmd = base + " " + train_args(data, out, 200) + opts;
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the first checkpoint, then kill one rank (a child of mpirun).
  const auto start = std::chrono::steady_clock::now();
  while (!latest_checkpoint(out) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(latest_checkpoint(out).has_value()) << "no checkpoint within 60 s";
  const std::vector<pid_t> ranks = children_of(launcher);
  ASSERT_FALSE(ranks.empty());
  const auto killed = std::chrono::steady_clock::now();
  kill(ranks.back(), SIGKILL);
  int status = 0;
  waitpid(launcher, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(seconds, 10.0) << "the other rank did not end within seconds";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const int64_t resumed_from = read_trainer_state(*latest_checkpoint(out)).step;
  ASSERT_LT(resumed_from, 200) << "the run finished before the kill";
  ASSERT_EQ(test::run_command(base + " " + train_args(data, out, 200) + opts + " --resume", &log),
            0)
      << log;
  EXPECT_EQ(losses_of(path_join(out, "log.jsonl")), losses_of(path_join(full, "log.jsonl")));
}

}  // namespace
}  // namespace lmstack::train
