// doctor's measurements: JSON schema, round trip, and sanity of the numbers against the
// detected instruction set (FMA peak must reflect the vector width; bandwidths positive and
// ordered LLC >= DRAM).
#include "lmstack/core/machine_probe.h"

#include <gtest/gtest.h>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/thread_pool.h"
#include "test_util.h"

namespace lmstack {
namespace {

TEST(MachineProbe, QuickProbeIsSaneAndRoundTripsThroughJson) {
  ThreadPool pool(1);
  const MachineReport r = probe_machine(pool, ProbeOptions{.quick = true});
  EXPECT_GT(r.physical_cores, 0);
  EXPECT_FALSE(r.caches.empty());
  EXPECT_GT(r.dram_read_gbs, 0.5);
  EXPECT_GT(r.dram_triad_gbs, 0.5);
  EXPECT_GT(r.llc_read_gbs, 0.5);
  const CpuFeatures& f = cpu_features();
  if (f.has_avx2_fma()) {
    EXPECT_GT(r.peak_f32_avx2_gflops, 1.0);
  }
  if (f.has_avx512()) {
    // 512-bit FMA does twice the work per instruction; even on parts with one 512-bit port
    // it must not fall below the 256-bit figure by much.
    EXPECT_GT(r.peak_f32_avx512_gflops, 0.8 * r.peak_f32_avx2_gflops);
  } else {
    EXPECT_EQ(r.peak_f32_avx512_gflops, 0);
  }
  EXPECT_GT(r.ridge_f32_flop_per_byte(), 0);
  const Json j = machine_report_to_json(r);
  EXPECT_EQ(j["schema"], "lmstack.doctor.v1");
  for (const char* key : {"dram_read_gbs", "dram_triad_gbs", "llc_read_gbs"})
    EXPECT_TRUE(j["memory"][key].is_number()) << key;
  for (const char* key : {"peak_f32_gflops", "peak_bf16_gflops", "peak_f32_avx2_gflops"})
    EXPECT_TRUE(j["compute"][key].is_number()) << key;
  const MachineReport back = machine_report_from_json(j, "test");
  EXPECT_EQ(back.dram_read_gbs, r.dram_read_gbs);
  EXPECT_EQ(back.peak_f32_gflops(), r.peak_f32_gflops());
  EXPECT_EQ(back.cpu_model, r.cpu_model);
}

TEST(MachineProbe, FromJsonNamesMissingField) {
  Json j = machine_report_to_json(describe_machine());
  j["memory"].erase("dram_read_gbs");
  try {
    machine_report_from_json(j, "doctor.json");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("dram_read_gbs"), std::string::npos);
  }
}

TEST(DoctorCli, JsonOutputParsesAndVersionWorks) {
  std::string out;
  ASSERT_EQ(
      test::run_command(test::lmstack_binary() + " doctor --json --quick --threads 1", &out, false),
      0)
      << out;
  const Json j = parse_json(out, "doctor stdout");
  EXPECT_GT(j["memory"]["dram_read_gbs"].get<double>(), 0);
  EXPECT_GT(j["compute"]["peak_f32_gflops"].get<double>(), 0);
  ASSERT_EQ(test::run_command(test::lmstack_binary() + " --version", &out), 0);
  EXPECT_NE(out.find("lmstack "), std::string::npos);
  EXPECT_NE(test::run_command(test::lmstack_binary() + " doctor --bogus", &out), 0);
  EXPECT_NE(test::run_command(
                test::lmstack_binary() + " doctor --out /nonexistent/dir/x.json --quick", &out),
            0);
  EXPECT_NE(out.find("lmstack: error: /nonexistent/dir/x.json"), std::string::npos) << out;
}

}  // namespace
}  // namespace lmstack
