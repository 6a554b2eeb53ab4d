// `lmstack bench tokenizer`: encode throughput of a tokenizer on a file (MB/s, median of
// repeated runs), single-threaded and as a batch over a thread pool. cmd_bench.cc adds it
// under the `bench` command.
#pragma once

#include <CLI/CLI.hpp>

namespace lmstack::cli {

// Adds the "tokenizer" subcommand (with its options and its callback) to `bench`.
void add_bench_tokenizer(CLI::App& bench);

}  // namespace lmstack::cli
