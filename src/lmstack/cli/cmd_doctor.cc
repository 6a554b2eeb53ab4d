// `lmstack doctor`: describe and measure this machine (machine_probe.h).
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/file.h"
#include "lmstack/core/log.h"
#include "lmstack/core/machine_cache.h"
#include "lmstack/core/thread_pool.h"

namespace lmstack::cli {
namespace {

struct DoctorOptions {
  int threads = 1;
  bool json = false;
  bool quick = false;
  std::string out;
};

void print_report(const MachineReport& r) {
  std::printf("CPU          %s\n", r.cpu_model.c_str());
  std::printf("cores        %d physical, %d logical; measured with %d threads\n", r.physical_cores,
              r.logical_cpus, r.threads_used);
  for (const CacheInfo& c : r.caches)
    std::printf("cache L%d     %.1f KiB (shared by %d CPUs)\n", c.level,
                static_cast<double>(c.bytes) / 1024, c.shared_by_cpus);
  std::string features;
  for (const auto& f : r.features) features += f + " ";
  std::printf("features     %s\n", features.c_str());
  std::printf("DRAM read    %7.1f GB/s  (read-only sum over %.0f MiB)\n", r.dram_read_gbs,
              static_cast<double>(r.dram_array_bytes) / (1 << 20));
  std::printf("DRAM triad   %7.1f GB/s  (STREAM a = b + s*c, 3 arrays counted)\n",
              r.dram_triad_gbs);
  std::printf("LLC read     %7.1f GB/s  (read-only sum over %.0f MiB, cache resident)\n",
              r.llc_read_gbs, static_cast<double>(r.llc_array_bytes) / (1 << 20));
  std::printf("f32 FMA      %7.1f GFLOP/s AVX2   %7.1f GFLOP/s AVX-512\n", r.peak_f32_avx2_gflops,
              r.peak_f32_avx512_gflops);
  std::printf("bf16         %7.1f GFLOP/s vdpbf16ps   %7.1f GFLOP/s AMX tdpbf16ps\n",
              r.peak_bf16_avx512_gflops, r.peak_bf16_amx_gflops);
  std::printf(
      "ridge point  %7.1f FLOP/byte (f32 peak / DRAM read): kernels below it are "
      "bandwidth-bound\n",
      r.ridge_f32_flop_per_byte());
  const ProbeQuality& q = r.quality;
  std::printf(
      "quiet?       load average %.2f, other processes %.0f%% of CPU time, passes within "
      "%.0f%%: %s\n",
      q.load_average_1min, 100 * q.other_cpu_fraction, 100 * q.worst_disagreement,
      q.busy() ? "BUSY" : "yes");
  for (const std::string& reason : q.busy_reasons)
    std::printf("             busy: %s (this report will not be used as the machine's limit)\n",
                reason.c_str());
  if (r.gpu)
    std::printf("GPU          %s, %.1f GiB, %d SMs\n", r.gpu->name.c_str(),
                static_cast<double>(r.gpu->memory_bytes) / (1ll << 30), r.gpu->sm_count);
  else
    std::printf("GPU          none (no CUDA build or no device)\n");
}

std::function<int()> setup(CLI::App& app) {
  auto opt = std::make_shared<DoctorOptions>();
  add_threads_option(app, opt->threads);
  app.add_flag("--json", opt->json, "print the report as JSON (schema: docs/formats/doctor.md)");
  app.add_flag("--quick", opt->quick,
               "fewer passes, shorter FMA runs, DRAM arrays capped at 512 MiB (less accurate)");
  app.add_option("--out", opt->out, "also write the JSON report to this file");
  return [opt] {
    ThreadPool pool(opt->threads);
    const MachineReport r = probe_machine(pool, opt->quick ? kQuickProbe : ProbeOptions{});
    const std::string json = machine_report_to_json(r).dump(2);
    if (!opt->out.empty()) write_file_atomic(opt->out, json + "\n");
    if (r.quality.busy())
      log_warn("the machine was busy while measured ({}); rerun on a quiet machine",
               r.quality.busy_reasons.front());
    if (opt->json)
      std::printf("%s\n", json.c_str());
    else
      print_report(r);
    return 0;
  };
}

const RegisterCommand kRegister{{"doctor",
                                 "describe this machine and measure its bandwidth and FLOP/s",
                                 "  lmstack doctor\n  lmstack doctor --json --out doctor.json\n"
                                 "  lmstack doctor --out ~/.cache/lmstack/doctor.json   # the "
                                 "cache bench/generate/calc use (ignored if flagged busy)\n"
                                 "  lmstack doctor --threads 1 --quick",
                                 setup}};

}  // namespace
}  // namespace lmstack::cli
