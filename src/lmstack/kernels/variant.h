// A kernel variant: one implementation of an op for one instruction set. Each op keeps a
// table of its variants, best first, ending with the scalar reference; dispatch picks the
// first whose `supported()` is true, and tests run every supported one against the reference.
#pragma once

#include <span>

namespace lmstack::kernels {

template <class Fn>
struct KernelVariant {
  const char* name;     // "ref", "avx2", "avx512", "avx512_bf16", "amx"
  Fn* fn;               // the implementation
  bool (*supported)();  // true when cpu_features() allows it on this machine
};

// The first supported variant of a table (the reference, last, is always supported).
template <class Fn>
Fn* pick_variant(std::span<const KernelVariant<Fn>> table) {
  for (const auto& v : table)
    if (v.supported()) return v.fn;
  return table.back().fn;
}

}  // namespace lmstack::kernels
