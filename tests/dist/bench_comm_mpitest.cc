// `lmstack bench comm` under `mpirun -np 2` (run from this binary without a launcher: ctest
// dist_mpi_launch). Every row's bandwidths and calc prediction are checked against the
// formulas written out by hand for n = 2 and the pcie4 preset (31.5 GB/s, alpha 1 us): busbw
// factor 2(n-1)/n = 1 for all-reduce, (n-1)/n = 1/2 for reduce-scatter, all-gather and
// all-to-all, 1 for broadcast (nccl-tests PERFORMANCE.md).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lmstack/core/json.h"
#include "lmstack/dist/comm.h"
#include "test_util.h"

namespace lmstack::dist {
namespace {

TEST(BenchComm, RowsFollowNcclTestsAndCalc) {
  if (launched_by_mpi()) GTEST_SKIP() << "launches mpirun itself; run without a launcher";
  const std::string cmd =
      "timeout 120 " LMSTACK_MPIEXEC " -np 2 " LMSTACK_MPIEXEC_FLAGS " " LMSTACK_BINARY
      " bench comm --min-bytes 1KiB --max-bytes 64KiB --factor 4 --iters 5"
      " --link pcie4 --json";
  std::string out;
  ASSERT_EQ(lmstack::test::run_command(cmd, &out, false), 0) << out;
  const Json j = parse_json(out, "bench comm --json");
  EXPECT_EQ(j["ranks"], 2);
  EXPECT_EQ(j["backend"], "mpi");
  const double bw = 31.5e9, alpha = 1e-6;
  // op -> (busbw factor, predicted seconds for S bytes)
  const std::map<std::string, std::pair<double, double (*)(double)>> want = {
      {"all_reduce", {1.0, [](double s) { return 2 * 1e-6 + s / 31.5e9; }}},
      {"reduce_scatter", {0.5, [](double s) { return 1e-6 + 0.5 * s / 31.5e9; }}},
      {"all_gather", {0.5, [](double s) { return 1e-6 + 0.5 * s / 31.5e9; }}},
      {"all_to_all", {0.5, [](double s) { return 1e-6 + 0.5 * s / 31.5e9; }}},
      {"broadcast", {1.0, [](double s) { return 1e-6 + s / 31.5e9; }}},
  };
  EXPECT_EQ(j["link"]["bw"].get<double>(), bw);
  EXPECT_EQ(j["link"]["latency_s"].get<double>(), alpha);
  std::map<std::string, int> rows;
  for (const Json& r : j["results"]) {
    const std::string op = r["op"];
    const double s = r["bytes"], t = r["time_s"];
    ASSERT_TRUE(want.count(op)) << op;
    ++rows[op];
    EXPECT_GT(t, 0);
    EXPECT_EQ(r["iters"], 5);
    EXPECT_NEAR(r["algbw_bytes_per_s"].get<double>(), s / t, 1e-9 * s / t);
    EXPECT_NEAR(r["busbw_bytes_per_s"].get<double>(), want.at(op).first * s / t, 1e-9 * s / t);
    EXPECT_NEAR(r["calc_time_s"].get<double>(), want.at(op).second(s), 1e-15) << op << " " << s;
  }
  for (const auto& [op, w] : want) EXPECT_EQ(rows[op], 4) << op;  // 1, 4, 16, 64 KiB
}

// An error under mpirun goes through abort_all: named by rank, and the job ends at once.
TEST(BenchComm, ErrorUnderMpirunNamesTheRankAndEndsTheJob) {
  if (launched_by_mpi()) GTEST_SKIP() << "launches mpirun itself; run without a launcher";
  const std::string cmd = "timeout 60 " LMSTACK_MPIEXEC " -np 2 " LMSTACK_MPIEXEC_FLAGS
                          " " LMSTACK_BINARY " bench comm --ops all_sum";
  std::string out;
  EXPECT_NE(lmstack::test::run_command(cmd, &out, true), 0) << out;
  EXPECT_NE(out.find("of 2: error: --ops 'all_sum'"), std::string::npos) << out;
}

}  // namespace
}  // namespace lmstack::dist
