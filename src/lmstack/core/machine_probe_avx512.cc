// AVX-512 measurement loops for doctor (compiled with AVX-512 flags; called only when
// cpu_features() reports them). Leaf functions on registers only: no STL here.
#include <immintrin.h>

#include <cstdint>

#include "lmstack/core/machine_probe.h"

namespace lmstack {

double fma_loop_f32_avx512(int64_t iterations) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return static_cast<double>(iterations) * 12 * 16 * 2;
}

double dot_loop_bf16_avx512(int64_t iterations) {
  // vdpbf16ps: per f32 lane, 2 bf16 products accumulated = 4 FLOPs; 16 lanes.
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_setzero_ps();
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3400);  // ~1.2e-7
  for (int64_t it = 0; it < iterations; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  volatile float keep = sink;
  (void)keep;
  return static_cast<double>(iterations) * 12 * 16 * 4;
}

}  // namespace lmstack
