// A small RGB raster canvas for charts: anti-aliased lines of any width, dashed polylines,
// filled rectangles and discs, and text in the built-in bitmap font (core/bitmap_font.h).
// Coordinates are in pixels with pixel (i, j) covering [i, i+1) x [j, j+1), the convention of
// SVG, so a chart laid out once draws the same in both; drawing outside the canvas is clipped.
// Anti-aliasing is by area coverage: each pixel is blended ("over") with the fraction of it
// the shape covers, which for a 1-pixel line is Wu's algorithm (Wu, "An efficient
// antialiasing technique", SIGGRAPH 1991) extended to any width along the minor axis.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lmstack {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

struct Point {
  double x = 0, y = 0;
};

class RgbImage {
 public:
  // A width x height canvas filled with `background`. Throws RequestError for a size <= 0
  // or above 16384 per side.
  RgbImage(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  // Row-major R,G,B bytes, top row first (what encode_png_rgb takes).
  const std::string& bytes() const { return pixels_; }
  // The pixel at (x, y); LMSTACK_CHECK-fails outside the canvas.
  Rgb at(int x, int y) const;

  // Blends `color` over pixel (x, y) with opacity `alpha` in [0, 1]; no-op outside the canvas.
  void blend(int x, int y, Rgb color, double alpha);
  // Fills the pixels whose centres lie in [x0, x1) x [y0, y1).
  void fill_rect(double x0, double y0, double x1, double y1, Rgb color);
  // A straight line of `width` pixels between two points, ends cut square at the endpoints.
  void draw_line(Point a, Point b, double width, Rgb color);
  // Joined line segments; `dash` (on, off, on, off... lengths in pixels along the path,
  // as SVG's stroke-dasharray) empty for a solid line.
  void draw_polyline(const std::vector<Point>& points, double width, Rgb color,
                     const std::vector<double>& dash = {});
  // A filled disc, edge anti-aliased.
  void fill_disc(Point centre, double radius, Rgb color);
  // Text in the bitmap font scaled by `scale` (each font pixel a scale x scale block), its
  // left edge at `left` and its baseline (bottom of capitals) at `baseline`.
  void draw_text(double left, double baseline, std::string_view text, int scale, Rgb color);
  // Width in pixels of draw_text's output (no trailing gap).
  static int text_width(std::string_view text, int scale);

 private:
  int width_, height_;
  std::string pixels_;
};

}  // namespace lmstack
