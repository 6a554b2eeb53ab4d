// dtype sizes, the precision a dtype computes at, and `this` machine from a doctor report.
// CPU mapping: "SMs" = physical cores, fp32 peak = doctor's best f32 FMA rate, fp16/bf16 peak =
// its best bf16 rate (or the f32 rate without a bf16 path), bandwidth = DRAM read GB/s.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "lmstack/calc/hardware.h"
#include "lmstack/core/file.h"
#include "lmstack/core/machine_cache.h"
#include "lmstack/core/thread_pool.h"

namespace lmstack::calc {
namespace {

struct DTypeSize {
  const char* name;
  double bytes;
};
constexpr DTypeSize kDTypes[] =
    {
        {"f32", 4},   {"fp32", 4},         {"f16", 2},          {"fp16", 2},
        {"bf16", 2},  {"fp8", 1},          {"int8", 1},         {"int4", 0.5},
        {"fp4", 0.5}, {"q8_0", 34.0 / 32}, {"q4_0", 18.0 / 32},  // GGML blocks: 32 weights + one
                                                                 // f16 scale
};

}  // namespace

const char* precision_name(Precision p) {
  constexpr const char* kNames[kNumPrecisions] = {"fp64", "fp32", "tf32", "fp16/bf16",
                                                  "fp8",  "fp4",  "int8"};
  return kNames[static_cast<int>(p)];
}

double dtype_bytes(const std::string& dtype) {
  for (const DTypeSize& d : kDTypes)
    if (dtype == d.name) return d.bytes;
  std::string known;
  for (const DTypeSize& d : kDTypes) known += std::string(" ") + d.name;
  throw_error<ConfigError>("unknown dtype '{}'; known:{}", dtype, known);
}

double HardwareSpec::compute_flops(const std::string& dtype) const {
  dtype_bytes(dtype);  // validates the name
  Precision p = Precision::kBf16;
  if (dtype == "f32" || dtype == "fp32") p = Precision::kFp32;
  if (dtype == "fp8") p = Precision::kFp8;
  if (dtype == "fp4") p = Precision::kFp4;
  for (int i = static_cast<int>(p); i >= 0; --i)
    if (dense_flops[i] > 0 && i != static_cast<int>(Precision::kTf32)) return dense_flops[i];
  return dense_flops[static_cast<int>(Precision::kFp32)];
}

HardwareSpec hardware_from_doctor(const MachineReport& r, double memory_bytes) {
  if (r.gpu) {
    const std::string& n = r.gpu->name;
    std::string preset;
    if (n.find("H200") != std::string::npos) preset = "h200";
    if (n.find("H100") != std::string::npos)
      preset = n.find("PCIe") != std::string::npos ? "h100-pcie" : "h100-sxm";
    if (n.find("A100") != std::string::npos)
      preset = r.gpu->memory_bytes > 50e9 ? "a100-80g" : "a100-40g";
    if (n.find("V100") != std::string::npos) preset = "v100";
    if (n.find("B200") != std::string::npos) preset = "b200";
    if (!preset.empty()) {
      HardwareSpec h = hardware_preset(preset);
      h.name = "this (" + n + ", as " + preset + ")";
      h.memory_bytes = static_cast<double>(r.gpu->memory_bytes);
      h.sm_count = r.gpu->sm_count;
      return h;
    }
  }
  HardwareSpec h;
  h.name = "this (" + r.cpu_model + ")";
  h.source = "lmstack doctor measurements";
  h.is_cpu = true;
  h.sm_count = r.physical_cores;
  h.dense_flops[static_cast<int>(Precision::kFp32)] = r.peak_f32_gflops() * 1e9;
  const double bf16 = r.peak_bf16_gflops() > 0 ? r.peak_bf16_gflops() : r.peak_f32_gflops();
  h.dense_flops[static_cast<int>(Precision::kBf16)] = bf16 * 1e9;
  h.memory_bw = r.dram_read_gbs * 1e9;
  h.memory_bytes = memory_bytes;
  for (const CacheInfo& c : r.caches)
    if (c.level == 2) h.l2_bytes = static_cast<double>(c.bytes);
  h.intra_node_link = "pcie4";
  return h;
}

HardwareSpec resolve_hardware(const std::string& name, const std::string& machine_file) {
  if (name != "this") return hardware_preset(name);
  if (!machine_file.empty()) {
    // A report from a file may describe another machine: its DRAM size is unknown.
    return hardware_from_doctor(
        machine_report_from_json(read_json_file(machine_file), machine_file), 0);
  }
  const double dram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return hardware_from_doctor(cached_or_probed_machine(ThreadPool::default_num_threads()), dram);
}

}  // namespace lmstack::calc
