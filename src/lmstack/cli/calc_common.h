// Shared pieces of the `lmstack calc` subcommands (cmd_calc.cc registers `calc`; calc_*.cc
// add one subcommand each): output flags, report printing, size and list parsing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lmstack/calc/report.h"

namespace lmstack::cli {

struct CalcOutput {
  bool json = false;
  bool explain = false;
};
// --json and --explain on `app`.
void add_calc_output_flags(CLI::App* app, CalcOutput& out);
// Prints the report as text or JSON; returns 0.
int print_calc_report(const calc::Report& r, const CalcOutput& out);
// "280GB", "1.5GiB", "4e9", "512KiB" -> bytes. RequestError naming `option` on bad input.
double parse_bytes(const std::string& text, const std::string& option);
// "4096,4096,4096" -> {4096, 4096, 4096}; exactly `n` positive numbers.
std::vector<double> parse_numbers(const std::string& text, size_t n, const std::string& option);

// Each adds its subcommand to `calc` and returns it with the function that runs it once parsed.
struct CalcSubcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using CalcRunner = CalcSubcommand;
CalcRunner setup_calc_model(CLI::App& calc);
CalcRunner setup_calc_infer(CLI::App& calc);
CalcRunner setup_calc_roofline(CLI::App& calc);
CalcRunner setup_calc_train(CLI::App& calc);
CalcRunner setup_calc_plan(CLI::App& calc);
CalcRunner setup_calc_comm(CLI::App& calc);
CalcRunner setup_calc_cluster(CLI::App& calc);
CalcRunner setup_calc_check(CLI::App& calc);
CalcRunner setup_calc_list(CLI::App& calc);

}  // namespace lmstack::cli
