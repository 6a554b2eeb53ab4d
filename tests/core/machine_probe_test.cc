// doctor's measurements: JSON schema, round trip, and sanity of the numbers against the
// detected instruction set (FMA peak must reflect the vector width; bandwidths positive and
// ordered LLC >= DRAM).
#include "lmstack/core/machine_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/file.h"
#include "lmstack/core/machine_cache.h"
#include "lmstack/core/thread_pool.h"
#include "test_util.h"

namespace lmstack {
namespace {

// Few passes over capped arrays: the tests check the plumbing, not this machine's figures.
const ProbeOptions kQuickSmall{.quick = true, .max_array_bytes = 256ll << 20};

TEST(MachineProbe, QuickProbeIsSaneAndRoundTripsThroughJson) {
  ThreadPool pool(1);
  const MachineReport r = probe_machine(pool, kQuickSmall);
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
  EXPECT_EQ(back.quality.busy_reasons, r.quality.busy_reasons);
  EXPECT_EQ(back.quality.other_cpu_fraction, r.quality.other_cpu_fraction);
  // The sizing's floor is 256 MiB, so kQuickSmall's cap makes both exactly that.
  EXPECT_EQ(r.dram_array_bytes, 256ll << 20);
  EXPECT_EQ(r.triad_array_bytes, 256ll << 20);
  EXPECT_GE(r.quality.other_cpu_fraction, 0);
  EXPECT_LE(r.quality.other_cpu_fraction, 1);
}

// Issue 20's rule (read array >= 8 x LLC) and STREAM's (each triad array >= 4 x LLC), with the
// 256 MiB floor and the quarter-of-memory cap, by hand.
TEST(MachineProbe, DramArraysFollowStreamsSizing) {
  const int64_t mib = 1 << 20;
  const DramArraySizes epyc = dram_array_sizes(32 * mib, 0);  // Zen 3: 32 MiB L3
  EXPECT_EQ(epyc.read_bytes, 256 * mib);
  EXPECT_EQ(epyc.triad_bytes_each, 256 * mib);
  const DramArraySizes xeon = dram_array_sizes(105 * mib, 64 * 1024 * mib);
  EXPECT_EQ(xeon.read_bytes, 840 * mib);
  EXPECT_EQ(xeon.triad_bytes_each, 420 * mib);
  const DramArraySizes capped = dram_array_sizes(480 * mib, 24 * 1024 * mib);  // 6 GiB budget
  EXPECT_EQ(capped.read_bytes, 3840 * mib);
  EXPECT_EQ(capped.triad_bytes_each, 1920 * mib);
  const DramArraySizes tight = dram_array_sizes(480 * mib, 8 * 1024 * mib);  // 2 GiB budget
  EXPECT_EQ(tight.read_bytes, 2048 * mib);
  EXPECT_EQ(tight.triad_bytes_each, 2048 * mib / 3);
}

// Each rule flags on its own, at the stated thresholds, and names the figure.
TEST(ProbeQuality, BusyRulesFlagAndNameTheFigure) {
  EXPECT_FALSE(assess_probe_quality(0.2, 0.02, 0.05, 2).busy());
  const ProbeQuality load = assess_probe_quality(1.0, 0.0, 0.0, 2);  // half of 2 CPUs
  ASSERT_EQ(load.busy_reasons.size(), 1u);
  EXPECT_NE(load.busy_reasons[0].find("load average 1.00 on 2"), std::string::npos);
  EXPECT_FALSE(assess_probe_quality(0.99, 0.0, 0.0, 2).busy());
  const ProbeQuality others = assess_probe_quality(0.0, 0.25, 0.0, 2);
  ASSERT_EQ(others.busy_reasons.size(), 1u);
  EXPECT_NE(others.busy_reasons[0].find("25%"), std::string::npos);
  EXPECT_FALSE(assess_probe_quality(0.0, 0.10, 0.10, 2).busy());
  const ProbeQuality noisy = assess_probe_quality(0.0, 0.0, 0.30, 2);
  ASSERT_EQ(noisy.busy_reasons.size(), 1u);
  EXPECT_NE(noisy.busy_reasons[0].find("disagreed by 30%"), std::string::npos);
  EXPECT_EQ(assess_probe_quality(8, 0.5, 0.5, 4).busy_reasons.size(), 3u);
}

// The cache stands for this machine only: same CPU model, CPU count, features, and quiet.
TEST(MachineCache, MismatchNamesWhatDiffers) {
  const MachineReport here = describe_machine();
  EXPECT_FALSE(machine_cache_mismatch(here, here));
  MachineReport other = here;
  other.cpu_model = "AMD EPYC 7B13";
  EXPECT_NE(machine_cache_mismatch(other, here)->find("AMD EPYC 7B13"), std::string::npos);
  other = here;
  other.logical_cpus += 2;
  EXPECT_NE(machine_cache_mismatch(other, here)->find("logical CPUs"), std::string::npos);
  other = here;
  other.features.push_back("imaginary");
  EXPECT_TRUE(machine_cache_mismatch(other, here));
  other = here;
  other.quality = assess_probe_quality(5, 0, 0, 2);
  EXPECT_NE(machine_cache_mismatch(other, here)->find("busy"), std::string::npos);
  // A busy flag survives the JSON round trip, also when only "busy" is present.
  Json j = machine_report_to_json(other);
  j["quality"].erase("busy_reasons");
  EXPECT_TRUE(machine_report_from_json(j, "doctor.json").quality.busy());
}

// cached_or_probed_machine: a matching cache is returned as written (no probe); a cache from
// another CPU is replaced by a fresh probe.
TEST(MachineCache, UsesAMatchingCacheAndReplacesAStaleOne) {
  const std::string home = test::temp_dir("machine_cache_home");
  const char* old_home = std::getenv("HOME");
  const std::string saved = old_home ? old_home : "";
  setenv("HOME", home.c_str(), 1);
  MachineReport fake = describe_machine();
  fake.dram_read_gbs = 12345;  // no machine measures this: it must come from the file
  make_directories(home + "/.cache/lmstack");
  write_file_atomic(machine_cache_path(), machine_report_to_json(fake).dump());
  EXPECT_EQ(cached_or_probed_machine(1, kQuickSmall).dram_read_gbs, 12345);
  fake.cpu_model = "some other CPU";
  write_file_atomic(machine_cache_path(), machine_report_to_json(fake).dump());
  const MachineReport probed = cached_or_probed_machine(1, kQuickSmall);
  EXPECT_NE(probed.dram_read_gbs, 12345);
  EXPECT_EQ(probed.cpu_model, describe_machine().cpu_model);
  if (old_home)
    setenv("HOME", saved.c_str(), 1);
  else
    unsetenv("HOME");
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
