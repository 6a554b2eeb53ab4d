// `lmstack calc check RUN.json`: predicted vs measured for a run-metrics file
// (docs/formats/run_metrics.md); exits 3 when any ratio is flagged.
#include <cstdio>
#include <memory>

#include "lmstack/calc/reports.h"
#include "lmstack/calc/run_metrics.h"
#include "lmstack/cli/calc_common.h"

namespace lmstack::cli {
namespace {

struct CheckArgs {
  std::string path, gpu = "this";
  calc::CheckOptions o;
  CalcOutput out;
};

}  // namespace

CalcSubcommand setup_calc_check(CLI::App& calc) {
  auto a = std::make_shared<CheckArgs>();
  CLI::App* sub = calc.add_subcommand(
      "check", "compare a run's measured bytes, FLOPs and tokens/s with calc's predictions");
  sub->add_option("run", a->path, "run-metrics JSON (schema lmstack.run.v1)")->required();
  sub->add_option("--tolerance", a->o.tolerance, "allowed |measured/predicted - 1|")
      ->capture_default_str();
  sub->add_option("--min-efficiency", a->o.min_efficiency,
                  "flag speeds under this fraction of their roofline bound")
      ->capture_default_str();
  sub->add_option("--gpu", a->gpu, "hardware when the file names none (preset or 'this')")
      ->capture_default_str();
  sub->add_option("--machine", a->o.machine_file, "doctor JSON for --gpu this");
  add_calc_output_flags(sub, a->out);
  return {sub, [a] {
            calc::CheckOptions o = a->o;
            o.hw_name = a->gpu;
            const calc::RunMetrics run = calc::read_run_metrics(a->path);
            int flagged = 0;
            const calc::Report r =
                calc::check_report(run, calc::hardware_for_run(run, o), o, &flagged);
            print_calc_report(r, a->out);
            if (flagged > 0) std::fprintf(stderr, "calc check: %d ratio(s) flagged\n", flagged);
            return flagged > 0 ? 3 : 0;
          }};
}

}  // namespace lmstack::cli
