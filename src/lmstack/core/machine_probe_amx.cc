// AMX-BF16 measurement loop for doctor (Intel SDM vol. 1 ch. 18). Called only when the CPU
// has AMX and Linux granted the tile permission (cpu_features().amx_bf16).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "lmstack/core/machine_probe.h"

namespace lmstack {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

}  // namespace

double tile_loop_bf16_amx(int64_t iterations) {
  // Tiles 0-3: C (16 x 16 f32); 4: A (16 x 32 bf16); 5: B (16 x 32 bf16 pairs).
  TileConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette_id = 1;
  for (int t = 0; t < 6; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  alignas(64) static thread_local uint16_t data[16 * 32];
  for (auto& v : data) v = 0x3c00;  // small bf16 value
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, data, 64);
  _tile_loadd(5, data, 64);
  for (int64_t it = 0; it < iterations; ++it) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  alignas(64) static thread_local float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  volatile float keep = out[0];
  (void)keep;
  return static_cast<double>(iterations) * 4 * 16 * 16 * 32 * 2;
}

}  // namespace lmstack
