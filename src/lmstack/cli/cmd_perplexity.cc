// `lmstack perplexity`: token-level perplexity of a text file in non-overlapping windows of
// --ctx tokens. Every token but a window's first is predicted from its prefix in the window;
// ppl = exp(mean negative log-likelihood) over all of them.
#include <cmath>
#include <cstdio>

#include "lmstack/cli/command.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/core/file.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/core/timer.h"
#include "lmstack/model/decoder.h"

namespace lmstack::cli {
namespace {

struct PerplexityOptions {
  std::string model, file, kv_dtype = "f32";
  int ctx = 256, threads = 1, max_windows = 0;
  bool json = false;
};

// Negative log-likelihood of tokens[1..n) given their prefixes, from all-position logits.
double window_nll(model::Decoder& dec, model::KvCache& cache, const std::vector<int32_t>& window,
                  int block_size) {
  std::vector<int32_t> blocks((window.size() + block_size - 1) / block_size);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  model::ForwardBatch batch;
  batch.add_sequence(window, 0, blocks, block_size, true, true);
  std::vector<float> logits;
  dec.forward(batch, cache, logits);
  const size_t v = static_cast<size_t>(dec.config().vocab_size);
  double nll = 0;
  for (size_t i = 0; i + 1 < window.size(); ++i) {
    const float* row = &logits[i * v];
    float mx = row[0];
    for (size_t j = 1; j < v; ++j) mx = std::max(mx, row[j]);
    double z = 0;
    for (size_t j = 0; j < v; ++j) z += std::exp(static_cast<double>(row[j] - mx));
    nll += std::log(z) + mx - row[static_cast<size_t>(window[i + 1])];
  }
  return nll;
}

int run_perplexity(const PerplexityOptions& o) {
  ModelSession s = load_session(o.model);
  if (o.ctx < 2) throw_error<RequestError>("--ctx must be at least 2, got {}", o.ctx);
  if (o.ctx > s.model.config.max_position)
    throw_error<RequestError>("--ctx {} exceeds the model's {} positions", o.ctx,
                              s.model.config.max_position);
  const std::string text = read_file(o.file);
  const std::vector<int32_t> ids = s.tokenizer.encode(text, tokenizer::SpecialMode::kAsText);
  if (ids.size() < 2) throw_error<RequestError>("{}: fewer than 2 tokens", o.file);
  ThreadPool pool(o.threads);
  repack_for_decode(s, pool);
  const int block_size = 16;
  model::Decoder dec(s.model.config, s.model.weights, pool);
  // Every window's attention reads its K/V back from the cache, so the score reflects the
  // --kv-dtype rounding (prefill included).
  model::KvCache cache(s.model.config, (o.ctx + block_size - 1) / block_size, block_size,
                       model::parse_kv_dtype(o.kv_dtype));
  double nll = 0;
  int64_t scored = 0, windows = 0;
  Timer timer;
  for (size_t start = 0; start + 1 < ids.size(); start += static_cast<size_t>(o.ctx)) {
    const size_t end = std::min(ids.size(), start + static_cast<size_t>(o.ctx));
    const std::vector<int32_t> window(ids.begin() + static_cast<std::ptrdiff_t>(start),
                                      ids.begin() + static_cast<std::ptrdiff_t>(end));
    if (window.size() < 2) break;
    nll += window_nll(dec, cache, window, block_size);
    scored += static_cast<int64_t>(window.size()) - 1;
    if (!o.json)
      std::fprintf(stderr, "\rwindow %lld: ppl so far %.4f", static_cast<long long>(++windows),
                   std::exp(nll / static_cast<double>(scored)));
    else
      ++windows;
    if (o.max_windows > 0 && windows >= o.max_windows) break;
  }
  const double ppl = std::exp(nll / static_cast<double>(scored));
  const double secs = timer.seconds();
  if (o.json) {
    std::printf("%s\n", Json{{"perplexity", ppl},
                             {"mean_nll", nll / static_cast<double>(scored)},
                             {"tokens_scored", scored},
                             {"windows", windows},
                             {"ctx", o.ctx},
                             {"kv_dtype", o.kv_dtype},
                             {"tok_s", static_cast<double>(scored) / secs}}
                            .dump(2)
                            .c_str());
  } else {
    std::fprintf(stderr, "\n");
    std::printf("perplexity %.4f over %lld tokens (%lld windows of <= %d, %s KV), %.1f tok/s\n",
                ppl, static_cast<long long>(scored), static_cast<long long>(windows), o.ctx,
                o.kv_dtype.c_str(), static_cast<double>(scored) / secs);
  }
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<PerplexityOptions>();
  add_model_option(app, o->model);
  app.add_option("-f,--file", o->file, "text file to score")->required();
  app.add_option("--ctx", o->ctx, "tokens per window")->capture_default_str();
  add_kv_dtype_option(app, o->kv_dtype);
  app.add_option("--max-windows", o->max_windows, "stop after this many windows (0 = all)");
  app.add_flag("--json", o->json, "print the result as JSON");
  add_threads_option(app, o->threads);
  return [o] { return run_perplexity(*o); };
}

const RegisterCommand kRegister{{"perplexity", "token-level perplexity of a text file",
                                 "  lmstack perplexity -m DIR --file wiki.txt --ctx 512\n"
                                 "  lmstack perplexity --file held_out.txt --json\n"
                                 "  lmstack perplexity --file held_out.txt --kv-dtype int8",
                                 setup}};

}  // namespace
}  // namespace lmstack::cli
