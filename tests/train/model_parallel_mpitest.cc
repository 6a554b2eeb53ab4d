// `mpirun -np 4 lmstack train --tp/--pp/--dp` against `lmstack train` in one process, through
// the real binary and OpenMPI (ctest label "mpi", test train_mpi_model_parallel; the test
// launches mpirun itself): (tp 2 x dp 2), (pp 2 x dp 2), (tp 2 x pp 2), (pp 4, interleaved) and
// (tp 2 x pp 2, sequence parallel) give the 10 single-process losses within 2e-5 relative (f32; the
// reductions are reassociated over ranks, see model_parallel_test.cc), and the groups the run
// prints at start are the ones `lmstack calc train` prints for the same layout; `calc check` of the
// log predicts every rank's bytes.
#include <cmath>

#include <gtest/gtest.h>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "train/train_fixtures.h"

namespace lmstack::train {
namespace {

using test_fixtures::losses_of;
using test_fixtures::make_data;

std::string train_args(const std::string& data, const std::string& out) {
  return fmt::format(
      "train --init-config {} --data {} --out {} --steps 10 --batch 4 --seq 16 --grad-accum 4 "
      "--lr 3e-3 --warmup 2 --seed 5 --threads 1 --log {}/log.jsonl",
      test_fixtures::deep_llama_config(), data, out, out);
}

const std::string& data_dir() {
  static const std::string d = make_data("mpmpi_data");
  return d;
}

const std::string& reference_log() {
  static const std::string log = [] {
    const std::string dir = test::temp_dir("mpmpi_single");
    std::string out;
    EXPECT_EQ(test::run_command(test::lmstack_binary() + " " + train_args(data_dir(), dir), &out),
              0)
        << out;
    return path_join(dir, "log.jsonl");
  }();
  return log;
}

struct Layout {
  const char* name;
  const char* mesh;      // --tp --pp --dp: the same flags for train and calc train
  const char* schedule;  // train only
};

class MpiModelParallel : public ::testing::TestWithParam<Layout> {};

TEST_P(MpiModelParallel, MatchesOneProcess) {
  const Layout l = GetParam();
  const std::string out = test::temp_dir(std::string("mpmpi_") + l.name);
  const std::string cmd =
      fmt::format("{} -np 4 {} {} {} {} {}", LMSTACK_MPIEXEC, LMSTACK_MPIEXEC_FLAGS,
                  test::lmstack_binary(), train_args(data_dir(), out), l.mesh, l.schedule);
  std::string log;
  ASSERT_EQ(test::run_command(cmd, &log), 0) << cmd << "\n" << log;
  const std::vector<double> want = losses_of(reference_log());
  const std::vector<double> have = losses_of(path_join(out, "log.jsonl"));
  ASSERT_EQ(want.size(), 10u);
  ASSERT_EQ(have.size(), 10u);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(have[i], want[i], 2e-5 * want[i]) << l.name << " step " << i + 1;
  // The groups printed at start equal calc train's for the same layout.
  const std::string calc_cmd =
      fmt::format("{} calc train {} --tokens 1e9 --gpus 4 {}", test::lmstack_binary(),
                  test_fixtures::deep_llama_config(), l.mesh);
  std::string calc_out;
  ASSERT_EQ(test::run_command(calc_cmd, &calc_out), 0) << calc_cmd << "\n" << calc_out;
  for (const char* kind : {"tp", "dp", "pp"}) {
    // A plain find, not std::regex: GCC 12's -O1 ASan build warns inside <regex>.
    const std::string key = std::string(kind) + " groups: ";
    const size_t at = log.find(key);
    ASSERT_NE(at, std::string::npos) << log;
    const std::string run_groups =
        log.substr(at + key.size(), log.find('\n', at) - at - key.size());
    EXPECT_NE(calc_out.find(run_groups), std::string::npos)
        << kind << ": run printed " << run_groups << "\n"
        << calc_out;
  }
  // `calc check` of the log: every rank's weight bytes, bytes sent per group and one
  // micro-batch's activation bytes equal calc's prediction within 0.1% (they are exact).
  std::string report;
  test::run_command(fmt::format("{} calc check {}/log.jsonl --tolerance 0.001 --json",
                                test::lmstack_binary(), out),
                    &report, false);
  const Json values = Json::parse(report)["values"];
  int checked = 0;
  for (const auto& [key, value] : values.items()) {
    if (key.front() != 'r' || !key.ends_with("_verdict")) continue;
    EXPECT_NE(value.get<std::string>().find(" ok"), std::string::npos) << key << ": " << value;
    ++checked;
  }
  EXPECT_EQ(checked, 4 * 5) << report;  // 4 ranks x (weights, tp, pp, dp, activations)
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MpiModelParallel,
    ::testing::Values(Layout{"tp2_dp2", "--tp 2 --pp 1 --dp 2", ""},
                      Layout{"pp2_dp2", "--tp 1 --pp 2 --dp 2", "--pp-schedule 1f1b"},
                      Layout{"tp2_pp2", "--tp 2 --pp 2 --dp 1", "--pp-schedule gpipe"},
                      Layout{"pp4_interleaved", "--tp 1 --pp 4 --dp 1",
                             "--pp-schedule interleaved --pp-chunks 2"},
                      Layout{"tp2_pp2_sp", "--tp 2 --pp 2 --dp 1",
                             "--pp-schedule 1f1b --sequence-parallel"}),
    [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace lmstack::train
