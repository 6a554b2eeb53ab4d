// SVG and PNG renderers of the loss chart (see plot_render.h). The SVG's text is set in the
// viewer's monospace font at 9 px per scale step (about the bitmap font's 6-pixel advance per
// step), the PNG's in the 5x8 bitmap font; everything else is the same lines, polylines and
// dots at the same coordinates.
#include "lmstack/train/plot_render.h"

#include <fmt/format.h>

#include "lmstack/core/png.h"

namespace lmstack::train {
namespace {

std::string hex(Rgb c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string svg_curve(const ChartCurve& curve) {
  std::string points;
  for (const Point& p : curve.points) points += fmt::format("{:.2f},{:.2f} ", p.x, p.y);
  std::string dash;
  for (double d : curve.dash) dash += fmt::format("{}{:g}", dash.empty() ? "" : ",", d);
  std::string out =
      fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{:g}\"{} points=\"{}\"/>\n",
                  hex(curve.color), curve.width,
                  dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", dash), points);
  if (curve.marker_radius > 0)
    for (const Point& p : curve.points)
      out += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{:g}\" fill=\"{}\"/>\n", p.x, p.y,
                         curve.marker_radius, hex(curve.color));
  return out;
}

std::string svg_text(const ChartText& t) {
  const char* anchor = t.anchor == Anchor::kStart    ? "start"
                       : t.anchor == Anchor::kMiddle ? "middle"
                                                     : "end";
  return fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\">{}</text>\n",
      t.at.x, t.at.y, 9 * t.scale, anchor, hex(t.color), xml_escape(t.text));
}

void stroke_rect(RgbImage& image, const ChartRect& r) {
  image.fill_rect(r.x0, r.y0, r.x1, r.y1, r.fill);
  image.draw_line({r.x0 - 0.5, r.y0}, {r.x1 + 0.5, r.y0}, 1, r.stroke);
  image.draw_line({r.x0 - 0.5, r.y1}, {r.x1 + 0.5, r.y1}, 1, r.stroke);
  image.draw_line({r.x0, r.y0}, {r.x0, r.y1}, 1, r.stroke);
  image.draw_line({r.x1, r.y0}, {r.x1, r.y1}, 1, r.stroke);
}

void draw_curve(RgbImage& image, const ChartCurve& curve) {
  image.draw_polyline(curve.points, curve.width, curve.color, curve.dash);
  if (curve.marker_radius > 0)
    for (const Point& p : curve.points) image.fill_disc(p, curve.marker_radius, curve.color);
}

}  // namespace

std::string render_chart_svg(const ChartLayout& c) {
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"monospace\">\n<rect width=\"100%\" height=\"100%\" fill=\"{}\"/>\n",
      c.width, c.height, hex(c.background));
  for (const ChartLine& l : c.lines)
    svg += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" "
        "stroke-width=\"{:g}\"/>\n",
        l.a.x, l.a.y, l.b.x, l.b.y, hex(l.color), l.width);
  for (const ChartCurve& curve : c.curves) svg += svg_curve(curve);
  const ChartRect& r = c.legend_box;
  svg += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
      "stroke=\"{}\"/>\n",
      r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0, hex(r.fill), hex(r.stroke));
  for (const ChartCurve& sample : c.legend_samples) svg += svg_curve(sample);
  for (const ChartText& t : c.texts) svg += svg_text(t);
  return svg + "</svg>\n";
}

RgbImage rasterize_chart(const ChartLayout& c) {
  RgbImage image(c.width, c.height, c.background);
  for (const ChartLine& l : c.lines) image.draw_line(l.a, l.b, l.width, l.color);
  for (const ChartCurve& curve : c.curves) draw_curve(image, curve);
  stroke_rect(image, c.legend_box);
  for (const ChartCurve& sample : c.legend_samples) draw_curve(image, sample);
  for (const ChartText& t : c.texts) {
    const int w = RgbImage::text_width(t.text, t.scale);
    const double left = t.anchor == Anchor::kStart    ? t.at.x
                        : t.anchor == Anchor::kMiddle ? t.at.x - w / 2.0
                                                      : t.at.x - w;
    image.draw_text(left, t.at.y, t.text, t.scale, t.color);
  }
  return image;
}

std::string render_chart_png(const ChartLayout& c) {
  const RgbImage image = rasterize_chart(c);
  return encode_png_rgb(uint32_t(image.width()), uint32_t(image.height()), image.bytes());
}

}  // namespace lmstack::train
