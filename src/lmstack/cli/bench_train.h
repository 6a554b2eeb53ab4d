// `lmstack bench train`: training throughput (tokens/s) and MFU of one model, batch and dtype
// against this machine's measured peak FLOP/s; cli/cmd_bench.cc wires it in.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace lmstack::cli {

// Adds the "train" subcommand to `bench`; its callback sets `runner` to the benchmark.
void add_bench_train(CLI::App& bench, std::function<int()>& runner);

}  // namespace lmstack::cli
