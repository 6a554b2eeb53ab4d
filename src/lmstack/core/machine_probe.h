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

// How quiet the machine was while it was measured. A limit measured under load understates the
// machine, and every later "% of this machine's limit" would flatter lmstack, so such a report
// is flagged and never cached (machine_cache.h).
struct ProbeQuality {
  double load_average_1min = 0;   // /proc/loadavg when the probe started
  double other_cpu_fraction = 0;  // CPU time of other processes during the probe / all CPU time
  double worst_disagreement = 0;  // max over measurements of (best - median) / best
  std::vector<std::string> busy_reasons;  // empty: the report can stand as the machine's limit
  bool busy() const { return !busy_reasons.empty(); }
};

// The rules (issue 20): load average >= half the logical CPUs, other processes using more than
// 10% of the CPU time during the probe, or repeated passes of one measurement disagreeing by
// more than 10% each flag the report busy, with a reason naming the figure.
ProbeQuality assess_probe_quality(double load_average_1min, double other_cpu_fraction,
                                  double worst_disagreement, int logical_cpus);

struct MachineReport {
  std::string cpu_model;
  int logical_cpus = 0;
  int physical_cores = 0;
  int threads_used = 0;
  std::vector<CacheInfo> caches;  // data/unified caches, L1 first
  std::vector<std::string> features;

  // GB/s = 1e9 bytes/s. The best of repeated passes (a limit is what the machine can reach).
  double dram_read_gbs = 0;       // multi-threaded read-only sum over an array >= 8 x LLC
  double dram_triad_gbs = 0;      // STREAM triad a = b + s*c, counting 3 arrays (no write-allocate)
  double llc_read_gbs = 0;        // read-only sum over an array resident in the LLC
  int64_t dram_array_bytes = 0;   // the read test's array
  int64_t triad_array_bytes = 0;  // each of the triad's three arrays
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
  ProbeQuality quality;  // describe_machine() and reports from before v1.1: all zero, not busy
};

// STREAM's sizing (McCalpin: each array >= 4 x the caches), made stricter for the read test:
// read array 8 x LLC, each triad array 4 x LLC, both at least 256 MiB; capped so the triad's
// three arrays take at most a quarter of physical memory (0: no cap), the read array at that
// same total.
struct DramArraySizes {
  int64_t read_bytes = 0, triad_bytes_each = 0;
};
DramArraySizes dram_array_sizes(int64_t llc_bytes, int64_t physical_memory_bytes);

struct ProbeOptions {
  double seconds_per_test = 0.3;  // lower bound of time spent per measurement
  bool quick = false;             // fewer passes and shorter FMA runs (first use, tests)
  int64_t max_array_bytes = 0;    // > 0: caps the DRAM arrays (`doctor --quick`, tests)
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
