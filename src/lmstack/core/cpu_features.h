// CPU feature detection, including the OS-support checks: XGETBV for the AVX and AVX-512
// register state, and for AMX the Linux permission request (arch_prctl ARCH_REQ_XCOMP_PERM)
// without which the first tile instruction faults.
//
// Features can be switched off for testing with the environment variable
// LMSTACK_DISABLE_FEATURES, a comma-separated list of feature names (see kFeatureNames) or
// "all" (scalar code only); switching off a feature also switches off those that need it
// (avx512f takes every avx512_* and amx_* with it). Detection runs once per process.
#pragma once

#include <string>
#include <vector>

namespace lmstack {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx512_fp16 = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // What the CPU reports, before OS checks and the environment override.
  bool cpu_has_amx = false;
  // AMX: the kernel granted the tile-data permission.
  bool amx_permitted = false;

  // The AVX-512 subset lmstack's *_avx512.cc files are compiled for (F, BW, VL, DQ).
  bool has_avx512() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  bool has_avx2_fma() const { return avx2 && fma && f16c; }
  // Names of the enabled features, in kFeatureNames order.
  std::vector<std::string> enabled_names() const;
};

inline constexpr const char* kFeatureNames[] = {
    "avx2",        "fma",         "f16c",        "avx512f",  "avx512bw", "avx512vl", "avx512dq",
    "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};

// The features of this machine after the LMSTACK_DISABLE_FEATURES override.
const CpuFeatures& cpu_features();
// Detection with an explicit disable list (same syntax as the environment variable); used by
// tests. Does not change what cpu_features() returns.
CpuFeatures detect_cpu_features(const std::string& disable_list);

// The CPU's brand string from CPUID leaves 0x80000002-4, trimmed.
std::string cpu_brand_string();

}  // namespace lmstack
