// `lmstack plot LOG.jsonl --out loss.svg`: the train and eval loss curves of a `train --log`
// file as an SVG line chart (step on x, loss on y; eval points joined by a dashed line).
// Written by hand: a chart of two polylines needs no plotting library.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/train/train_log.h"

namespace lmstack::cli {
namespace {

struct Series {
  std::vector<double> x, y;
};

struct Frame {
  double x0, x1, y0, y1;
  double w = 720, h = 420, left = 70, right = 20, top = 30, bottom = 50;
  double px(double x) const { return left + (x - x0) / (x1 - x0) * (w - left - right); }
  double py(double y) const { return top + (y1 - y) / (y1 - y0) * (h - top - bottom); }
};

std::string polyline(const Series& s, const Frame& f, const char* color, bool dashed) {
  std::string pts;
  for (size_t i = 0; i < s.x.size(); ++i)
    pts += fmt::format("{:.1f},{:.1f} ", f.px(s.x[i]), f.py(s.y[i]));
  return fmt::format(
      "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} points=\"{}\"/>\n", color,
      dashed ? " stroke-dasharray=\"6,4\"" : "", pts);
}

std::string axes(const Frame& f) {
  std::string out = fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
      f.left, f.top, f.w - f.left - f.right, f.h - f.top - f.bottom);
  for (int i = 0; i <= 4; ++i) {
    const double xv = f.x0 + (f.x1 - f.x0) * i / 4, yv = f.y0 + (f.y1 - f.y0) * i / 4;
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{:.0f}</text>\n",
        f.px(xv), f.h - f.bottom + 18, xv);
    out += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"end\">{:.3g}</text>\n",
        f.left - 6, f.py(yv) + 4, yv);
  }
  out += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\">step</text>\n",
      (f.left + f.w - f.right) / 2, f.h - 12);
  return out;
}

std::string render_svg(const Series& train, const Series& eval, const std::string& title) {
  Frame f{};
  f.x0 = train.x.front(), f.x1 = std::max(train.x.back(), f.x0 + 1);
  f.y0 = *std::min_element(train.y.begin(), train.y.end());
  f.y1 = *std::max_element(train.y.begin(), train.y.end());
  for (double v : eval.y) f.y0 = std::min(f.y0, v), f.y1 = std::max(f.y1, v);
  if (f.y1 - f.y0 < 1e-9) f.y1 = f.y0 + 1;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\">{}</text>\n",
      f.w, f.h, f.left, title);
  svg += axes(f) + polyline(train, f, "#1f77b4", false);
  if (!eval.x.empty()) svg += polyline(eval, f, "#d62728", true);
  svg +=
      fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#1f77b4\">train loss</text>\n",
                  f.w - 180, f.top + 16);
  if (!eval.x.empty())
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#d62728\">eval loss</text>\n",
                    f.w - 100, f.top + 16);
  return svg + "</svg>\n";
}

int run(const std::string& log, const std::string& out) {
  Series train, eval;
  for (const Json& line : train::read_train_log(log)) {
    if (!line.contains("measured") || !line["measured"].contains("step")) continue;
    const Json& m = line["measured"];
    const double step = m["step"].get<double>();
    if (m.contains("loss")) train.x.push_back(step), train.y.push_back(m["loss"].get<double>());
    if (m.contains("eval_loss"))
      eval.x.push_back(step), eval.y.push_back(m["eval_loss"].get<double>());
  }
  if (train.x.empty())
    throw_error<FormatError>("{}: no training steps (measured.step/loss) in the log", log);
  if (!out.ends_with(".svg"))
    throw_error<RequestError>("--out {}: only .svg is written (convert to PNG with rsvg-convert)",
                              out);
  write_file_atomic(out, render_svg(train, eval, log));
  std::printf("%zu train and %zu eval points -> %s\n", train.x.size(), eval.x.size(), out.c_str());
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto log = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("loss.svg");
  app.add_option("log", *log, "JSONL log written by `lmstack train --log`")->required();
  app.add_option("--out", *out, "output .svg file");
  return [log, out] { return run(*log, *out); };
}

const RegisterCommand kRegister{{"plot", "draw the train and eval loss curves of a training log",
                                 "  lmstack plot runs/tiny/log.jsonl --out loss.svg", setup}};

}  // namespace
}  // namespace lmstack::cli
