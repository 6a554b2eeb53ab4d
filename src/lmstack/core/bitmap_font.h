// A built-in 5x8 bitmap font for printable ASCII (32..126), drawn for lmstack: 5 columns,
// rows 0..6 above the baseline (capital height 7, lowercase x-height 5) and row 7 for the
// descenders of g, j, p, q, y and ',' ';'. Used to label raster charts (core/raster.h) without
// a font library. Glyphs advance 6 pixels (one blank column between characters).
#pragma once

#include <array>
#include <cstdint>

namespace lmstack {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphRows = 8;     // including the descender row
inline constexpr int kGlyphAscent = 7;   // rows above the baseline
inline constexpr int kGlyphAdvance = 6;  // pixels from one character's left edge to the next

// Row bitmaps, top row first; bit 4 is the leftmost column, bit 0 the rightmost.
using GlyphRows = std::array<uint8_t, kGlyphRows>;

// The glyph of `c`; characters outside 32..126 (including UTF-8 bytes) draw as '?'.
const GlyphRows& glyph(char c);

}  // namespace lmstack
