// What `lmstack doctor` measures: the CPU, its caches and features, memory bandwidth (DRAM
// and last-level-cache resident), peak FMA throughput per instruction set, the roofline
// ridge point, and the GPU when a CUDA build finds one. `bench` and `calc` read the JSON
// form (schema in docs/formats/doctor.md) as "this machine".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack {

class ThreadPool;

struct CacheInfo {
  int level = 0;
  int64_t bytes = 0;
  int shared_by_cpus = 1;  // logical CPUs sharing one instance
};

struct GpuInfo {
  std::string name;
  int64_t memory_bytes = 0;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

struct MachineReport {
  std::string cpu_model;
  int logical_cpus = 0;
  int physical_cores = 0;
  int threads_used = 0;
  std::vector<CacheInfo> caches;  // data/unified caches, L1 first
  std::vector<std::string> features;

  // GB/s = 1e9 bytes/s. Medians of repeated passes.
  double dram_read_gbs = 0;   // multi-threaded read-only sum over arrays >> LLC
  double dram_triad_gbs = 0;  // STREAM triad a = b + s*c, counting 3 arrays (no write-allocate)
  double llc_read_gbs = 0;    // read-only sum over an array resident in the LLC
  int64_t dram_array_bytes = 0;
  int64_t llc_array_bytes = 0;

  // GFLOP/s = 1e9 FLOP/s, an FMA counting 2 FLOPs; 0 when the ISA is absent.
  double peak_f32_avx2_gflops = 0;
  double peak_f32_avx512_gflops = 0;
  double peak_bf16_avx512_gflops = 0;  // vdpbf16ps
  double peak_bf16_amx_gflops = 0;     // tdpbf16ps
  double peak_f32_gflops() const;      // best f32 path
  double peak_bf16_gflops() const;     // best bf16 path (0 if none)
  // Ridge point of the f32 roofline against DRAM: FLOP per byte.
  double ridge_f32_flop_per_byte() const;

  std::optional<GpuInfo> gpu;
};

struct ProbeOptions {
  double seconds_per_test = 0.3;  // lower bound of time spent per measurement
  bool quick = false;             // smaller arrays and fewer passes (tests)
};

// Reads /proc and sysfs and runs the measurements on `pool`'s threads.
MachineReport probe_machine(ThreadPool& pool, const ProbeOptions& options);
// Only the static facts (model, cores, caches, features, GPU); no timing.
MachineReport describe_machine();

Json machine_report_to_json(const MachineReport& r);
// Parses what machine_report_to_json wrote; ConfigError naming `source` and the field.
MachineReport machine_report_from_json(const Json& j, const std::string& source);

// The GPU of a CUDA build, or nullopt (no CUDA build, no device, or a driver error).
std::optional<GpuInfo> query_gpu();

// ISA-specific measurement loops (machine_probe_avx512.cc, machine_probe_amx.cc). Each runs
// `iterations` of its inner loop on the calling thread and returns the FLOPs executed.
double fma_loop_f32_avx2(int64_t iterations);
double fma_loop_f32_avx512(int64_t iterations);
double dot_loop_bf16_avx512(int64_t iterations);
double tile_loop_bf16_amx(int64_t iterations);

}  // namespace lmstack
