// Micro benchmarks of the tokenizer's two hot parts, on the committed test text (the shared
// corpus is not needed): pre-tokenization alone (the hand-written scanners) and full encode,
// per encoding. Bytes/s is the figure to read; compare with tools/ref/bench_tiktoken.py, and
// see `lmstack bench tokenizer` for whole files and the batch mode.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "lmstack/core/file.h"
#include "lmstack/tokenizer/scanners.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace {

using lmstack::tokenizer::ScannerKind;
using lmstack::tokenizer::SpecialMode;
using lmstack::tokenizer::Tokenizer;

// The source tree, from this file's path (CMake compiles it by absolute path).
std::string data(const std::string& rel) {
  const std::string self = __FILE__;
  return self.substr(0, self.rfind("bench/tokenizer/")) + "tests/data/tokenizer/" + rel;
}

const std::string& text() {
  static const std::string t = lmstack::read_file(data("fuzz_cases.txt")) +
                               lmstack::read_file(data("constructed_edge_cases.txt"));
  return t;
}

void BM_Scan(benchmark::State& state, ScannerKind kind) {
  std::vector<uint32_t> ends;
  for (auto _ : state) {
    ends.clear();
    lmstack::tokenizer::scan_pieces({kind, 3}, text(), ends);
    benchmark::DoNotOptimize(ends.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}

void BM_Encode(benchmark::State& state, const std::string& encoding) {
  static std::vector<std::pair<std::string, Tokenizer>> cache;
  const Tokenizer* tok = nullptr;
  for (auto& [name, t] : cache)
    if (name == encoding) tok = &t;
  if (tok == nullptr)
    tok = &cache.emplace_back(encoding, Tokenizer::load(data(encoding + ".tiktoken"))).second;
  for (auto _ : state) benchmark::DoNotOptimize(tok->encode(text(), SpecialMode::kAsText));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text().size()));
}

BENCHMARK_CAPTURE(BM_Scan, gpt2, ScannerKind::kGpt2);
BENCHMARK_CAPTURE(BM_Scan, cl100k, ScannerKind::kCl100k);
BENCHMARK_CAPTURE(BM_Scan, o200k, ScannerKind::kO200k);
BENCHMARK_CAPTURE(BM_Encode, r50k_base, std::string("r50k_base"));
BENCHMARK_CAPTURE(BM_Encode, cl100k_base, std::string("cl100k_base"));
BENCHMARK_CAPTURE(BM_Encode, o200k_base, std::string("o200k_base"));

}  // namespace
