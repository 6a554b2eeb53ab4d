// RgbImage drawing (see raster.h): every shape is reduced to per-pixel area coverage and
// blended over the canvas; lines walk their major axis one pixel column at a time.
#include "lmstack/core/raster.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "lmstack/core/bitmap_font.h"
#include "lmstack/core/error.h"

namespace lmstack {
namespace {

// Length of the overlap of [a0, a1] and [b0, b1] (0 when disjoint).
double overlap(double a0, double a1, double b0, double b1) {
  return std::max(0.0, std::min(a1, b1) - std::max(a0, b0));
}

bool finite(Point p) { return std::isfinite(p.x) && std::isfinite(p.y); }

}  // namespace

RgbImage::RgbImage(int width, int height, Rgb background) : width_(width), height_(height) {
  constexpr int kMaxSide = 16384;
  if (width <= 0 || height <= 0 || width > kMaxSide || height > kMaxSide)
    throw_error<RequestError>("image size {}x{}: each side must be 1 .. {}", width, height,
                              kMaxSide);
  pixels_.resize(size_t(width) * size_t(height) * 3);
  for (size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = static_cast<char>(background.r);
    pixels_[i + 1] = static_cast<char>(background.g);
    pixels_[i + 2] = static_cast<char>(background.b);
  }
}

Rgb RgbImage::at(int x, int y) const {
  LMSTACK_CHECK(x >= 0 && y >= 0 && x < width_ && y < height_, "pixel ({}, {}) outside {}x{}", x, y,
                width_, height_);
  const size_t i = (size_t(y) * size_t(width_) + size_t(x)) * 3;
  return {static_cast<uint8_t>(pixels_[i]), static_cast<uint8_t>(pixels_[i + 1]),
          static_cast<uint8_t>(pixels_[i + 2])};
}

void RgbImage::blend(int x, int y, Rgb color, double alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || !(alpha > 0)) return;
  alpha = std::min(alpha, 1.0);
  const size_t i = (size_t(y) * size_t(width_) + size_t(x)) * 3;
  const uint8_t src[3] = {color.r, color.g, color.b};
  for (int c = 0; c < 3; ++c) {
    const double dst = static_cast<uint8_t>(pixels_[i + c]);
    pixels_[i + c] = static_cast<char>(std::lround(dst + (src[c] - dst) * alpha));
  }
}

void RgbImage::fill_rect(double x0, double y0, double x1, double y1, Rgb color) {
  const int i0 = std::max(0, int(std::ceil(x0 - 0.5))),
            i1 = std::min(width_, int(std::ceil(x1 - 0.5)));
  const int j0 = std::max(0, int(std::ceil(y0 - 0.5))),
            j1 = std::min(height_, int(std::ceil(y1 - 0.5)));
  for (int j = j0; j < j1; ++j)
    for (int i = i0; i < i1; ++i) blend(i, j, color, 1.0);
}

// Walks the major axis u (x for flat lines, y for steep ones) column by column; in each
// column the line covers the minor-axis span centre +- half its width measured along that axis
// (width / cos(angle)), and each pixel gets the overlap of that span with it, times the part
// of the column that lies between the endpoints.
void RgbImage::draw_line(Point a, Point b, double width, Rgb color) {
  if (!finite(a) || !finite(b) || !(width > 0)) return;
  const bool steep = std::abs(b.y - a.y) > std::abs(b.x - a.x);
  double u0 = steep ? a.y : a.x, v0 = steep ? a.x : a.y;
  double u1 = steep ? b.y : b.x, v1 = steep ? b.x : b.y;
  if (u0 > u1) std::swap(u0, u1), std::swap(v0, v1);
  if (u1 - u0 < 1e-12) return;  // a point: nothing to stroke
  const double slope = (v1 - v0) / (u1 - u0);
  const double half = 0.5 * width * std::sqrt(1 + slope * slope);
  const int u_limit = steep ? height_ : width_;
  const int i_first = std::max(0, int(std::floor(std::max(u0, -1.0))));
  const int i_last = std::min(u_limit - 1, int(std::floor(std::min(u1, double(u_limit)))));
  for (int i = i_first; i <= i_last; ++i) {
    const double column = overlap(i, i + 1, u0, u1);
    if (column <= 0) continue;
    const double vc = v0 + (std::clamp(i + 0.5, u0, u1) - u0) * slope;
    for (int j = int(std::floor(vc - half)); j <= int(std::floor(vc + half)); ++j) {
      const double coverage = overlap(j, j + 1, vc - half, vc + half) * column;
      if (steep)
        blend(j, i, color, coverage);
      else
        blend(i, j, color, coverage);
    }
  }
}

void RgbImage::draw_polyline(const std::vector<Point>& points, double width, Rgb color,
                             const std::vector<double>& dash) {
  double dash_total = 0;
  for (double d : dash) dash_total += std::max(0.0, d);
  if (dash.empty() || dash_total <= 0) {
    for (size_t i = 1; i < points.size(); ++i) draw_line(points[i - 1], points[i], width, color);
    return;
  }
  size_t dash_index = 0;
  double dash_left = std::max(0.0, dash[0]);  // length left in the current on/off piece
  for (size_t i = 1; i < points.size(); ++i) {
    const Point a = points[i - 1], b = points[i];
    const double length = std::hypot(b.x - a.x, b.y - a.y);
    if (!std::isfinite(length)) continue;
    double done = 0;
    while (done < length) {
      const double step = std::min(dash_left, length - done);
      if (dash_index % 2 == 0 && step > 0) {
        const double t0 = done / length, t1 = (done + step) / length;
        draw_line({a.x + (b.x - a.x) * t0, a.y + (b.y - a.y) * t0},
                  {a.x + (b.x - a.x) * t1, a.y + (b.y - a.y) * t1}, width, color);
      }
      done += step;
      dash_left -= step;
      if (dash_left <= 0)
        dash_index = (dash_index + 1) % dash.size(), dash_left = std::max(0.0, dash[dash_index]);
    }
  }
}

void RgbImage::fill_disc(Point centre, double radius, Rgb color) {
  if (!finite(centre) || !(radius > 0)) return;
  const int i0 = int(std::floor(centre.x - radius)), i1 = int(std::ceil(centre.x + radius));
  const int j0 = int(std::floor(centre.y - radius)), j1 = int(std::ceil(centre.y + radius));
  for (int j = std::max(0, j0); j <= std::min(height_ - 1, j1); ++j)
    for (int i = std::max(0, i0); i <= std::min(width_ - 1, i1); ++i) {
      // Coverage approximated by the pixel centre's distance inside the edge, clamped to [0, 1].
      const double d = std::hypot(i + 0.5 - centre.x, j + 0.5 - centre.y);
      blend(i, j, color, std::clamp(radius + 0.5 - d, 0.0, 1.0));
    }
}

void RgbImage::draw_text(double left, double baseline, std::string_view text, int scale,
                         Rgb color) {
  if (scale <= 0 || !std::isfinite(left) || !std::isfinite(baseline)) return;
  int x = int(std::lround(left));
  const int top = int(std::lround(baseline)) - kGlyphAscent * scale;
  for (char c : text) {
    const GlyphRows& rows = glyph(c);
    for (int r = 0; r < kGlyphRows; ++r)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (rows[r] & (1u << (kGlyphWidth - 1 - col)))
          fill_rect(x + col * scale, top + r * scale, x + (col + 1) * scale, top + (r + 1) * scale,
                    color);
    x += kGlyphAdvance * scale;
  }
}

int RgbImage::text_width(std::string_view text, int scale) {
  if (text.empty()) return 0;
  return (int(text.size()) * kGlyphAdvance - (kGlyphAdvance - kGlyphWidth)) * scale;
}

}  // namespace lmstack
