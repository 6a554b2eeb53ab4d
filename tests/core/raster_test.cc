// core/raster.h and core/bitmap_font.h: exact pixels where the geometry is exact (lines on
// pixel centres, the 45-degree line's known side coverage (sqrt(2) - 1) / 2), area conservation
// for arbitrary lines and discs, dash lengths, clipping, and glyph placement.
#include "lmstack/core/raster.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <numbers>

#include "lmstack/core/bitmap_font.h"
#include "lmstack/core/error.h"

namespace lmstack {
namespace {

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0};

// Total ink of a black-on-white drawing in pixel areas: sum of (255 - red) / 255.
double ink(const RgbImage& image) {
  double total = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) total += (255 - image.at(x, y).r) / 255.0;
  return total;
}

TEST(RasterTest, HorizontalAndVerticalLinesOnPixelCentresAreCrisp) {
  RgbImage image(30, 30, kWhite);
  image.draw_line({2, 10.5}, {20, 10.5}, 1, {10, 20, 30});
  EXPECT_EQ(image.at(2, 10), (Rgb{10, 20, 30}));
  EXPECT_EQ(image.at(19, 10), (Rgb{10, 20, 30}));
  EXPECT_EQ(image.at(20, 10), kWhite);  // the line ends at x = 20, the left edge of pixel 20
  EXPECT_EQ(image.at(1, 10), kWhite);
  EXPECT_EQ(image.at(10, 9), kWhite);
  EXPECT_EQ(image.at(10, 11), kWhite);
  image.draw_line({5.5, 28}, {5.5, 3}, 1, kBlack);  // steep, drawn bottom to top
  EXPECT_EQ(image.at(5, 3), kBlack);
  EXPECT_EQ(image.at(5, 27), kBlack);
  EXPECT_EQ(image.at(5, 28), kWhite);
  EXPECT_EQ(image.at(4, 15), kWhite);
}

TEST(RasterTest, DiagonalLineCoversItsSideNeighboursByTheGeometricFraction) {
  RgbImage image(12, 12, kWhite);
  image.draw_line({0, 0}, {10, 10}, 1, kBlack);
  // In column i the line's centre is at y = i + 0.5 and its vertical half-extent is
  // sqrt(2) / 2, so row i is fully covered and rows i +- 1 by (sqrt(2) - 1) / 2.
  const double side = (std::sqrt(2.0) - 1) / 2;
  const int expected_side = int(std::lround(255 * (1 - side)));
  for (int i = 1; i < 9; ++i) {
    EXPECT_EQ(image.at(i, i), kBlack) << i;
    EXPECT_EQ(image.at(i, i + 1).r, expected_side) << i;
    EXPECT_EQ(image.at(i, i - 1).r, expected_side) << i;
  }
}

TEST(RasterTest, LineInkEqualsItsArea) {
  for (double angle : {0.1, 0.7, 1.2, 2.5}) {
    RgbImage image(200, 200, kWhite);
    const Point a{100 - 60 * std::cos(angle), 100 - 60 * std::sin(angle)};
    const Point b{100 + 60 * std::cos(angle), 100 + 60 * std::sin(angle)};
    image.draw_line(a, b, 2, kBlack);
    // 120 long x 2 wide; pixel rounding of the blend is < 1/255 per pixel.
    EXPECT_NEAR(ink(image), 240, 240 * 0.02) << angle;
  }
}

TEST(RasterTest, DashesFollowThePattern) {
  RgbImage image(45, 10, kWhite);
  image.draw_polyline({{0, 5.5}, {20, 5.5}, {40, 5.5}}, 1, kBlack, {6, 4});
  for (int x = 0; x < 40; ++x) EXPECT_EQ(image.at(x, 5), x % 10 < 6 ? kBlack : kWhite) << x;
  EXPECT_NEAR(ink(image), 24, 1e-9);
}

TEST(RasterTest, DiscInkIsItsArea) {
  RgbImage image(40, 40, kWhite);
  image.fill_disc({20.3, 19.6}, 8, kBlack);
  EXPECT_EQ(image.at(20, 19), kBlack);
  EXPECT_EQ(image.at(2, 2), kWhite);
  EXPECT_NEAR(ink(image), std::numbers::pi * 64, std::numbers::pi * 64 * 0.02);
}

TEST(RasterTest, DrawingOutsideIsClippedAndNonFiniteIgnored) {
  RgbImage image(10, 10, kWhite);
  image.draw_line({-1e9, -5}, {1e9, -5}, 3, kBlack);
  image.draw_line({NAN, 1}, {5, 5}, 1, kBlack);
  image.fill_disc({-50, -50}, 3, kBlack);
  image.draw_text(-100, -100, "clipped", 2, kBlack);
  EXPECT_EQ(ink(image), 0);
  image.draw_line({-1e9, 4.5}, {1e9, 4.5}, 1, kBlack);  // crosses: only the row inside is inked
  EXPECT_NEAR(ink(image), 10, 1e-9);
  EXPECT_THROW(RgbImage(0, 5, kWhite), RequestError);
}

TEST(RasterTest, TextPlacesGlyphsOnTheBaseline) {
  RgbImage image(30, 20, kWhite);
  image.draw_text(1, 10, "1-", 1, kBlack);
  // '1' is "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.": top row at baseline - 7 = 3.
  EXPECT_EQ(image.at(3, 3), kBlack);
  EXPECT_EQ(image.at(1, 3), kWhite);
  EXPECT_EQ(image.at(2, 9), kBlack);  // bottom row ".###." ends at baseline - 1
  EXPECT_EQ(image.at(3, 10), kWhite);
  // '-' is one full row in the middle (row 3), 6 pixels to the right.
  for (int x = 7; x < 12; ++x) EXPECT_EQ(image.at(x, 6), kBlack) << x;
  EXPECT_NEAR(ink(image), 10 + 5, 1e-9);
  EXPECT_EQ(RgbImage::text_width("ab", 1), 11);
  EXPECT_EQ(RgbImage::text_width("ab", 2), 22);
  EXPECT_EQ(RgbImage::text_width("", 2), 0);
  RgbImage big(30, 30, kWhite);
  // '.' is a 2x2 block at rows 5-6, columns 1-2: at scale 2, pixels x 2..5, y 16..19.
  big.draw_text(0, 20, ".", 2, kBlack);
  EXPECT_NEAR(ink(big), 16, 1e-9);
  EXPECT_EQ(big.at(2, 16), kBlack);
  EXPECT_EQ(big.at(5, 19), kBlack);
  EXPECT_EQ(big.at(1, 16), kWhite);
  EXPECT_EQ(big.at(2, 20), kWhite);
}

TEST(BitmapFontTest, EveryPrintableCharacterButSpaceHasInkAndOthersDrawAsQuestionMark) {
  for (int c = 33; c < 127; ++c) {
    int bits = 0;
    for (uint8_t row : glyph(char(c))) bits += std::popcount(row);
    EXPECT_GT(bits, 0) << char(c);
  }
  for (uint8_t row : glyph(' ')) EXPECT_EQ(row, 0);
  EXPECT_EQ(glyph('\xE4'), glyph('?'));
  EXPECT_EQ(glyph('\n'), glyph('?'));
  EXPECT_NE(glyph('0'), glyph('O'));  // the zero carries a slash
  EXPECT_EQ(glyph('g')[7], 0b01110);  // descender row
}

}  // namespace
}  // namespace lmstack
