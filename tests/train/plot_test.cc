// train/plot_layout.h and plot_render.h: nice ticks, log reading, the layout's data-to-pixel
// mapping, and both renderers. The PNG is decoded by the independent reader of
// tests/png_decode.h and a pixel on a known stretch of the train curve and on an eval dot is
// checked; `lmstack plot` is run end to end for .png, .svg and a refused extension.
#include <gtest/gtest.h>

#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/train/plot_layout.h"
#include "lmstack/train/plot_render.h"
#include "png_decode.h"
#include "test_util.h"

namespace lmstack::train {
namespace {

Rgb pixel(const test::DecodedPng& png, double x, double y) {
  const size_t at = (size_t(y) * png.width + size_t(x)) * 3;
  return {uint8_t(png.rgb[at]), uint8_t(png.rgb[at + 1]), uint8_t(png.rgb[at + 2])};
}

// True when `got` is `want` blended over white with opacity >= `alpha`.
::testing::AssertionResult at_least(Rgb got, Rgb want, double alpha) {
  const uint8_t g[3] = {got.r, got.g, got.b}, w[3] = {want.r, want.g, want.b};
  for (int c = 0; c < 3; ++c)
    if (std::abs(g[c] - w[c]) > (1 - alpha) * std::abs(255 - w[c]) + 1)
      return ::testing::AssertionFailure()
             << fmt::format("got ({},{},{}), want ({},{},{}) at opacity >= {}", got.r, got.g, got.b,
                            want.r, want.g, want.b, alpha);
  return ::testing::AssertionSuccess();
}

// train: y = 5 - 0.02 x for x = 0..100; eval at x = 50 (4.2) and 100 (3.1).
LossCurves sample_curves() {
  LossCurves c;
  for (int x = 0; x <= 100; ++x) c.train.x.push_back(x), c.train.y.push_back(5 - 0.02 * x);
  c.eval.x = {50, 100};
  c.eval.y = {4.2, 3.1};
  return c;
}

TEST(PlotTest, NiceAxisPicksOneTwoFiveSteps) {
  const Axis loss = nice_axis(2.13, 9.07, 5);
  EXPECT_EQ(loss.ticks, (std::vector<double>{2, 4, 6, 8, 10}));
  EXPECT_EQ(loss.labels, (std::vector<std::string>{"2", "4", "6", "8", "10"}));
  const Axis steps = nice_axis(1, 44, 6);
  EXPECT_EQ(steps.lo, 0);
  EXPECT_EQ(steps.hi, 50);
  EXPECT_EQ(steps.ticks.size(), 6u);
  const Axis small = nice_axis(0.0012, 0.0047, 5);
  EXPECT_EQ(small.labels.front(), "0.001");
  EXPECT_EQ(small.labels.back(), "0.005");
  const Axis flat = nice_axis(3, 3, 5);  // one value: widened around it
  EXPECT_LT(flat.lo, 3);
  EXPECT_GT(flat.hi, 3);
  const Axis negative = nice_axis(-0.3, 0.2, 5);
  EXPECT_EQ(negative.labels,
            (std::vector<std::string>{"-0.3", "-0.2", "-0.1", "0.0", "0.1", "0.2"}));
}

TEST(PlotTest, ReadLossCurvesSkipsLinesWithoutStepsAndNonFiniteLosses) {
  const std::string dir = test::temp_dir("plot_read");
  const std::string log = path_join(dir, "log.jsonl");
  write_file_atomic(log,
                    "{\"measured\":{\"step\":1,\"loss\":9.5}}\n"
                    "{\"kind\":\"note\"}\n"
                    "{\"measured\":{\"step\":2,\"loss\":null}}\n"
                    "{\"measured\":{\"step\":3,\"loss\":8.25,\"eval_loss\":8.5}}\n");
  const LossCurves c = read_loss_curves(log);
  EXPECT_EQ(c.train.x, (std::vector<double>{1, 3}));
  EXPECT_EQ(c.train.y, (std::vector<double>{9.5, 8.25}));
  EXPECT_EQ(c.eval.x, (std::vector<double>{3}));
  write_file_atomic(log, "{\"kind\":\"note\"}\n");
  try {
    read_loss_curves(log);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(log), std::string::npos) << e.what();
  }
}

TEST(PlotTest, LayoutMapsTheAxisRangeOntoThePlotBox) {
  const ChartLayout c = layout_loss_chart(sample_curves(), "run <1>");
  EXPECT_EQ(c.x_axis.lo, 0);
  EXPECT_EQ(c.x_axis.hi, 100);
  EXPECT_EQ(c.y_axis.lo, 3);
  EXPECT_EQ(c.y_axis.hi, 5);
  EXPECT_DOUBLE_EQ(c.px(0), c.box_left);
  EXPECT_DOUBLE_EQ(c.px(100), c.box_right);
  EXPECT_DOUBLE_EQ(c.py(3), c.box_bottom);
  EXPECT_DOUBLE_EQ(c.py(5), c.box_top);
  ASSERT_EQ(c.curves.size(), 2u);
  EXPECT_EQ(c.curves[0].points.size(), 101u);
  EXPECT_EQ(c.curves[1].dash.empty(), false);
  EXPECT_EQ(c.legend_samples.size(), 2u);
  // Legend inside the plot box.
  EXPECT_GT(c.legend_box.x0, c.box_left);
  EXPECT_LT(c.legend_box.x1, c.box_right);
  EXPECT_LT(c.legend_box.y1, c.box_bottom);
}

TEST(PlotTest, PngShowsTheCurvesAtTheirPixels) {
  const ChartLayout c = layout_loss_chart(sample_curves(), "run");
  const test::DecodedPng png = test::decode_png(render_chart_png(c));
  ASSERT_EQ(png.error, "");
  ASSERT_EQ(png.width, 720u);
  ASSERT_EQ(png.height, 420u);
  // The train line in pixel column i: at that column's centre its data x is known, so the
  // pixel holding the line's centre is covered >= 75% (stroke 1.5 wide).
  for (double data_x : {10.0, 30.0, 70.0}) {
    const double col = std::floor(c.px(data_x));
    const double x_at_centre = (col + 0.5 - c.box_left) / (c.box_right - c.box_left) * 100;
    const double row = std::floor(c.py(5 - 0.02 * x_at_centre));
    EXPECT_TRUE(at_least(pixel(png, col, row), kTrainColor, 0.75)) << data_x;
    EXPECT_EQ(pixel(png, col, row - 4), (Rgb{255, 255, 255})) << data_x;  // above: background
  }
  // The eval dot at (50, 4.2) is solid eval colour.
  EXPECT_EQ(pixel(png, c.px(50), c.py(4.2)), kEvalColor);
  // Frame pixel and the title's ink.
  EXPECT_EQ(pixel(png, c.box_left, (c.box_top + c.box_bottom) / 2), (Rgb{136, 136, 136}));
  int title_ink = 0;
  for (int y = 14; y < 28; ++y)
    for (int x = int(c.box_left); x < int(c.box_left) + 36; ++x)
      title_ink += pixel(png, x, y) == Rgb{0, 0, 0};
  EXPECT_GT(title_ink, 20);
}

TEST(PlotTest, SvgHasTheSameElements) {
  const ChartLayout c = layout_loss_chart(sample_curves(), "run <1> & co");
  const std::string svg = render_chart_svg(c);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("run &lt;1&gt; &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#1f77b4\""), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray=\"6,4\""), std::string::npos);
  EXPECT_NE(svg.find(">4.5</text>"), std::string::npos);
  EXPECT_NE(svg.find(fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\"", c.px(50), c.py(4.2))),
            std::string::npos);
}

TEST(PlotTest, CommandWritesPngAndSvgAndRefusesOtherExtensions) {
  const std::string dir = test::temp_dir("plot_cli");
  const std::string log = path_join(dir, "log.jsonl");
  std::string text;
  for (int step = 1; step <= 30; ++step)
    text += fmt::format("{{\"measured\":{{\"step\":{},\"loss\":{}{}}}}}\n", step, 9.0 / step,
                        step % 10 == 0 ? fmt::format(",\"eval_loss\":{}", 9.5 / step) : "");
  write_file_atomic(log, text);
  const std::string bin = test::lmstack_binary();
  std::string out;
  ASSERT_EQ(test::run_command(bin + " plot " + log + " --out " + dir + "/loss.png", &out), 0)
      << out;
  EXPECT_NE(out.find("30 train and 3 eval points"), std::string::npos) << out;
  const test::DecodedPng png = test::decode_png(read_file(dir + "/loss.png"));
  EXPECT_EQ(png.error, "");
  EXPECT_EQ(png.width, 720u);
  ASSERT_EQ(test::run_command(bin + " plot " + log + " --out " + dir + "/loss.svg", &out), 0)
      << out;
  EXPECT_NE(read_file(dir + "/loss.svg").find("<polyline"), std::string::npos);
  EXPECT_NE(test::run_command(bin + " plot " + log + " --out " + dir + "/loss.jpg", &out), 0);
  EXPECT_NE(out.find("loss.jpg: the file name must end in .png or .svg"), std::string::npos) << out;
}

}  // namespace
}  // namespace lmstack::train
