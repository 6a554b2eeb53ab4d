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

int run(const std::string& log, const std::string& out, const std::string& metric,
        const std::string& eval_metric) {
  const bool png = out.ends_with(".png");
  if (!png && !out.ends_with(".svg"))
    throw_error<RequestError>("--out {}: the file name must end in .png or .svg", out);
  const train::LossCurves curves = metric == "loss"
                                       ? train::read_loss_curves(log)
                                       : train::read_metric_curves(log, metric, eval_metric);
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
  auto metric = std::make_shared<std::string>("loss");
  auto eval_metric = std::make_shared<std::string>();
  app.add_option("--metric", *metric,
                 "measured key to draw (loss; an `rl` log: reward, kl, entropy, response_len)");
  app.add_option("--eval-metric", *eval_metric,
                 "a second, dashed curve (e.g. eval_accuracy; loss draws eval_loss)");
  return [log, out, metric, eval_metric] { return run(*log, *out, *metric, *eval_metric); };
}

const RegisterCommand kRegister{{"plot", "draw the train and eval loss curves of a training log",
                                 "  lmstack plot runs/tiny/log.jsonl --out loss.png\n"
                                 "  lmstack plot runs/grpo/log.jsonl --metric reward "
                                 "--eval-metric eval_accuracy --out reward.png",
                                 setup}};

}  // namespace
}  // namespace lmstack::cli
