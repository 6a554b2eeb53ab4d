// The doctor cache, keyed by what the measurements depend on (machine_cache.h).
#include "lmstack/core/machine_cache.h"

#include <cstdlib>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/log.h"
#include "lmstack/core/thread_pool.h"

namespace lmstack {

std::string machine_cache_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/lmstack/doctor.json";
}

std::optional<std::string> machine_cache_mismatch(const MachineReport& cached,
                                                  const MachineReport& here) {
  if (cached.cpu_model != here.cpu_model)
    return fmt::format("measured on '{}', this CPU is '{}'", cached.cpu_model, here.cpu_model);
  if (cached.logical_cpus != here.logical_cpus)
    return fmt::format("measured with {} logical CPUs, this machine has {}", cached.logical_cpus,
                       here.logical_cpus);
  if (cached.features != here.features)
    return std::string("measured with another set of CPU features (LMSTACK_DISABLE_FEATURES?)");
  if (cached.quality.busy())
    return "measured on a busy machine: " + cached.quality.busy_reasons.front();
  return std::nullopt;
}

MachineReport cached_or_probed_machine(int threads, const ProbeOptions& probe) {
  const std::string cache = machine_cache_path();
  if (file_exists(cache)) {
    try {
      const MachineReport cached = machine_report_from_json(read_json_file(cache), cache);
      const auto mismatch = machine_cache_mismatch(cached, describe_machine());
      if (!mismatch) return cached;
      log_warn("not using {}: {}", cache, *mismatch);
    } catch (const Error& e) {
      log_warn("ignoring {}: {}", cache, e.what());
    }
  }
  log_info("measuring this machine (lmstack doctor --quick)");
  ThreadPool pool(threads);
  const MachineReport r = probe_machine(pool, probe);
  if (r.quality.busy()) {
    log_warn("the machine was busy ({}): these limits are used for this run only, not cached",
             r.quality.busy_reasons.front());
    return r;
  }
  try {
    make_directories(cache.substr(0, cache.rfind('/')));
    write_file_atomic(cache, machine_report_to_json(r).dump(2));
  } catch (const Error& e) {
    log_warn("could not cache the machine report: {}", e.what());
  }
  return r;
}

}  // namespace lmstack
