// `lmstack calc`: derive the glossary's numbers from a model's shape, the precision, the
// parallel layout and the hardware, and check them against measured runs. The subcommands live
// in calc_*.cc; the arithmetic in src/lmstack/calc/.
#include <cstdio>
#include <memory>

#include "lmstack/cli/calc_common.h"
#include "lmstack/cli/command.h"
#include "lmstack/core/error.h"

namespace lmstack::cli {

void add_calc_output_flags(CLI::App* app, CalcOutput& out) {
  app->add_flag("--json", out.json, "print the report as JSON");
  app->add_flag("--explain", out.explain, "print each row's derivation with its numbers");
}

int print_calc_report(const calc::Report& r, const CalcOutput& out) {
  if (out.json)
    std::printf("%s\n", calc::render_json(r).dump(2).c_str());
  else
    std::printf("%s", calc::render_text(r, out.explain).c_str());
  return 0;
}

double parse_bytes(const std::string& text, const std::string& option) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw_error<RequestError>("{}: '{}' is not a size (e.g. 280GB, 1.5GiB, 4e9)", option, text);
  }
  const std::string unit = text.substr(used);
  struct Suffix {
    const char* s;
    double f;
  };
  constexpr Suffix kSuffixes[] = {{"", 1},
                                  {"B", 1},
                                  {"KB", 1e3},
                                  {"MB", 1e6},
                                  {"GB", 1e9},
                                  {"TB", 1e12},
                                  {"KiB", 1024.0},
                                  {"MiB", 1048576.0},
                                  {"GiB", 1073741824.0},
                                  {"TiB", 1099511627776.0}};
  for (const Suffix& s : kSuffixes)
    if (unit == s.s && v > 0) return v * s.f;
  throw_error<RequestError>("{}: '{}' is not a positive size (units B KB MB GB TB KiB MiB GiB TiB)",
                            option, text);
}

std::vector<double> parse_numbers(const std::string& text, size_t n, const std::string& option) {
  std::vector<double> v;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, comma - start);
    size_t used = 0;
    double x = 0;
    try {
      x = std::stod(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != part.size() || part.empty() || !(x > 0))
      throw_error<RequestError>("{}: '{}' is not a positive number", option, part);
    v.push_back(x);
    start = comma + 1;
  }
  if (v.size() != n)
    throw_error<RequestError>("{}: expected {} comma-separated numbers, got {}", option, n,
                              v.size());
  return v;
}

namespace {

std::function<int()> setup(CLI::App& app) {
  app.require_subcommand(1);
  auto subs = std::make_shared<std::vector<CalcSubcommand>>();
  for (auto* s :
       {setup_calc_model, setup_calc_train, setup_calc_infer, setup_calc_roofline, setup_calc_comm,
        setup_calc_cluster, setup_calc_plan, setup_calc_check, setup_calc_list})
    subs->push_back(s(app));
  return [subs] {
    for (const CalcSubcommand& sub : *subs)
      if (sub.app->parsed()) return sub.run();
    return 1;
  };
}

const RegisterCommand kRegister{
    {"calc",
     "derive every number of the glossary (parameters, memory, FLOPs, KV cache, roofline, "
     "communication, cluster) from first principles and check runs against it",
     "  lmstack calc model llama-3-8b\n"
     "  lmstack calc train llama-2-7b --tokens 2e12 --gpus 64 --gpu a100-80g --zero 1\n"
     "  lmstack calc infer llama-3-8b --gpu h100-sxm --batch 100 --prompt 4096 --output 4096\n"
     "  lmstack calc roofline --gpu h100-sxm --gemm 4096,4096,4096 --plot roofline.svg\n"
     "  lmstack calc comm --bytes 280GB --ranks 128 --link ndr\n"
     "  lmstack calc cluster --gpus 1024 --gpus-per-node 8 --nic ndr\n"
     "  lmstack calc plan llama-3-70b --gpus 512 --gpu h100-sxm --tokens 15e12\n"
     "  lmstack calc plan llama-3.1-405b --gpus 16384 --tokens 15.6e12 --seq 8192 "
     "--global-batch-tokens 16777216 --tp 8 --pp 16 --explain\n"
     "  lmstack calc check run.json --explain",
     setup}};

}  // namespace
}  // namespace lmstack::cli
