// The two renderers of a ChartLayout (plot_layout.h): SVG text and PNG bytes, both drawing the
// same pixel geometry in the same order. The PNG is rasterized by core/raster.h and encoded by
// core/png.h; neither needs a graphics library.
#pragma once

#include <string>

#include "lmstack/train/plot_layout.h"

namespace lmstack::train {

// A standalone SVG document (texts XML-escaped).
std::string render_chart_svg(const ChartLayout& chart);

// The pixels of the chart as a truecolour PNG file.
RgbImage rasterize_chart(const ChartLayout& chart);
std::string render_chart_png(const ChartLayout& chart);

}  // namespace lmstack::train
