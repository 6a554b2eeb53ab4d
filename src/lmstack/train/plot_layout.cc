// Layout of the loss chart (see plot_layout.h): reads the curves from the log, picks nice axis
// ticks, maps data to pixels and lists the grid, frame, curves, legend and labels to draw.
#include "lmstack/train/plot_layout.h"

#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/train/train_log.h"

namespace lmstack::train {
namespace {

constexpr Rgb kGridColor{225, 225, 225}, kFrameColor{136, 136, 136}, kTextColor{40, 40, 40};
constexpr int kTextScale = 2;                    // bitmap font scale: 14-pixel capitals
constexpr double kCapHeight = 7.0 * kTextScale;  // for centring labels on a tick

// Pixel centre line closest to v: 1-pixel lines drawn there cover whole pixels.
double snap(double v) { return std::floor(v) + 0.5; }

// Heckbert's nice number: 1, 2, 5 or 10 times a power of ten near x, rounded or taken as the
// ceiling.
double nice_number(double x, bool round) {
  const double power = std::pow(10.0, std::floor(std::log10(x)));
  const double f = x / power;
  double nice;
  if (round)
    nice = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  else
    nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return nice * power;
}

std::string tick_label(double v, int decimals, bool scientific) {
  v += 0.0;  // turns -0 into 0
  if (std::abs(v) < 1e-300) v = 0;
  return scientific ? fmt::format("{:.3g}", v) : fmt::format("{:.{}f}", v, decimals);
}

void push_point(Curve& curve, double x, const Json& y) {
  if (!y.is_number()) return;
  const double v = y.get<double>();
  if (std::isfinite(x) && std::isfinite(v)) curve.x.push_back(x), curve.y.push_back(v);
}

void add_ticks_and_frame(ChartLayout& c) {
  for (size_t i = 0; i < c.x_axis.ticks.size(); ++i) {
    const double x = c.px(c.x_axis.ticks[i]), sx = snap(x);
    c.lines.push_back({{sx, c.box_top}, {sx, c.box_bottom}, kGridColor, 1});
    c.lines.push_back({{sx, c.box_bottom}, {sx, c.box_bottom + 5}, kFrameColor, 1});
    c.texts.push_back({{x, c.box_bottom + 8 + kCapHeight},
                       c.x_axis.labels[i],
                       Anchor::kMiddle,
                       kTextScale,
                       kTextColor});
  }
  for (size_t i = 0; i < c.y_axis.ticks.size(); ++i) {
    const double y = c.py(c.y_axis.ticks[i]), sy = snap(y);
    c.lines.push_back({{c.box_left, sy}, {c.box_right, sy}, kGridColor, 1});
    c.lines.push_back({{c.box_left - 5, sy}, {c.box_left, sy}, kFrameColor, 1});
    c.texts.push_back({{c.box_left - 9, y + kCapHeight / 2},
                       c.y_axis.labels[i],
                       Anchor::kEnd,
                       kTextScale,
                       kTextColor});
  }
  const double l = c.box_left, r = c.box_right, t = c.box_top, b = c.box_bottom;
  c.lines.push_back({{l - 0.5, t}, {r + 0.5, t}, kFrameColor, 1});
  c.lines.push_back({{l - 0.5, b}, {r + 0.5, b}, kFrameColor, 1});
  c.lines.push_back({{l, t}, {l, b}, kFrameColor, 1});
  c.lines.push_back({{r, t}, {r, b}, kFrameColor, 1});
}

ChartCurve map_curve(const ChartLayout& c, const Curve& curve, std::string name, Rgb color) {
  ChartCurve out{std::move(name), {}, color, 1.5, {}, 0};
  for (size_t i = 0; i < curve.x.size(); ++i)
    out.points.push_back({c.px(curve.x[i]), c.py(curve.y[i])});
  if (out.points.size() == 1) out.marker_radius = 2.5;  // a lone point is still visible
  return out;
}

// Legend in the top-right corner of the plot: a sample stroke and the name of each curve.
void add_legend(ChartLayout& c) {
  constexpr double kRow = 22, kPad = 10, kSample = 28;
  int name_width = 0;
  for (const ChartCurve& curve : c.curves)
    name_width = std::max(name_width, RgbImage::text_width(curve.name, kTextScale));
  const double x1 = snap(c.box_right - 10), y0 = snap(c.box_top + 10);
  const double x0 = snap(x1 - (2 * kPad + kSample + 8 + name_width));
  const double y1 = snap(y0 + 2 + kRow * double(c.curves.size()));
  c.legend_box = {x0, y0, x1, y1, {255, 255, 255}, kFrameColor};
  for (size_t k = 0; k < c.curves.size(); ++k) {
    const ChartCurve& curve = c.curves[k];
    const double cy = y0 + 1 + kRow * (double(k) + 0.5);
    ChartCurve sample{curve.name,
                      {{x0 + kPad, cy}, {x0 + kPad + kSample, cy}},
                      curve.color,
                      curve.width,
                      curve.dash};
    c.legend_samples.push_back(std::move(sample));
    c.texts.push_back({{x0 + kPad + kSample + 8, cy + kCapHeight / 2},
                       curve.name,
                       Anchor::kStart,
                       kTextScale,
                       kTextColor});
  }
}

// The title, cut from the left behind "..." to fit the width (at a UTF-8 character start).
std::string fit_title(const std::string& title, double width) {
  const size_t max_chars = size_t(std::max(4.0, (width + 2) / (6.0 * kTextScale)));
  if (title.size() <= max_chars) return title;
  size_t from = title.size() - (max_chars - 3);
  while (from < title.size() && (static_cast<unsigned char>(title[from]) & 0xC0) == 0x80) ++from;
  return "..." + title.substr(from);
}

}  // namespace

LossCurves read_loss_curves(const std::string& log_path) {
  return read_metric_curves(log_path, "loss", "eval_loss");
}

LossCurves read_metric_curves(const std::string& log_path, const std::string& metric,
                              const std::string& eval_metric) {
  LossCurves out;
  if (metric != "loss") out.train_name = metric, out.eval_name = eval_metric;
  for (const Json& line : read_train_log(log_path)) {
    if (!line.contains("measured") || !line["measured"].is_object()) continue;
    const Json& m = line["measured"];
    if (!m.contains("step") || !m["step"].is_number()) continue;
    const double step = m["step"].get<double>();
    if (m.contains(metric)) push_point(out.train, step, m[metric]);
    if (!eval_metric.empty() && m.contains(eval_metric)) push_point(out.eval, step, m[eval_metric]);
  }
  if (out.train.x.empty())
    throw_error<FormatError>("{}: no training steps (finite measured.step and measured.{})",
                             log_path, metric);
  return out;
}

Axis nice_axis(double lo, double hi, int target) {
  LMSTACK_CHECK(std::isfinite(lo) && std::isfinite(hi) && target >= 2, "axis [{}, {}] / {}", lo, hi,
                target);
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo <= 1e-9 * std::max(1.0, std::abs(lo))) {
    const double pad = std::max(0.5, std::abs(lo) * 0.05);
    lo -= pad, hi += pad;
  }
  const double step = nice_number(nice_number(hi - lo, false) / (target - 1), true);
  const double first = std::floor(lo / step), last = std::ceil(hi / step);
  const int decimals = std::max(0, int(-std::floor(std::log10(step))));
  Axis axis;
  axis.lo = first * step;
  axis.hi = last * step;
  const bool scientific = decimals > 6 || std::max(std::abs(axis.lo), std::abs(axis.hi)) >= 1e7;
  for (double k = first; k <= last + 0.5; ++k) {
    axis.ticks.push_back(k * step);
    axis.labels.push_back(tick_label(k * step, decimals, scientific));
  }
  return axis;
}

double ChartLayout::px(double x) const {
  return box_left + (x - x_axis.lo) / (x_axis.hi - x_axis.lo) * (box_right - box_left);
}

double ChartLayout::py(double y) const {
  return box_top + (y_axis.hi - y) / (y_axis.hi - y_axis.lo) * (box_bottom - box_top);
}

ChartLayout layout_loss_chart(const LossCurves& curves, const std::string& title) {
  LMSTACK_CHECK(!curves.train.x.empty(), "loss chart without train points");
  auto range = [&](auto member) {
    const std::vector<double>& t = curves.train.*member;
    const std::vector<double>& e = curves.eval.*member;
    double lo = *std::min_element(t.begin(), t.end()), hi = *std::max_element(t.begin(), t.end());
    for (double v : e) lo = std::min(lo, v), hi = std::max(hi, v);
    return std::pair{lo, hi};
  };
  const auto [x_lo, x_hi] = range(&Curve::x);
  const auto [y_lo, y_hi] = range(&Curve::y);
  ChartLayout c;
  c.x_axis = nice_axis(x_lo, x_hi, 6);
  c.y_axis = nice_axis(y_lo, y_hi, 5);
  int label_width = 0;
  for (const std::string& label : c.y_axis.labels)
    label_width = std::max(label_width, RgbImage::text_width(label, kTextScale));
  c.box_left = snap(std::max(56, label_width + 22));
  // The last x label is centred on the right edge: keep room for its half.
  const int last_half = RgbImage::text_width(c.x_axis.labels.back(), kTextScale) / 2;
  c.box_right = snap(c.width - std::max(24, last_half + 6));
  c.box_top = snap(44);
  c.box_bottom = snap(c.height - 56);
  add_ticks_and_frame(c);
  c.curves.push_back(map_curve(c, curves.train, curves.train_name, kTrainColor));
  if (!curves.eval.x.empty()) {
    c.curves.push_back(map_curve(c, curves.eval, curves.eval_name, kEvalColor));
    c.curves.back().dash = {6, 4};
    c.curves.back().marker_radius = 2.5;
  }
  add_legend(c);
  c.texts.push_back({{c.box_left, 28},
                     fit_title(title, c.width - c.box_left - 10),
                     Anchor::kStart,
                     kTextScale,
                     {0, 0, 0}});
  c.texts.push_back({{(c.box_left + c.box_right) / 2, c.height - 10.0},
                     "step",
                     Anchor::kMiddle,
                     kTextScale,
                     kTextColor});
  return c;
}

}  // namespace lmstack::train
