// The loss chart of `lmstack plot`, laid out once in pixel coordinates and drawn by two
// renderers (plot_render.h: SVG and PNG), so scales, ticks, colours and legend stand in one
// place. Axis ticks follow Heckbert's "nice numbers" (Graphics Gems, 1990): a step of 1, 2 or
// 5 times a power of ten, the axis widened to whole steps so every point lies inside.
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/raster.h"

namespace lmstack::train {

// One data series: parallel x (step) and y (loss) values in log order.
struct Curve {
  std::vector<double> x, y;
};

struct LossCurves {
  Curve train;  // measured.loss of every line with measured.step
  Curve eval;   // measured.eval_loss where present
  std::string train_name = "train loss", eval_name = "eval loss";  // legend entries
};

// Reads a `train --log` JSONL file; lines without measured.step, and losses that are not finite
// numbers (a diverged run logs null), are skipped. FormatError naming the file when no train
// point remains.
LossCurves read_loss_curves(const std::string& log_path);
// The same for any measured key (`lmstack plot --metric`, e.g. an `rl` log's reward, kl,
// entropy, response_len) as the solid curve and `eval_metric` (may be "") as the dashed one.
LossCurves read_metric_curves(const std::string& log_path, const std::string& metric,
                              const std::string& eval_metric);

struct Axis {
  double lo = 0, hi = 1;            // the axis range, whole tick steps
  std::vector<double> ticks;        // lo, lo + step, ..., hi
  std::vector<std::string> labels;  // each tick printed with the step's decimals
};

// Nice ticks covering [lo, hi] with about `target` ticks (>= 2). A zero-width range is
// widened around its value. Non-finite bounds are a programmer error.
Axis nice_axis(double lo, double hi, int target);

enum class Anchor { kStart, kMiddle, kEnd };

struct ChartText {
  Point at;  // anchor point on the baseline
  std::string text;
  Anchor anchor = Anchor::kStart;
  int scale = 2;  // bitmap-font scale in the PNG; the SVG uses monospace at 9 * scale px
  Rgb color;
};

struct ChartLine {
  Point a, b;
  Rgb color;
  double width = 1;
};

// A polyline in pixel coordinates with optional dashes and dots at its points.
struct ChartCurve {
  std::string name;
  std::vector<Point> points;
  Rgb color;
  double width = 1.5;
  std::vector<double> dash;  // SVG stroke-dasharray lengths; empty = solid
  double marker_radius = 0;  // > 0 draws a dot at each point
};

struct ChartRect {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  Rgb fill, stroke;
};

// Everything to draw, in drawing order: background, lines (grid, then frame and ticks),
// curves, legend box, legend samples, texts.
struct ChartLayout {
  int width = 720, height = 420;
  Rgb background{255, 255, 255};
  double box_left = 0, box_top = 0, box_right = 0, box_bottom = 0;  // the plot area
  Axis x_axis, y_axis;
  std::vector<ChartLine> lines;
  std::vector<ChartCurve> curves;
  ChartRect legend_box;
  std::vector<ChartCurve> legend_samples;
  std::vector<ChartText> texts;

  // Data to pixel coordinates inside the plot area (y grows downward).
  double px(double x) const;
  double py(double y) const;
};

inline constexpr Rgb kTrainColor{31, 119, 180};
inline constexpr Rgb kEvalColor{214, 39, 40};

// Lays out the train curve (solid) and the eval curve (dashed, dotted points; omitted when
// empty) with `title` above the plot (shortened from the left with "..." when too wide).
// The train curve must have at least one point.
ChartLayout layout_loss_chart(const LossCurves& curves, const std::string& title);

}  // namespace lmstack::train
