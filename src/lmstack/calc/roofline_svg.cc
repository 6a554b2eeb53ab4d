// The roofline as a hand-written SVG: log10 axes (FLOP/byte horizontally, FLOP/s vertically),
// the bandwidth slope up to the ridge point, the flat compute roof, and each point on its line.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "lmstack/calc/reports.h"

namespace lmstack::calc {
namespace {

constexpr double kW = 720, kH = 480, kLeft = 80, kRight = 20, kTop = 30, kBottom = 60;

struct Axes {
  double x0, x1, y0, y1;  // log10 ranges
  double px(double ai) const {
    return kLeft + (std::log10(ai) - x0) / (x1 - x0) * (kW - kLeft - kRight);
  }
  double py(double f) const {
    return kH - kBottom - (std::log10(f) - y0) / (y1 - y0) * (kH - kTop - kBottom);
  }
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

std::string grid(const Axes& a) {
  std::string g;
  for (int e = static_cast<int>(std::ceil(a.x0)); e <= a.x1; ++e)
    g += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="#ddd"/><text x="{0:.1f}" y="{3}" font-size="11" text-anchor="middle">1e{4}</text>)"
        "\n",
        a.px(std::pow(10, e)), kTop, kH - kBottom, kH - kBottom + 16, e);
  for (int e = static_cast<int>(std::ceil(a.y0)); e <= a.y1; ++e)
    g += fmt::format(
        R"(<line x1="{0}" y1="{1:.1f}" x2="{2}" y2="{1:.1f}" stroke="#ddd"/><text x="{3}" y="{1:.1f}" font-size="11" text-anchor="end">1e{4}</text>)"
        "\n",
        kLeft, a.py(std::pow(10, e)), kW - kRight, kLeft - 6, e);
  return g;
}

}  // namespace

std::string roofline_svg(const HardwareSpec& hw, const RooflineOptions& o) {
  const double peak = hw.compute_flops(o.dtype), bw = hw.memory_bw, ridge = peak / bw;
  double lo = ridge / 1000, hi = ridge * 100;
  for (const RooflinePoint& p : o.points) {
    lo = std::min(lo, p.flops / p.bytes / 4);
    hi = std::max(hi, p.flops / p.bytes * 4);
  }
  const Axes a{std::floor(std::log10(lo)), std::ceil(std::log10(hi)),
               std::floor(std::log10(lo * bw)), std::ceil(std::log10(peak * 2))};
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)"
      "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      kW, kH);
  svg += grid(a);
  const double xl = std::pow(10, a.x0), xr = std::pow(10, a.x1);
  svg += fmt::format(
      R"(<polyline fill="none" stroke="#c0392b" stroke-width="2.5" points="{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}"/>)"
      "\n",
      a.px(xl), a.py(xl * bw), a.px(ridge), a.py(peak), a.px(xr), a.py(peak));
  svg += fmt::format(
      R"(<text x="{:.1f}" y="{:.1f}" font-size="12" fill="#c0392b">ridge {:.3g} FLOP/B</text>)"
      "\n",
      a.px(ridge) + 4, a.py(peak) - 6, ridge);
  for (size_t i = 0; i < o.points.size(); ++i) {
    const RooflinePoint& p = o.points[i];
    const double ai = p.flops / p.bytes, att = std::min(peak, ai * bw);
    svg += fmt::format(
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="5" fill="#2471a3"/><text x="{:.1f}" y="{:.1f}" font-size="11">{}</text>)"
        "\n",
        a.px(ai), a.py(att), a.px(ai) + 7, a.py(att) + 14 + 12.0 * (i % 2), escape(p.label));
  }
  svg += fmt::format(
      R"(<text x="{}" y="{}" font-size="13" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>)"
      "\n",
      (kW + kLeft) / 2, kH - 20);
  svg += fmt::format(
      R"svg(<text x="16" y="{}" font-size="13" transform="rotate(-90 16 {})" text-anchor="middle">attainable FLOP/s</text>)svg"
      "\n",
      kH / 2, kH / 2);
  svg += fmt::format(
      R"(<text x="{}" y="18" font-size="14" text-anchor="middle">{} roofline ({}): {:.3g} TFLOP/s, {:.3g} GB/s</text>)"
      "\n</svg>\n",
      (kW + kLeft) / 2, escape(hw.name), o.dtype, peak / 1e12, bw / 1e9);
  return svg;
}

}  // namespace lmstack::calc
