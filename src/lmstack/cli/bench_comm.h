// `lmstack bench comm`: collective bandwidth over the ranks this process was launched with
// (`mpirun -np N lmstack bench comm`), in the manner of nccl-tests: per collective and size,
// the median time, algorithm bandwidth and bus bandwidth, beside calc's alpha-beta prediction
// for a link preset or for this machine's shared memory. cmd_bench.cc wires it in.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace lmstack::cli {

// Adds the "comm" subcommand to `bench`; its callback sets `runner` to the benchmark.
void add_bench_comm(CLI::App& bench, std::function<int()>& runner);

}  // namespace lmstack::cli
