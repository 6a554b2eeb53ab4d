// MachineReport <-> JSON (schema documented in docs/formats/doctor.md), and query_gpu() for
// builds without CUDA (the CUDA build's version lives in core/cuda/gpu_info.cc).
#include "lmstack/core/machine_probe.h"

namespace lmstack {

Json machine_report_to_json(const MachineReport& r) {
  Json caches = Json::array();
  for (const CacheInfo& c : r.caches)
    caches.push_back(
        {{"level", c.level}, {"bytes", c.bytes}, {"shared_by_cpus", c.shared_by_cpus}});
  Json j = {
      {"schema", "lmstack.doctor.v1"},
      {"cpu",
       {{"model", r.cpu_model},
        {"logical_cpus", r.logical_cpus},
        {"physical_cores", r.physical_cores},
        {"threads_used", r.threads_used},
        {"caches", caches},
        {"features", r.features}}},
      {"memory",
       {{"dram_read_gbs", r.dram_read_gbs},
        {"dram_triad_gbs", r.dram_triad_gbs},
        {"llc_read_gbs", r.llc_read_gbs},
        {"dram_array_bytes", r.dram_array_bytes},
        {"triad_array_bytes", r.triad_array_bytes},
        {"llc_array_bytes", r.llc_array_bytes}}},
      {"compute",
       {{"peak_f32_avx2_gflops", r.peak_f32_avx2_gflops},
        {"peak_f32_avx512_gflops", r.peak_f32_avx512_gflops},
        {"peak_bf16_avx512_gflops", r.peak_bf16_avx512_gflops},
        {"peak_bf16_amx_gflops", r.peak_bf16_amx_gflops},
        {"peak_f32_gflops", r.peak_f32_gflops()},
        {"peak_bf16_gflops", r.peak_bf16_gflops()}}},
      {"roofline", {{"ridge_f32_flop_per_byte", r.ridge_f32_flop_per_byte()}}},
      {"gpu", nullptr},
      {"quality",
       {{"load_average_1min", r.quality.load_average_1min},
        {"other_cpu_fraction", r.quality.other_cpu_fraction},
        {"worst_disagreement", r.quality.worst_disagreement},
        {"busy", r.quality.busy()},
        {"busy_reasons", r.quality.busy_reasons}}},
  };
  if (r.gpu) {
    j["gpu"] = {{"name", r.gpu->name},
                {"memory_bytes", r.gpu->memory_bytes},
                {"sm_count", r.gpu->sm_count},
                {"compute_capability", std::to_string(r.gpu->compute_capability_major) + "." +
                                           std::to_string(r.gpu->compute_capability_minor)}};
  }
  return j;
}

MachineReport machine_report_from_json(const Json& j, const std::string& source) {
  MachineReport r;
  const Json cpu = require<Json>(j, "cpu", source);
  const Json mem = require<Json>(j, "memory", source);
  const Json comp = require<Json>(j, "compute", source);
  r.cpu_model = require<std::string>(cpu, "model", source + ": cpu");
  r.logical_cpus = require<int>(cpu, "logical_cpus", source + ": cpu");
  r.physical_cores = require<int>(cpu, "physical_cores", source + ": cpu");
  r.threads_used = optional<int>(cpu, "threads_used", 0, source + ": cpu");
  r.features = optional<std::vector<std::string>>(cpu, "features", {}, source + ": cpu");
  for (const Json& c : optional<Json>(cpu, "caches", Json::array(), source + ": cpu"))
    r.caches.push_back({require<int>(c, "level", source + ": cache"),
                        require<int64_t>(c, "bytes", source + ": cache"),
                        optional<int>(c, "shared_by_cpus", 1, source + ": cache")});
  r.dram_read_gbs = require<double>(mem, "dram_read_gbs", source + ": memory");
  r.dram_triad_gbs = optional<double>(mem, "dram_triad_gbs", 0, source + ": memory");
  r.llc_read_gbs = optional<double>(mem, "llc_read_gbs", 0, source + ": memory");
  r.dram_array_bytes = optional<int64_t>(mem, "dram_array_bytes", 0, source + ": memory");
  r.triad_array_bytes = optional<int64_t>(mem, "triad_array_bytes", 0, source + ": memory");
  r.llc_array_bytes = optional<int64_t>(mem, "llc_array_bytes", 0, source + ": memory");
  r.peak_f32_avx2_gflops = optional<double>(comp, "peak_f32_avx2_gflops", 0, source + ": compute");
  r.peak_f32_avx512_gflops =
      optional<double>(comp, "peak_f32_avx512_gflops", 0, source + ": compute");
  r.peak_bf16_avx512_gflops =
      optional<double>(comp, "peak_bf16_avx512_gflops", 0, source + ": compute");
  r.peak_bf16_amx_gflops = optional<double>(comp, "peak_bf16_amx_gflops", 0, source + ": compute");
  if (j.contains("quality") && j["quality"].is_object()) {
    const Json& q = j["quality"];
    const std::string src = source + ": quality";
    r.quality.load_average_1min = optional<double>(q, "load_average_1min", 0, src);
    r.quality.other_cpu_fraction = optional<double>(q, "other_cpu_fraction", 0, src);
    r.quality.worst_disagreement = optional<double>(q, "worst_disagreement", 0, src);
    r.quality.busy_reasons = optional<std::vector<std::string>>(q, "busy_reasons", {}, src);
    if (optional<bool>(q, "busy", false, src) && r.quality.busy_reasons.empty())
      r.quality.busy_reasons.push_back("flagged busy in " + source);
  }
  if (j.contains("gpu") && j["gpu"].is_object()) {
    GpuInfo g;
    g.name = require<std::string>(j["gpu"], "name", source + ": gpu");
    g.memory_bytes = require<int64_t>(j["gpu"], "memory_bytes", source + ": gpu");
    g.sm_count = require<int>(j["gpu"], "sm_count", source + ": gpu");
    r.gpu = g;
  }
  return r;
}

#ifndef LMSTACK_HAVE_CUDA
std::optional<GpuInfo> query_gpu() { return std::nullopt; }
#endif

}  // namespace lmstack
