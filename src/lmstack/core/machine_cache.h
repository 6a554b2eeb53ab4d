// The machine report that `bench`, `generate` and `calc --gpu this` divide by: the cached
// `lmstack doctor` report (~/.cache/lmstack/doctor.json) when it describes this machine and was
// measured quietly, else a quick probe, cached only when it was quiet (issue 20: a figure
// taken on a busy machine must not become the machine's limit).
#pragma once

#include <optional>
#include <string>

#include "lmstack/core/machine_probe.h"

namespace lmstack {

// `lmstack doctor --quick` and the probe commands run when no usable cache exists: few passes,
// short FMA runs, DRAM arrays capped at 512 MiB.
inline constexpr ProbeOptions kQuickProbe{.quick = true, .max_array_bytes = 512ll << 20};

// ~/.cache/lmstack/doctor.json ($HOME unset: /tmp/.cache/lmstack/doctor.json).
std::string machine_cache_path();

// Why `cached` cannot stand for the machine `here` describes (describe_machine()): another CPU
// model, logical CPU count or feature set (LMSTACK_DISABLE_FEATURES included), or flagged
// busy; nullopt when it can.
std::optional<std::string> machine_cache_mismatch(const MachineReport& cached,
                                                  const MachineReport& here);

// The cached report if usable (a warning names why not), else probe_machine(`probe`) on
// `threads` threads, written to the cache only when not busy. Never throws for a bad or
// unwritable cache file.
// The default probe is `doctor --quick`'s (about a second), since it runs inside another
// command; `lmstack doctor --out` writes the full measurement.
MachineReport cached_or_probed_machine(int threads, const ProbeOptions& probe = kQuickProbe);

}  // namespace lmstack
