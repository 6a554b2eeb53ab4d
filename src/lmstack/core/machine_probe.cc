// Machine description and measurement for `lmstack doctor` (see machine_probe.h).
// Bandwidth follows STREAM's conventions (McCalpin): bytes counted are those the kernel names
// (triad: 2 reads + 1 write per element), arrays sized 8 times the last-level cache. Each
// figure is the best of repeated passes; how far the median falls below it, the load average
// and other processes' CPU time decide whether the report may stand as the machine's limit.
#include "lmstack/core/machine_probe.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "lmstack/core/cpu_features.h"
#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/core/timer.h"

namespace lmstack {
namespace {

std::string read_sysfs(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

int64_t parse_cache_size(const std::string& s) {  // "48K", "2048K", "260M"
  if (s.empty()) return 0;
  int64_t v = std::stoll(s);
  const char unit = s.back();
  if (unit == 'K') v <<= 10;
  if (unit == 'M') v <<= 20;
  return v;
}

int count_cpu_list(const std::string& list) {  // "0-1,4" -> 3
  int n = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string part = list.substr(pos, end - pos);
    const size_t dash = part.find('-');
    n += dash == std::string::npos ? 1 : std::stoi(part.substr(dash + 1)) - std::stoi(part) + 1;
    pos = end + 1;
  }
  return std::max(n, 1);
}

std::vector<CacheInfo> read_caches() {
  std::vector<CacheInfo> caches;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string type = read_sysfs(dir + "type");
    if (type.empty()) break;
    if (type == "Instruction") continue;
    CacheInfo c;
    c.level = std::stoi(read_sysfs(dir + "level"));
    c.bytes = parse_cache_size(read_sysfs(dir + "size"));
    c.shared_by_cpus = count_cpu_list(read_sysfs(dir + "shared_cpu_list"));
    caches.push_back(c);
  }
  return caches;
}

// Sum of n floats; 4 independent accumulators keep the loads, not the adds, the limit.
float read_sum_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float lanes[8];
  _mm256_storeu_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += p[i];
  return total;
}

// The best and the median of repeated measurements; `disagreement` (best - median) / best.
struct Repeated {
  double best = 0, median = 0;
  double disagreement() const { return best > 0 ? (best - median) / best : 0; }
};

Repeated best_and_median(const std::vector<double>& v) {
  return {*std::max_element(v.begin(), v.end()), median(v)};
}

// GB/s of `passes` runs of fn over all threads, each pass moving `bytes`.
template <class Fn>
Repeated measure_gbs(ThreadPool& pool, int64_t bytes, int passes, Fn fn) {
  std::vector<double> gbs;
  for (int p = 0; p < passes; ++p) {
    Timer t;
    pool.run_on_all(fn);
    gbs.push_back(static_cast<double>(bytes) / t.seconds() / 1e9);
  }
  return best_and_median(gbs);
}

Repeated measure_read_gbs(ThreadPool& pool, int64_t bytes, int passes) {
  const int64_t n = bytes / 4 / 64 * 64;
  HostBuffer buf(static_cast<size_t>(n) * 4, MemoryCategory::kBuffers);
  float* a = static_cast<float*>(buf.data());
  const int threads = pool.num_threads();
  pool.parallel_for(n, [&](int64_t b, int64_t e) { std::fill(a + b, a + e, 1.0f); });
  std::vector<float> sink(static_cast<size_t>(threads));
  auto pass = [&](int t) {
    const int64_t b = n * t / threads / 32 * 32, e = n * (t + 1) / threads / 32 * 32;
    sink[static_cast<size_t>(t)] += read_sum_avx2(a + b, e - b);
  };
  pool.run_on_all(pass);  // warm-up
  return measure_gbs(pool, n * 4, passes, pass);
}

Repeated measure_triad_gbs(ThreadPool& pool, int64_t bytes_per_array, int passes) {
  const int64_t n = bytes_per_array / 4 / 64 * 64;
  HostBuffer ba(static_cast<size_t>(n) * 4, MemoryCategory::kBuffers);
  HostBuffer bb(static_cast<size_t>(n) * 4, MemoryCategory::kBuffers);
  HostBuffer bc(static_cast<size_t>(n) * 4, MemoryCategory::kBuffers);
  float *a = static_cast<float*>(ba.data()), *b = static_cast<float*>(bb.data()),
        *c = static_cast<float*>(bc.data());
  const int threads = pool.num_threads();
  pool.parallel_for(n, [&](int64_t s, int64_t e) {
    std::fill(a + s, a + e, 0.0f);
    std::fill(b + s, b + e, 1.0f);
    std::fill(c + s, c + e, 2.0f);
  });
  auto pass = [&](int t) {
    const int64_t s = n * t / threads / 8 * 8, e = n * (t + 1) / threads / 8 * 8;
    const __m256 k = _mm256_set1_ps(3.0f);
    for (int64_t i = s; i < e; i += 8)
      _mm256_store_ps(a + i, _mm256_fmadd_ps(k, _mm256_load_ps(c + i), _mm256_load_ps(b + i)));
  };
  pool.run_on_all(pass);
  return measure_gbs(pool, 3 * n * 4, passes, pass);
}

// Total GFLOP/s of loop() run on every thread for about `seconds`, three times.
Repeated measure_gflops(ThreadPool& pool, double seconds, double (*loop)(int64_t)) {
  Timer calib;
  int64_t iters = 1 << 14;
  while (true) {
    calib.reset();
    loop(iters);
    if (calib.seconds() > 0.02) break;
    iters *= 2;
  }
  const int64_t run_iters = std::max<int64_t>(1, static_cast<int64_t>(iters * seconds / 0.02 / 3));
  std::vector<double> gflops;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<double> flops(static_cast<size_t>(pool.num_threads()));
    Timer t;
    pool.run_on_all([&](int i) { flops[static_cast<size_t>(i)] = loop(run_iters); });
    double total = 0;
    for (double f : flops) total += f;
    gflops.push_back(total / t.seconds() / 1e9);
  }
  return best_and_median(gflops);
}

// Jiffies of all CPUs: {busy, total} from /proc/stat's "cpu" line, and this process's own
// (utime + stime of /proc/self/stat, every thread). Zeros where /proc is unreadable.
struct CpuTimes {
  double busy = 0, total = 0, self = 0;
};

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::istringstream all(read_sysfs("/proc/stat"));
  std::string label;
  all >> label;
  double v = 0;
  for (int field = 0; all >> v; ++field) {
    t.total += v;
    if (field != 3 && field != 4) t.busy += v;  // idle, iowait
  }
  const std::string self = read_sysfs("/proc/self/stat");
  const size_t paren = self.rfind(')');  // the command name may hold spaces
  if (paren != std::string::npos) {
    std::istringstream in(self.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 15 && in >> field; ++i)  // fields 14 and 15: utime, stime
      if (i == 14 || i == 15) t.self += std::stod(field);
  }
  return t;
}

double load_average_1min() {
  std::istringstream in(read_sysfs("/proc/loadavg"));
  double load = 0;
  in >> load;
  return load;
}

int count_physical_cores() {
  std::set<std::string> cores;
  const int logical = static_cast<int>(std::thread::hardware_concurrency());
  for (int cpu = 0; cpu < logical; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    cores.insert(read_sysfs(base + "physical_package_id") + ":" + read_sysfs(base + "core_id"));
  }
  return std::max<int>(1, static_cast<int>(cores.size()));
}

}  // namespace

double MachineReport::peak_f32_gflops() const {
  return std::max(peak_f32_avx2_gflops, peak_f32_avx512_gflops);
}
double MachineReport::peak_bf16_gflops() const {
  return std::max(peak_bf16_avx512_gflops, peak_bf16_amx_gflops);
}
double MachineReport::ridge_f32_flop_per_byte() const {
  return dram_read_gbs > 0 ? peak_f32_gflops() / dram_read_gbs : 0;
}

MachineReport describe_machine() {
  MachineReport r;
  r.cpu_model = cpu_brand_string();
  r.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  r.physical_cores = count_physical_cores();
  r.caches = read_caches();
  r.features = cpu_features().enabled_names();
  r.gpu = query_gpu();
  return r;
}

DramArraySizes dram_array_sizes(int64_t llc_bytes, int64_t physical_memory_bytes) {
  constexpr int64_t kFloor = 256ll << 20;
  DramArraySizes s{std::max(8 * llc_bytes, kFloor), std::max(4 * llc_bytes, kFloor)};
  if (physical_memory_bytes > 0) {
    const int64_t budget = physical_memory_bytes / 4;
    s.triad_bytes_each = std::min(s.triad_bytes_each, budget / 3);
    s.read_bytes = std::min(s.read_bytes, budget);
  }
  return s;
}

ProbeQuality assess_probe_quality(double load_average, double other_cpu_fraction,
                                  double worst_disagreement, int logical_cpus) {
  ProbeQuality q{load_average, other_cpu_fraction, worst_disagreement, {}};
  if (load_average >= 0.5 * logical_cpus)
    q.busy_reasons.push_back(
        fmt::format("load average {:.2f} on {} logical CPUs", load_average, logical_cpus));
  if (other_cpu_fraction > 0.10)
    q.busy_reasons.push_back(
        fmt::format("other processes used {:.0f}% of the CPU time while it measured",
                    100 * other_cpu_fraction));
  if (worst_disagreement > 0.10)
    q.busy_reasons.push_back(fmt::format("repeated passes disagreed by {:.0f}% (best vs median)",
                                         100 * worst_disagreement));
  return q;
}

MachineReport probe_machine(ThreadPool& pool, const ProbeOptions& options) {
  MachineReport r = describe_machine();
  r.threads_used = pool.num_threads();
  const double load = load_average_1min();
  const CpuTimes before = read_cpu_times();
  const int64_t llc = r.caches.empty() ? (32ll << 20) : r.caches.back().bytes;
  const int passes = options.quick ? 3 : 7;
  const DramArraySizes sizes =
      dram_array_sizes(llc, static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE));
  const int64_t cap = options.max_array_bytes > 0 ? options.max_array_bytes : INT64_MAX;
  r.dram_array_bytes = std::min(sizes.read_bytes, cap);
  r.triad_array_bytes = std::min(sizes.triad_bytes_each, cap);
  r.llc_array_bytes = llc / 4;
  double worst = 0;
  const auto keep = [&worst](Repeated m) {
    worst = std::max(worst, m.disagreement());
    return m.best;
  };
  r.dram_read_gbs = keep(measure_read_gbs(pool, r.dram_array_bytes, passes));
  r.dram_triad_gbs = keep(measure_triad_gbs(pool, r.triad_array_bytes, passes));
  // LLC and bf16 figures are not limits the reports divide by; their noise does not flag.
  r.llc_read_gbs = measure_read_gbs(pool, r.llc_array_bytes, passes * 3).best;
  const CpuFeatures& f = cpu_features();
  const double s = options.quick ? 0.05 : options.seconds_per_test;
  if (f.has_avx2_fma()) r.peak_f32_avx2_gflops = keep(measure_gflops(pool, s, fma_loop_f32_avx2));
  if (f.has_avx512()) r.peak_f32_avx512_gflops = keep(measure_gflops(pool, s, fma_loop_f32_avx512));
  if (f.has_avx512() && f.avx512_bf16)
    r.peak_bf16_avx512_gflops = measure_gflops(pool, s, dot_loop_bf16_avx512).best;
  if (f.amx_bf16) r.peak_bf16_amx_gflops = measure_gflops(pool, s, tile_loop_bf16_amx).best;
  const CpuTimes after = read_cpu_times();
  const double total = after.total - before.total;
  const double others = (after.busy - before.busy) - (after.self - before.self);
  r.quality = assess_probe_quality(load, total > 0 ? std::max(0.0, others / total) : 0, worst,
                                   r.logical_cpus);
  return r;
}

double fma_loop_f32_avx2(int64_t iterations) {
  // 12 independent accumulators cover 2 FMA ports x 4-5 cycles of latency.
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += _mm256_cvtss_f32(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return static_cast<double>(iterations) * 12 * 8 * 2;
}

}  // namespace lmstack
