// Feature detection agrees with the kernel's view (/proc/cpuinfo flags), and the disable list
// switches features and their dependents off.
#include "lmstack/core/cpu_features.h"

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace lmstack {
namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::set<std::string> flags;
      std::istringstream ss(line.substr(line.find(':') + 1));
      std::string f;
      while (ss >> f) flags.insert(f);
      return flags;
    }
  }
  return {};
}

TEST(CpuFeatures, AgreesWithProcCpuinfo) {
  const auto flags = proc_cpuinfo_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line";
  const CpuFeatures f = detect_cpu_features("");
  // Linux lists a flag only when the OS supports its state, like our XGETBV checks.
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.f16c, flags.count("f16c") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
  EXPECT_EQ(f.avx512dq, flags.count("avx512dq") == 1);
  EXPECT_EQ(f.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(f.avx512_vnni, flags.count("avx512_vnni") == 1);
  EXPECT_EQ(f.avx512_fp16, flags.count("avx512_fp16") == 1);
  EXPECT_EQ(f.cpu_has_amx, flags.count("amx_tile") == 1);
  if (f.amx_tile) {
    EXPECT_TRUE(f.amx_permitted);
    EXPECT_EQ(f.amx_bf16, flags.count("amx_bf16") == 1);
  }
}

TEST(CpuFeatures, DisableListRemovesFeatureAndDependents) {
  const CpuFeatures all = detect_cpu_features("");
  const CpuFeatures no512 = detect_cpu_features("avx512f");
  EXPECT_FALSE(no512.avx512f);
  EXPECT_FALSE(no512.avx512_bf16);
  EXPECT_FALSE(no512.amx_bf16);
  EXPECT_FALSE(no512.has_avx512());
  EXPECT_EQ(no512.avx2, all.avx2);
  const CpuFeatures none = detect_cpu_features("all");
  EXPECT_TRUE(none.enabled_names().empty());
  const CpuFeatures no_bf16 = detect_cpu_features("avx512_bf16,amx_tile");
  EXPECT_FALSE(no_bf16.avx512_bf16);
  EXPECT_FALSE(no_bf16.amx_bf16);
  EXPECT_EQ(no_bf16.avx512f, all.avx512f);
}

TEST(CpuFeatures, BrandStringIsNotEmpty) { EXPECT_FALSE(cpu_brand_string().empty()); }

}  // namespace
}  // namespace lmstack
