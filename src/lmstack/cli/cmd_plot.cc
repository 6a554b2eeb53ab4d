// `lmstack plot LOG.jsonl --out loss.png|loss.svg`: the train and eval loss curves of a
// `train --log` file as a line chart (step on x, loss on y; eval points dotted and joined by a
// dashed line). The chart is laid out once (train/plot_layout.h) and written as SVG or as a PNG
// rasterized and encoded by lmstack itself (train/plot_render.h): no plotting library.
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/train/plot_layout.h"
#include "lmstack/train/plot_render.h"

namespace lmstack::cli {
namespace {

int run(const std::string& log, const std::string& out) {
  const bool png = out.ends_with(".png");
  if (!png && !out.ends_with(".svg"))
    throw_error<RequestError>("--out {}: the file name must end in .png or .svg", out);
  const train::LossCurves curves = train::read_loss_curves(log);
  const train::ChartLayout chart = train::layout_loss_chart(curves, log);
  write_file_atomic(out, png ? train::render_chart_png(chart) : train::render_chart_svg(chart));
  std::printf("%zu train and %zu eval points -> %s\n", curves.train.x.size(), curves.eval.x.size(),
              out.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto log = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("loss.svg");
  app.add_option("log", *log, "JSONL log written by `lmstack train --log`")->required();
  app.add_option("--out", *out, "output file: .png (raster) or .svg (vector)");
  return [log, out] { return run(*log, *out); };
}

const RegisterCommand kRegister{{"plot", "draw the train and eval loss curves of a training log",
                                 "  lmstack plot runs/tiny/log.jsonl --out loss.png", setup}};

}  // namespace
}  // namespace lmstack::cli
