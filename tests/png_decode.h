// A PNG reader for tests, written independently of core/png.cc so that the encoder is checked
// against a second implementation of the PNG spec (W3C, 3rd ed.) and RFC 1950/1951: it walks
// the chunks, checks each CRC with a bit-by-bit CRC-32 (no table), joins the IDAT data,
// inflates stored deflate blocks (other block types are reported, not decoded), checks the
// zlib header and Adler-32 (summed per byte from the definition), and undoes filter 0.
// Only 8-bit RGB, non-interlaced images are accepted: what encode_png_rgb writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack::test {

struct DecodedPng {
  uint32_t width = 0, height = 0;
  std::string rgb;                  // width * height * 3 bytes
  std::vector<std::string> chunks;  // chunk types in file order
  std::string error;                // empty on success
};

inline uint32_t read_be32(std::string_view s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

inline uint32_t bitwise_crc32(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (char ch : bytes) {
    crc ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// Inflates a zlib stream made only of stored blocks; sets `error` otherwise.
inline std::string inflate_stored(std::string_view z, std::string& error) {
  std::string out;
  if (z.size() < 6 || (static_cast<uint8_t>(z[0]) & 0x0F) != 8 ||
      ((static_cast<uint8_t>(z[0]) << 8) | static_cast<uint8_t>(z[1])) % 31 != 0) {
    error = "bad zlib header";
    return out;
  }
  size_t pos = 2;
  for (bool last = false; !last;) {
    if (pos + 5 > z.size()) return error = "truncated deflate block header", out;
    const uint8_t head = static_cast<uint8_t>(z[pos]);
    last = head & 1;
    if (((head >> 1) & 3) != 0) return error = "not a stored block", out;
    const uint16_t len = uint16_t(uint8_t(z[pos + 1]) | (uint8_t(z[pos + 2]) << 8));
    const uint16_t nlen = uint16_t(uint8_t(z[pos + 3]) | (uint8_t(z[pos + 4]) << 8));
    if (uint16_t(~len) != nlen) return error = "LEN/NLEN mismatch", out;
    pos += 5;
    if (pos + len > z.size()) return error = "truncated stored block", out;
    out.append(z.substr(pos, len));
    pos += len;
  }
  if (pos + 4 != z.size()) return error = "bytes after the Adler-32", out;
  uint32_t a = 1, b = 0;
  for (char ch : out) a = (a + static_cast<uint8_t>(ch)) % 65521, b = (b + a) % 65521;
  if (read_be32(z, pos) != ((b << 16) | a)) error = "Adler-32 mismatch";
  return out;
}

inline DecodedPng decode_png(std::string_view file) {
  DecodedPng png;
  if (file.substr(0, 8) != std::string_view("\x89PNG\r\n\x1a\n", 8))
    return png.error = "bad signature", png;
  std::string idat;
  for (size_t pos = 8; pos < file.size();) {
    if (pos + 12 > file.size()) return png.error = "truncated chunk", png;
    const uint32_t len = read_be32(file, pos);
    if (pos + 12 + len > file.size()) return png.error = "chunk past the end", png;
    const std::string_view type_and_data = file.substr(pos + 4, 4 + len);
    png.chunks.emplace_back(type_and_data.substr(0, 4));
    if (bitwise_crc32(type_and_data) != read_be32(file, pos + 8 + len))
      return png.error = "CRC mismatch in " + png.chunks.back(), png;
    const std::string_view data = type_and_data.substr(4);
    if (png.chunks.back() == "IHDR") {
      if (len != 13 || data.substr(8, 5) != std::string_view("\x08\x02\x00\x00\x00", 5))
        return png.error = "IHDR is not 8-bit RGB non-interlaced", png;
      png.width = read_be32(data, 0), png.height = read_be32(data, 4);
    } else if (png.chunks.back() == "IDAT") {
      idat.append(data);
    }
    pos += 12 + len;
  }
  const std::string raw = inflate_stored(idat, png.error);
  if (!png.error.empty()) return png;
  const size_t row = size_t(png.width) * 3;
  if (raw.size() != (row + 1) * png.height) return png.error = "wrong scanline bytes", png;
  for (size_t y = 0; y < png.height; ++y) {
    if (raw[y * (row + 1)] != 0) return png.error = "filter type is not 0", png;
    png.rgb.append(raw.substr(y * (row + 1) + 1, row));
  }
  return png;
}

}  // namespace lmstack::test
