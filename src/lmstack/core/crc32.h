// CRC-32 (ISO 3309 / ITU-T V.42: reflected polynomial 0xEDB88320, init and final xor
// 0xFFFFFFFF), the checksum of PNG chunks, zlib.crc32 and the KV transfer wire format.
// Chainable: crc32(b, |b|, crc32(a, |a|)) == crc32(a + b, |a + b|); crc32("123456789", 9) ==
// 0xCBF43926.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lmstack {

uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace lmstack
