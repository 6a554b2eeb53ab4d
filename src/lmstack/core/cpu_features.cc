// CPUID / XGETBV feature detection (Intel SDM vol. 2A, CPUID leaf 7; vol. 1 ch. 13 for XCR0)
// and the Linux AMX permission request (Documentation/arch/x86/xstate.rst).
#include "lmstack/core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace lmstack {
namespace {

constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl code
constexpr long kXfeatureXtiledata = 18;

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  __cpuid_count(leaf, sub, r.a, r.b, r.c, r.d);
  return r;
}

unsigned long long xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) { return ((v >> i) & 1u) != 0; }

bool request_amx_permission() {
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

bool* field(CpuFeatures& f, const std::string& name) {
  bool* fields[] = {&f.avx2,     &f.fma,      &f.f16c,        &f.avx512f,     &f.avx512bw,
                    &f.avx512vl, &f.avx512dq, &f.avx512_bf16, &f.avx512_vnni, &f.avx512_fp16,
                    &f.amx_tile, &f.amx_bf16, &f.amx_int8};
  static_assert(std::size(fields) == std::size(kFeatureNames));
  for (size_t i = 0; i < std::size(kFeatureNames); ++i)
    if (name == kFeatureNames[i]) return fields[i];
  return nullptr;
}

void apply_disable_list(CpuFeatures& f, const std::string& list) {
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name == "all") {
      f = CpuFeatures{.cpu_has_amx = f.cpu_has_amx, .amx_permitted = f.amx_permitted};
      return;
    }
    if (bool* p = field(f, name)) *p = false;
  }
  // Dependents go with what they need.
  if (!f.avx2 || !f.fma) f.avx512f = false;
  if (!f.avx512f) {
    f.avx512bw = f.avx512vl = f.avx512dq = false;
    f.avx512_bf16 = f.avx512_vnni = f.avx512_fp16 = false;
  }
  if (!f.avx512f || !f.amx_tile) f.amx_tile = f.amx_bf16 = f.amx_int8 = false;
}

CpuFeatures detect_raw() {
  CpuFeatures f;
  const unsigned max_leaf = cpuid(0, 0).a;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;          // XMM + YMM state
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;     // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
  f.fma = os_avx && bit(l1.c, 12);
  f.f16c = os_avx && bit(l1.c, 29);
  if (max_leaf < 7) return f;
  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  f.avx2 = os_avx && bit(l7.b, 5);
  f.avx512f = os_avx512 && bit(l7.b, 16);
  f.avx512dq = f.avx512f && bit(l7.b, 17);
  f.avx512bw = f.avx512f && bit(l7.b, 30);
  f.avx512vl = f.avx512f && bit(l7.b, 31);
  f.avx512_vnni = f.avx512f && bit(l7.c, 11);
  f.avx512_fp16 = f.avx512f && bit(l7.d, 23);
  f.avx512_bf16 = f.avx512f && bit(l7s1.a, 5);
  f.cpu_has_amx = bit(l7.d, 24);
  if (f.cpu_has_amx && os_amx) f.amx_permitted = request_amx_permission();
  f.amx_tile = f.cpu_has_amx && os_amx && f.amx_permitted;
  f.amx_bf16 = f.amx_tile && bit(l7.d, 22);
  f.amx_int8 = f.amx_tile && bit(l7.d, 25);
  return f;
}

}  // namespace

std::vector<std::string> CpuFeatures::enabled_names() const {
  std::vector<std::string> names;
  CpuFeatures copy = *this;
  for (const char* n : kFeatureNames)
    if (*field(copy, n)) names.emplace_back(n);
  return names;
}

CpuFeatures detect_cpu_features(const std::string& disable_list) {
  CpuFeatures f = detect_raw();
  apply_disable_list(f, disable_list);
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    const char* env = std::getenv("LMSTACK_DISABLE_FEATURES");
    return detect_cpu_features(env ? env : "");
  }();
  return features;
}

std::string cpu_brand_string() {
  if (cpuid(0x80000000u, 0).a < 0x80000004u) return "unknown";
  char brand[49] = {};
  for (unsigned i = 0; i < 3; ++i) {
    const Regs r = cpuid(0x80000002u + i, 0);
    std::memcpy(brand + 16 * i, &r, 16);
  }
  std::string s(brand);
  const size_t b = s.find_first_not_of(' ');
  const size_t e = s.find_last_not_of(' ');
  return b == std::string::npos ? "unknown" : s.substr(b, e - b + 1);
}

}  // namespace lmstack
