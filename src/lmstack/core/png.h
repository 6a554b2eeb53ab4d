// A minimal PNG encoder: 8-bit truecolour (RGB) images, one IDAT chunk whose zlib stream
// (RFC 1950) holds stored, uncompressed deflate blocks (RFC 1951 section 3.2.4) with filter
// type 0 on every scanline. Chunk layout and CRC from the PNG specification (W3C, 3rd ed.,
// sections 5 and D); the Adler-32 checksum from RFC 1950 section 8. No compression, so files
// are width*height*3 bytes plus ~0.1%: fine for charts, and any PNG reader decodes them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lmstack/core/crc32.h"  // PNG chunks carry one

namespace lmstack {

// Adler-32 of RFC 1950. Pass the previous result as `adler` to continue; start from 1.
uint32_t adler32(std::string_view bytes, uint32_t adler = 1);

// A zlib stream (RFC 1950: CMF/FLG header, deflate data, big-endian Adler-32) whose deflate
// data is a run of stored blocks of at most 65535 bytes each. Decodes with any inflater.
std::string zlib_store(std::string_view bytes);

// Encodes `rgb` (row-major, top row first, 3 bytes R,G,B per pixel, so width*height*3 bytes)
// as a complete PNG file. Throws RequestError if the size does not match or a dimension is
// 0 or above 2^31-1 (the PNG limit).
std::string encode_png_rgb(uint32_t width, uint32_t height, std::string_view rgb);

}  // namespace lmstack
