// core/png.h against published check values (CRC-32 "123456789" = 0xCBF43926 from the CRC
// catalogue's CRC-32/ISO-HDLC entry; Adler-32 "Wikipedia" = 0x11E60398 from RFC 1950's worked
// example as given on Wikipedia) and against the independent reader in tests/png_decode.h.
#include "lmstack/core/png.h"

#include <gtest/gtest.h>

#include "lmstack/core/error.h"
#include "png_decode.h"

namespace lmstack {
namespace {

TEST(PngTest, Adler32MatchesPublishedCheckValues) {
  EXPECT_EQ(adler32("Wikipedia"), 0x11E60398u);
  EXPECT_EQ(adler32(""), 1u);
  EXPECT_EQ(adler32("pedia", adler32("Wiki")), 0x11E60398u);
  // Long input crosses the 5552-byte reduction boundary: compare with the per-byte definition.
  std::string big(100000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(255 - i % 251);
  uint32_t a = 1, b = 0;
  for (char c : big) a = (a + static_cast<uint8_t>(c)) % 65521, b = (b + a) % 65521;
  EXPECT_EQ(adler32(big), (b << 16) | a);
}

TEST(PngTest, ZlibStoreSplitsIntoStoredBlocks) {
  const std::string data(70000, 'x');  // two blocks: 65535 + 4465
  const std::string z = zlib_store(data);
  ASSERT_EQ(z.size(), 2 + 5 + 65535 + 5 + 4465 + 4u);
  EXPECT_EQ(static_cast<uint8_t>(z[2]), 0);              // first block: not final
  EXPECT_EQ(static_cast<uint8_t>(z[2 + 5 + 65535]), 1);  // second block: final
  std::string error;
  EXPECT_EQ(test::inflate_stored(z, error), data);
  EXPECT_EQ(error, "");
  // Empty input is one empty final block.
  EXPECT_EQ(test::inflate_stored(zlib_store(""), error), "");
  EXPECT_EQ(error, "");
}

TEST(PngTest, EncodedImageDecodesToTheSamePixels) {
  const uint32_t w = 300, h = 250;  // 225,250 bytes of scanlines: several stored blocks
  std::string rgb(size_t(w) * h * 3, '\0');
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) {
      char* p = &rgb[(size_t(y) * w + x) * 3];
      p[0] = static_cast<char>(x), p[1] = static_cast<char>(y), p[2] = static_cast<char>(x ^ y);
    }
  const std::string file = encode_png_rgb(w, h, rgb);
  const test::DecodedPng png = test::decode_png(file);
  ASSERT_EQ(png.error, "");
  EXPECT_EQ(png.chunks, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  EXPECT_EQ(png.width, w);
  EXPECT_EQ(png.height, h);
  EXPECT_EQ(png.rgb, rgb);
  // Pixel (123, 45) of the gradient: R = x, G = y, B = x ^ y.
  const size_t at = (45 * size_t(w) + 123) * 3;
  EXPECT_EQ(static_cast<uint8_t>(png.rgb[at]), 123);
  EXPECT_EQ(static_cast<uint8_t>(png.rgb[at + 1]), 45);
  EXPECT_EQ(static_cast<uint8_t>(png.rgb[at + 2]), 123 ^ 45);
  // A flipped data byte is caught by the chunk CRC.
  std::string corrupt = file;
  corrupt[60] ^= 1;
  EXPECT_NE(test::decode_png(corrupt).error, "");
}

TEST(PngTest, RejectsWrongSizes) {
  EXPECT_THROW(encode_png_rgb(2, 2, std::string(11, '\0')), RequestError);
  EXPECT_THROW(encode_png_rgb(0, 2, ""), RequestError);
  EXPECT_NO_THROW(encode_png_rgb(1, 1, std::string(3, '\0')));
}

}  // namespace
}  // namespace lmstack
