// End-of-run summary for generate/chat (see generate_report.h).
#include "lmstack/cli/generate_report.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <numeric>

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/params.h"
#include "lmstack/calc/predict.h"
#include "lmstack/calc/run_metrics.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/memory.h"

namespace lmstack::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted.store(true); }

std::string dtype_of(const model::ModelWeights& w) {
  return std::string(dtype_name(w.layers.empty() ? w.embed.dtype() : w.layers[0].wq.dtype()));
}

}  // namespace

void install_interrupt_handler() { std::signal(SIGINT, on_sigint); }
bool interrupted() { return g_interrupted.load(); }
void clear_interrupt() { g_interrupted.store(false); }

GenerateReport make_generate_report(const ModelSession& s, const model::Generator& gen,
                                    const model::GenerateResult& r, const MachineReport& m,
                                    int threads) {
  const model::ModelConfig& c = s.model.config;
  GenerateReport g;
  g.prompt_tokens = r.prompt_tokens;
  g.generated_tokens = static_cast<int>(r.tokens.size());
  g.threads = threads;
  g.finish_reason = r.finish_reason;
  g.prefill_tok_s = r.prompt_tokens / std::max(r.prefill_seconds, 1e-9);
  // The first token comes from the prefill's logits: decode ran generated - 1 forwards.
  const int steps = std::max(g.generated_tokens - 1, 0);
  g.decode_tok_s = steps > 0 ? steps / std::max(r.decode_seconds, 1e-9) : 0;
  const double mean_ctx = r.prompt_tokens + steps / 2.0;
  // MoE: the experts the decode steps actually read, per step.
  const double expert_bytes =
      c.moe.enabled() && steps > 0 ? static_cast<double>(r.decode_expert_bytes) / steps : -1;
  const DecodeTraffic t =
      decode_traffic(c, s.model.weights, mean_ctx, 1, expert_bytes, gen.kv_dtype());
  g.decode_bytes_per_token = t.weight_bytes + t.kv_bytes;
  g.decode_weight_bytes = t.weight_bytes;
  g.decode_weight_predicted = predicted_decode_weight_bytes(c, s.model.weights, s.model.path);
  g.moe = c.moe.enabled();
  g.decode_gbs = g.decode_bytes_per_token * g.decode_tok_s / 1e9;
  g.dram_gbs = m.dram_read_gbs;
  g.llc_gbs = m.llc_read_gbs;
  g.llc_bytes = m.caches.empty() ? 0 : static_cast<double>(m.caches.back().bytes);
  g.prefill_gflops = forward_flops_per_token(c, r.prompt_tokens / 2.0) * g.prefill_tok_s / 1e9;
  g.peak_gflops = m.peak_f32_gflops();
  g.weights_dtype = dtype_of(s.model.weights);
  g.weights_bytes = static_cast<double>(memory_snapshot().held(MemoryCategory::kWeights));
  g.kv_bytes = static_cast<double>(gen.kv_cache_bytes());
  // What was allocated (whole blocks), as run metrics' `context` means and calc check prices.
  g.kv_context = gen.kv_capacity_tokens();
  const calc::ModelShape shape = calc::ModelShape::from_hf_config(c.to_json(), s.model.path);
  g.weights_predicted = predicted_weight_bytes(c, s.model.weights, s.model.path);
  // The cache is allocated in whole blocks: predict for the rounded-up capacity.
  g.kv_dtype = model::kv_dtype_name(gen.kv_dtype());
  g.kv_predicted = calc::kv_bytes_per_token(shape, g.kv_dtype) * gen.kv_capacity_tokens();
  return g;
}

void print_generate_report(const GenerateReport& r) {
  std::printf("\n--- %d prompt tokens, %d generated (%s), %d threads\n", r.prompt_tokens,
              r.generated_tokens, r.finish_reason.c_str(), r.threads);
  std::printf("prefill  %8.1f tok/s  %7.1f GFLOP/s = %4.1f%% of the %.0f GFLOP/s f32 peak\n",
              r.prefill_tok_s, r.prefill_gflops, 100 * r.prefill_gflops / r.peak_gflops,
              r.peak_gflops);
  const bool in_llc = r.decode_bytes_per_token < 0.8 * r.llc_bytes;
  std::printf(
      "decode   %8.1f tok/s  reads %.1f MB/token = %.1f GB/s = %4.1f%% of DRAM %.1f GB/s%s\n",
      r.decode_tok_s, r.decode_bytes_per_token / 1e6, r.decode_gbs, 100 * r.decode_gbs / r.dram_gbs,
      r.dram_gbs, in_llc ? " (model fits the LLC: judge by the LLC line)" : "");
  if (in_llc)
    std::printf("         %4.1f%% of the LLC-resident read bandwidth %.1f GB/s\n",
                100 * r.decode_gbs / r.llc_gbs, r.llc_gbs);
  if (r.moe)
    std::printf(
        "experts  decode read %.2f MB/token of weights (only the chosen experts), calc's "
        "active parameters predict %.2f MB: ratio %.3f\n",
        r.decode_weight_bytes / 1e6, r.decode_weight_predicted / 1e6,
        r.decode_weight_bytes / r.decode_weight_predicted);
  std::printf("weights  %8.1f MB held (%s), calc predicts %.1f MB: ratio %.3f\n",
              r.weights_bytes / 1e6, r.weights_dtype.c_str(), r.weights_predicted / 1e6,
              r.weights_bytes / r.weights_predicted);
  std::printf("KV cache %8.1f MB held (%d tokens, %s), calc predicts %.1f MB: ratio %.3f\n",
              r.kv_bytes / 1e6, r.kv_context, r.kv_dtype.c_str(), r.kv_predicted / 1e6,
              r.kv_bytes / r.kv_predicted);
}

Json generate_report_json(const GenerateReport& r, const model::GenerateResult& result) {
  return {{"text", result.text},
          {"tokens", result.tokens},
          {"finish_reason", r.finish_reason},
          {"prompt_tokens", r.prompt_tokens},
          {"generated_tokens", r.generated_tokens},
          {"prefill_tok_s", r.prefill_tok_s},
          {"decode_tok_s", r.decode_tok_s},
          {"decode_bytes_per_token", r.decode_bytes_per_token},
          {"decode_gbs", r.decode_gbs},
          {"decode_fraction_of_dram_bandwidth", r.decode_gbs / r.dram_gbs},
          {"prefill_gflops", r.prefill_gflops},
          {"prefill_fraction_of_peak", r.prefill_gflops / r.peak_gflops},
          {"weights_bytes", r.weights_bytes},
          {"weights_bytes_predicted", r.weights_predicted},
          {"kv_dtype", r.kv_dtype},
          {"kv_cache_bytes", r.kv_bytes},
          {"kv_cache_bytes_predicted", r.kv_predicted},
          {"decode_weight_bytes_per_token", r.decode_weight_bytes},
          {"decode_weight_bytes_per_token_predicted", r.decode_weight_predicted}};
}

void write_run_metrics_file(const std::string& path, const ModelSession& s,
                            const GenerateReport& r) {
  Json j = {{"schema", "lmstack.run.v1"},
            {"kind", "generate"},
            {"model", s.model.config.to_json()},
            {"setup",
             {{"dtype", r.weights_dtype},
              {"kv_dtype", r.kv_dtype},
              {"batch", 1},
              {"prompt_tokens", r.prompt_tokens},
              {"generated_tokens", r.generated_tokens},
              {"context", r.kv_context},
              {"threads", r.threads}}},
            {"measured",
             {{"weights_bytes", r.weights_bytes},
              {"kv_cache_bytes", r.kv_bytes},
              {"decode_tok_s", r.decode_tok_s},
              {"prefill_tok_s", r.prefill_tok_s}}}};
  write_file_atomic(path, j.dump(2) + "\n");
}

void print_trace_tokens(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::printf("[trace] %zu prompt tokens:", ids.size());
  for (int32_t id : ids) {
    std::string piece = tok.token_bytes(id);
    std::replace(piece.begin(), piece.end(), '\n', ' ');
    std::printf(" %d:'%s'", id, piece.c_str());
  }
  std::printf("\n");
}

void print_trace_line(const model::LayerTrace& t) {
  std::printf("[trace] layer %2d  %7.2f ms  |h| = %.4g\n", t.layer, t.ms, t.hidden_norm);
}

void print_trace_top5(const tokenizer::Tokenizer& tok, const std::vector<float>& logits) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t k = std::min<size_t>(5, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                    [&](int32_t a, int32_t b) {
                      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
                    });
  const float mx = logits[static_cast<size_t>(idx[0])];
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l - mx));
  std::printf("[trace] next-token top-5 after the prompt:");
  for (size_t i = 0; i < k; ++i) {
    const int32_t id = idx[i];
    std::string piece = "?";  // ids past the tokenizer, or unused ids (cl100k's 100256)
    try {
      if (id < tok.vocab_size()) piece = tok.token_bytes(id);
    } catch (const Error&) {
    }
    std::printf(" %d:'%s' p=%.3f", id, piece.c_str(),
                std::exp(static_cast<double>(logits[static_cast<size_t>(id)] - mx)) / z);
  }
  std::printf("\n");
}

}  // namespace lmstack::cli
