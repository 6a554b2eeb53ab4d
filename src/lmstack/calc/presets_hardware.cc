// Accelerator and link presets. Each figure cites its public source in the comment beside it;
// "2:4 sparse" is NVIDIA's structured-sparsity figure (2x dense). GB = 1e9 B, TB = 1e12 B.
// Where NVIDIA's datasheet gives no figure (B200 SM count and clock), the source says so.
#include <algorithm>
#include <cctype>

#include "lmstack/calc/hardware.h"

namespace lmstack::calc {
namespace {

constexpr double kT = 1e12, kG = 1e9, kKiB = 1024, kMiB = 1024 * 1024;

// Order: fp64, fp32, tf32, fp16/bf16, fp8, fp4, int8 (dense TFLOP/s or TOPS).
using Rates = std::array<double, kNumPrecisions>;
Rates tflops(Rates r) {
  for (double& x : r) x *= kT;
  return r;
}
Rates sparse_of(const Rates& dense, int first_sparse) {  // 2:4 doubles tensor-core rates
  Rates s{};
  for (int i = first_sparse; i < kNumPrecisions; ++i) s[i] = 2 * dense[i];
  return s;
}

HardwareSpec v100() {
  HardwareSpec h;
  h.name = "v100";
  h.source = "NVIDIA Tesla V100 datasheet (SXM2) + Volta whitepaper";
  h.sm_count = 80;                                       // Volta whitepaper table 1: 80 SMs
  h.cores_per_sm = 64;                                   // 64 FP32 cores/SM (5120 total)
  h.boost_clock_hz = 1.53e9;                             // whitepaper: 1530 MHz boost
  h.dense_flops = tflops({7.8, 15.7, 0, 125, 0, 0, 0});  // datasheet: fp16 TC 125 (no bf16/tf32)
  h.memory_bytes = 32 * kG;                              // datasheet: 32 GB HBM2
  h.memory_bw = 900 * kG;                                // datasheet: 900 GB/s
  h.smem_per_sm_bytes = 96 * kKiB;                       // whitepaper: up to 96 KB shared memory/SM
  h.l2_bytes = 6 * kMiB;                                 // whitepaper: 6144 KB L2
  h.nvlink_bw = 300 * kG;                                // datasheet: NVLink 300 GB/s
  h.pcie_bw = 16 * kG;                                   // PCIe Gen3 x16: 32 GB/s both directions
  h.nvlink_domain = 8;
  h.intra_node_link = "nvlink-v100";
  return h;
}

HardwareSpec a100(bool big) {
  HardwareSpec h;
  h.name = big ? "a100-80g" : "a100-40g";
  h.source = "NVIDIA A100 datasheet (SXM) + Ampere GA100 whitepaper";
  h.sm_count = 108;                                           // whitepaper: 108 SMs
  h.cores_per_sm = 64;                                        // 6912 FP32 cores
  h.boost_clock_hz = 1.41e9;                                  // whitepaper: 1410 MHz boost
  h.dense_flops = tflops({19.5, 19.5, 156, 312, 0, 0, 624});  // datasheet (fp64 = TC 19.5)
  h.sparse_flops = sparse_of(h.dense_flops, 2);  // datasheet: tf32 312*, bf16 624*, int8 1248*
  h.memory_bytes = (big ? 80 : 40) * kG;         // datasheet: 40 GB HBM2 / 80 GB HBM2e
  h.memory_bw = big ? 2039 * kG : 1555 * kG;     // datasheet: 1,555 GB/s / 2,039 GB/s
  h.smem_per_sm_bytes = 164 * kKiB;              // whitepaper: 164 KB shared memory/SM
  h.l2_bytes = 40 * kMiB;                        // whitepaper: 40 MB L2
  h.nvlink_bw = 600 * kG;                        // datasheet: NVLink 600 GB/s
  h.pcie_bw = 32 * kG;                           // datasheet: PCIe Gen4 64 GB/s both directions
  h.nvlink_domain = 8;
  h.intra_node_link = "nvlink-a100";
  return h;
}

HardwareSpec hopper(const char* name, bool pcie, double mem_gb, double bw_tbs) {
  HardwareSpec h;
  h.name = name;
  h.source = "NVIDIA H100/H200 datasheets + Hopper whitepaper";
  h.sm_count = pcie ? 114 : 132;               // whitepaper: SXM5 132 SMs, PCIe 114 SMs
  h.cores_per_sm = 128;                        // 128 FP32 cores/SM (16,896 on SXM5)
  h.boost_clock_hz = pcie ? 1.755e9 : 1.98e9;  // max boost: SXM5 1980 MHz, PCIe 1755 MHz
  h.dense_flops = pcie ? tflops({26, 51, 378, 756, 1513, 0, 1513})       // H100 PCIe datasheet
                       : tflops({34, 67, 494.5, 989.5, 1979, 0, 1979});  // H100/H200 SXM
  h.sparse_flops = sparse_of(h.dense_flops, 2);  // datasheet: "with sparsity" = 2x
  h.memory_bytes = mem_gb * kG;                  // datasheet: H100 80 GB, H200 141 GB
  h.memory_bw = bw_tbs * kT;                     // datasheet: 3.35 / 2.0 / 4.8 TB/s
  h.smem_per_sm_bytes = 228 * kKiB;              // whitepaper: 228 KB shared memory/SM
  h.l2_bytes = 50 * kMiB;                        // whitepaper: 50 MB L2
  h.nvlink_bw = (pcie ? 600 : 900) * kG;         // datasheet: NVLink 900 GB/s (PCIe bridge 600)
  h.pcie_bw = 64 * kG;                           // datasheet: PCIe Gen5 128 GB/s both directions
  h.nvlink_domain = pcie ? 2 : 8;
  h.intra_node_link = pcie ? "pcie5" : "nvlink-h100";
  return h;
}

HardwareSpec blackwell(bool nvl72) {
  HardwareSpec h;
  h.name = nvl72 ? "gb200-nvl72" : "b200";
  h.source = nvl72 ? "NVIDIA GB200 NVL72 datasheet (rack figures / 72 GPUs)"
                   : "NVIDIA HGX B200 datasheet (8-GPU figures / 8)";
  h.sm_count = 148;            // not on the datasheet: 2 dies x 74 SMs as reported at launch
  h.cores_per_sm = 128;        // Blackwell SM: 128 FP32 cores (as Hopper)
  h.boost_clock_hz = 1.965e9;  // not on the datasheet: reported boost clock
  h.dense_flops = nvl72 ? tflops({45, 0, 1250, 2500, 5000, 10000, 5000})  // rack /72, sparse/2
                        : tflops({37, 0, 1125, 2250, 4500, 9000, 4500});  // HGX /8, sparse/2
  h.dense_flops[1] = h.fp32_flops_from_clock();  // FP32 not on the datasheets: SMs*128*2*clock
  h.sparse_flops = sparse_of(h.dense_flops, 2);
  h.memory_bytes = nvl72 ? 186 * kG : 180 * kG;  // NVL72 13.4 TB / 72; HGX 1.44 TB / 8
  h.memory_bw = 8 * kT;                          // NVL72 576 TB/s / 72; HGX 64 TB/s / 8
  h.smem_per_sm_bytes = 228 * kKiB;              // Blackwell tuning guide: 228 KB/SM
  h.l2_bytes = 0;                                // not published by NVIDIA
  h.nvlink_bw = 1800 * kG;                       // NVLink 5: 1.8 TB/s per GPU
  h.pcie_bw = 64 * kG;                           // PCIe Gen5 x16 host link
  h.nvlink_domain = nvl72 ? 72 : 8;              // NVL72: 72 GPUs in one NVLink domain
  h.intra_node_link = "nvlink-b200";
  return h;
}

const std::vector<HardwareSpec>& hardware_table() {
  static const std::vector<HardwareSpec> t = {
      v100(),
      a100(false),
      a100(true),
      hopper("h100-sxm", false, 80, 3.35),
      hopper("h100-pcie", true, 80, 2.0),
      hopper("h200", false, 141, 4.8),
      blackwell(false),
      blackwell(true),
  };
  return t;
}

// Per-direction bandwidth (NVLink datasheet figures are both directions: halved here).
// Latencies are the alpha of the alpha-beta model: ~1 us for NVLink/PCIe DMA, the glossary's
// "RDMA 1-2 us" (2 us taken) for InfiniBand/RoCE, and "TCP 50-100 us" (50 us) for Ethernet.
const std::vector<LinkSpec>& link_table() {
  static const std::vector<LinkSpec> t = {
      {"nvlink-v100", "V100 datasheet: 300 GB/s total", 150 * kG, 1e-6},
      {"nvlink-a100", "A100 datasheet: 600 GB/s total", 300 * kG, 1e-6},
      {"nvlink-h100", "H100 datasheet: 900 GB/s total", 450 * kG, 1e-6},
      {"nvlink-b200", "NVLink 5: 1.8 TB/s total", 900 * kG, 1e-6},
      {"pcie3", "PCIe 3.0 x16: 15.75 GB/s per direction", 15.75 * kG, 1e-6},
      {"pcie4", "PCIe 4.0 x16: 31.5 GB/s per direction", 31.5 * kG, 1e-6},
      {"pcie5", "PCIe 5.0 x16: 63 GB/s per direction", 63 * kG, 1e-6},
      {"edr", "InfiniBand EDR 100 Gb/s", 12.5 * kG, 2e-6},
      {"hdr", "InfiniBand HDR 200 Gb/s", 25 * kG, 2e-6},
      {"ndr", "InfiniBand NDR 400 Gb/s", 50 * kG, 2e-6},
      {"xdr", "InfiniBand XDR 800 Gb/s", 100 * kG, 2e-6},
      {"roce-100", "RoCE v2 over 100 GbE", 12.5 * kG, 2e-6},
      {"roce-200", "RoCE v2 over 200 GbE", 25 * kG, 2e-6},
      {"roce-400", "RoCE v2 over 400 GbE", 50 * kG, 2e-6},
      {"eth-10g", "10 GbE with TCP (management network)", 1.25 * kG, 50e-6},
  };
  return t;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

template <class T>
std::string joined_names(const std::vector<T>& table) {
  std::string s;
  for (const T& x : table) s += " " + x.name;
  return s;
}

}  // namespace

HardwareSpec hardware_preset(const std::string& name) {
  const std::string key = lower(name);
  for (const HardwareSpec& h : hardware_table())
    if (h.name == key || (key == "h100" && h.name == "h100-sxm")) return h;
  throw_error<ConfigError>("unknown GPU preset '{}'; known:{} this", name,
                           joined_names(hardware_table()));
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> v;
  for (const HardwareSpec& h : hardware_table()) v.push_back(h.name);
  return v;
}

LinkSpec link_preset(const std::string& name) {
  const std::string key = lower(name);
  for (const LinkSpec& l : link_table())
    if (l.name == key || "ib-" + l.name == key) return l;
  throw_error<ConfigError>("unknown link preset '{}'; known:{}", name, joined_names(link_table()));
}

std::vector<std::string> link_preset_names() {
  std::vector<std::string> v;
  for (const LinkSpec& l : link_table()) v.push_back(l.name);
  return v;
}

}  // namespace lmstack::calc
