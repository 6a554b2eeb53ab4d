// Hardware calc reasons about: accelerators (presets from NVIDIA datasheets, or `this` machine
// from `lmstack doctor --json`) and links (NVLink, PCIe, InfiniBand, RoCE, Ethernet). Units are
// SI: bytes, bytes/s, FLOP/s. Preset values and their sources are in presets_hardware.cc.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "lmstack/core/machine_probe.h"

namespace lmstack::calc {

// Tensor-core / SIMD precisions with a peak rate of their own.
enum class Precision : int { kFp64, kFp32, kTf32, kBf16, kFp8, kFp4, kInt8 };
inline constexpr int kNumPrecisions = 7;
const char* precision_name(Precision p);  // "fp64", "fp32", "tf32", "fp16/bf16", ...

struct HardwareSpec {
  std::string name;
  std::string source;  // where the figures come from
  bool is_cpu = false;
  int sm_count = 0;      // CPU: physical cores
  int cores_per_sm = 0;  // FP32 CUDA cores per SM (CPU: 0)
  double boost_clock_hz = 0;
  // Dense peak FLOP/s per precision (0 = not supported / unknown) and the 2:4 sparse figure.
  std::array<double, kNumPrecisions> dense_flops{};
  std::array<double, kNumPrecisions> sparse_flops{};
  double memory_bytes = 0;  // HBM (CPU: DRAM, 0 = unknown)
  double memory_bw = 0;     // bytes/s
  double smem_per_sm_bytes = 0;
  double l2_bytes = 0;
  double nvlink_bw = 0;         // bytes/s per GPU, both directions summed (datasheet figure)
  double pcie_bw = 0;           // bytes/s per direction
  int nvlink_domain = 1;        // GPUs that share one NVLink/NVSwitch domain
  std::string intra_node_link;  // link preset for traffic inside the domain

  double peak_flops(Precision p) const { return dense_flops[static_cast<int>(p)]; }
  // The peak a dtype computes at: weight-only int8/int4 formats compute in fp16/bf16; a
  // precision the device lacks falls back to the next wider one it has (CPU bf16 -> fp32).
  double compute_flops(const std::string& dtype) const;
  // FP32 CUDA cores = SMs x cores per SM; and SMs x cores x 2 FLOP x clock.
  int64_t cuda_cores() const { return int64_t{sm_count} * cores_per_sm; }
  double fp32_flops_from_clock() const { return 2.0 * cuda_cores() * boost_clock_hz; }
};

struct LinkSpec {
  std::string name;
  std::string source;
  double bw = 0;       // bytes/s per direction per rank (the beta of the alpha-beta model)
  double latency = 0;  // seconds per message hop (the alpha)
};

// Presets by name (case-insensitive). ConfigError listing the known names when unknown.
HardwareSpec hardware_preset(const std::string& name);
std::vector<std::string> hardware_preset_names();
LinkSpec link_preset(const std::string& name);
std::vector<std::string> link_preset_names();

// "this": a doctor report as hardware. A GPU in the report is matched to its preset by name
// (memory and SM count taken from the report); otherwise the CPU: cores, measured DRAM
// bandwidth, measured FMA peaks, `memory_bytes` as given (0 = unknown).
HardwareSpec hardware_from_doctor(const MachineReport& r, double memory_bytes);
// A preset name, or "this": the doctor JSON at `machine_file` if given, else
// ~/.cache/lmstack/doctor.json if present, else a quick probe now (printing a note on stderr).
HardwareSpec resolve_hardware(const std::string& name, const std::string& machine_file = "");

// Bytes per element of a dtype name: f32/fp32 4, bf16/f16/fp16 2, fp8/int8 1, int4/fp4 0.5,
// q8_0 34/32, q4_0 18/32. ConfigError listing the known names otherwise.
double dtype_bytes(const std::string& dtype);

}  // namespace lmstack::calc
