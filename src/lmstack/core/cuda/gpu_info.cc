// query_gpu() for CUDA builds: the first device's name, memory and SM count.
#include <cuda_runtime.h>

#include "lmstack/core/machine_probe.h"

namespace lmstack {

std::optional<GpuInfo> query_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return std::nullopt;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::nullopt;
  GpuInfo g;
  g.name = prop.name;
  g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  g.sm_count = prop.multiProcessorCount;
  g.compute_capability_major = prop.major;
  g.compute_capability_minor = prop.minor;
  return g;
}

}  // namespace lmstack
