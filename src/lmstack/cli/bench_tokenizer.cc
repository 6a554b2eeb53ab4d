// `lmstack bench tokenizer` (see bench_tokenizer.h). Every timed run starts with an empty piece
// cache (it may only help within the file). Single-thread speed is reported both as
// wall-clock MB/s and per CPU-second of the encoding thread (steady on a shared machine); the
// batch mode encodes the file as ~4 KB chunks cut at line ends on --threads threads.
// Compare with tools/ref/bench_tiktoken.py on the same file and encoding.
#include "lmstack/cli/bench_tokenizer.h"

#include <time.h>

#include <cstdio>

#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/core/timer.h"
#include "lmstack/tokenizer/tokenizer.h"

namespace lmstack::cli {
namespace {

using tokenizer::SpecialMode;
using tokenizer::Tokenizer;

struct BenchTokenizerOptions {
  std::string tokenizer, encoding, file;
  int threads = 1, runs = 5;
  bool json = false;
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::vector<std::string> chunks_of(const std::string& text, size_t target) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.size(), pos + target);
    const size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

void run(const BenchTokenizerOptions& o) {
  Timer load_timer;
  const auto tok = Tokenizer::load(o.tokenizer, o.encoding);
  const double load_s = load_timer.seconds();
  const std::string text = read_file(o.file);
  const double mb = text.size() / 1e6;
  size_t tokens = tok.encode(text, SpecialMode::kAsText).size();  // warm-up
  // Cold: the piece cache starts empty, so it only helps within the file (new text). Warm: the
  // same file again, every piece cached (re-encoding, e.g. a chat re-rendered each turn).
  std::vector<double> wall, cpu, warm_cpu;
  for (int r = 0; r < o.runs; ++r) {
    Tokenizer::clear_thread_cache();
    Timer t;
    const double c0 = thread_cpu_seconds();
    tokens = tok.encode(text, SpecialMode::kAsText).size();
    cpu.push_back(mb / (thread_cpu_seconds() - c0));
    wall.push_back(mb / t.seconds());
    const double c1 = thread_cpu_seconds();
    tok.encode(text, SpecialMode::kAsText);
    warm_cpu.push_back(mb / (thread_cpu_seconds() - c1));
  }
  std::vector<double> batch;
  const std::vector<std::string> chunks = chunks_of(text, 4096);
  if (o.threads > 1) {
    ThreadPool pool(o.threads);
    tok.encode_batch(pool, chunks, SpecialMode::kAsText);
    for (int r = 0; r < o.runs; ++r) {
      pool.run_on_all([](int) { Tokenizer::clear_thread_cache(); });
      Timer t;
      tok.encode_batch(pool, chunks, SpecialMode::kAsText);
      batch.push_back(mb / t.seconds());
    }
  }
  if (o.json) {
    Json j = {{"tokenizer", tok.name()},
              {"file", o.file},
              {"bytes", text.size()},
              {"tokens", tokens},
              {"load_s", load_s},
              {"runs", o.runs},
              {"mb_s", median(wall)},
              {"mb_per_cpu_s", median(cpu)},
              {"warm_mb_per_cpu_s", median(warm_cpu)}};
    if (!batch.empty())
      j["batch"] = {{"threads", o.threads}, {"chunks", chunks.size()}, {"mb_s", median(batch)}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("tokenizer    %s (loaded in %.2f s)\n", tok.name().c_str(), load_s);
  std::printf("file         %s: %.2f MB, %zu tokens, %.2f bytes/token\n", o.file.c_str(), mb,
              tokens, tokens ? text.size() / double(tokens) : 0.0);
  std::printf(
      "1 thread     %.1f MB/s wall; per CPU-second %.1f MB cold cache, %.1f MB warm "
      "(median of %d)\n",
      median(wall), median(cpu), median(warm_cpu), o.runs);
  if (!batch.empty())
    std::printf("%d threads    %.1f MB/s wall, batch of %zu chunks of ~4 KB (median of %d)\n",
                o.threads, median(batch), chunks.size(), o.runs);
}

}  // namespace

void add_bench_tokenizer(CLI::App& bench) {
  auto o = std::make_shared<BenchTokenizerOptions>();
  CLI::App* sub = bench.add_subcommand("tokenizer", "encode throughput of a tokenizer on a file");
  sub->add_option("--tokenizer", o->tokenizer, "tokenizer.json, model dir, GPT-2 dir or .tiktoken")
      ->required();
  sub->add_option("--encoding", o->encoding, "encoding of a .tiktoken file");
  sub->add_option("--file", o->file, "text to encode")->required();
  sub->add_option("-t,--threads", o->threads, "threads of the batch run (1: single-thread only)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--runs", o->runs, "timed runs (median reported)")->check(CLI::Range(1, 1000));
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->footer(
      "Examples:\n  lmstack bench tokenizer --tokenizer cl100k_base.tiktoken --file en.txt\n"
      "  lmstack bench tokenizer --tokenizer o200k_base.tiktoken --file zh.txt --threads 2");
  sub->callback([o] { run(*o); });
}

}  // namespace lmstack::cli
