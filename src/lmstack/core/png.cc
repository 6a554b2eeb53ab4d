// PNG encoding (see png.h): CRC-32 and Adler-32 computed here from their definitions, chunks
// framed as length + type + data + CRC(type + data), zlib stream of stored deflate blocks.
#include "lmstack/core/png.h"

#include <algorithm>
#include <array>

#include "lmstack/core/error.h"

namespace lmstack {
namespace {

void append_u32_be(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xFF));
}

void append_chunk(std::string& out, std::string_view type, std::string_view data) {
  append_u32_be(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.append(type);
  out.append(data);
  append_u32_be(out, crc32(out.data() + type_at, out.size() - type_at));
}

}  // namespace

uint32_t adler32(std::string_view bytes, uint32_t adler) {
  constexpr uint32_t kMod = 65521;  // largest prime below 2^16
  uint32_t a = adler & 0xFFFF, b = adler >> 16;
  // 5552 is the most bytes that can be summed before b could overflow 32 bits (RFC 1950 / zlib).
  for (size_t start = 0; start < bytes.size(); start += 5552) {
    const size_t end = std::min(bytes.size(), start + 5552);
    for (size_t i = start; i < end; ++i) {
      a += static_cast<uint8_t>(bytes[i]);
      b += a;
    }
    a %= kMod;
    b %= kMod;
  }
  return (b << 16) | a;
}

std::string zlib_store(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 65535 * 5 + 11);
  // CMF 0x78: deflate, 32 KiB window. FLG 0x01: no dictionary, level 0, and (CMF*256+FLG) % 31 ==
  // 0.
  out.push_back(static_cast<char>(0x78));
  out.push_back(static_cast<char>(0x01));
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, bytes.size() - pos);
    const bool final_block = pos + len == bytes.size();
    out.push_back(static_cast<char>(final_block ? 1 : 0));  // BFINAL bit, BTYPE 00 (stored)
    const uint16_t n = static_cast<uint16_t>(len), nn = static_cast<uint16_t>(~n);
    for (uint16_t v : {n, nn}) {  // LEN and its one's complement NLEN, little-endian
      out.push_back(static_cast<char>(v & 0xFF));
      out.push_back(static_cast<char>(v >> 8));
    }
    out.append(bytes.substr(pos, len));
    pos += len;
  } while (pos < bytes.size());
  append_u32_be(out, adler32(bytes));
  return out;
}

std::string encode_png_rgb(uint32_t width, uint32_t height, std::string_view rgb) {
  constexpr uint32_t kMaxDim = 0x7FFFFFFFu;
  if (width == 0 || height == 0 || width > kMaxDim || height > kMaxDim)
    throw_error<RequestError>("PNG size {}x{}: each side must be 1 .. 2^31-1", width, height);
  const uint64_t row_bytes = uint64_t{width} * 3;
  if (rgb.size() != row_bytes * height)
    throw_error<RequestError>("PNG {}x{} RGB needs {} bytes, got {}", width, height,
                              row_bytes * height, rgb.size());
  std::string scanlines;
  scanlines.reserve((row_bytes + 1) * height);
  for (uint32_t y = 0; y < height; ++y) {
    scanlines.push_back(0);  // filter type 0 (None)
    scanlines.append(rgb.substr(y * row_bytes, row_bytes));
  }
  std::string ihdr;
  append_u32_be(ihdr, width);
  append_u32_be(ihdr, height);
  // bit depth 8, colour type 2 (truecolour), compression 0, filter 0, interlace 0
  ihdr.append(std::string_view("\x08\x02\x00\x00\x00", 5));
  std::string png("\x89PNG\r\n\x1a\n", 8);
  append_chunk(png, "IHDR", ihdr);
  append_chunk(png, "IDAT", zlib_store(scanlines));
  append_chunk(png, "IEND", "");
  return png;
}

}  // namespace lmstack
