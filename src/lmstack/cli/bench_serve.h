// `lmstack bench serve`: a load generator in the style of vLLM's benchmark_serving: prompts
// from a dataset (random token ids, a shared prefix plus random suffixes, or a JSONL file),
// Poisson arrivals at --request-rate (or all at once), at most --max-concurrency in flight,
// streaming /v1/completions against --url or an in-process server on --model. Reports
// request and token throughput, TTFT / TPOT / ITL / E2E mean, median, p90, p99 and goodput.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace lmstack::cli {

// Adds the "serve" subcommand to `bench`; once parsed, its callback sets `runner`.
void add_bench_serve(CLI::App& bench, std::function<int()>& runner);

}  // namespace lmstack::cli
