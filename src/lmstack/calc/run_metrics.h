// The run-metrics file (schema lmstack.run.v1, docs/formats/run_metrics.md): what generate,
// bench, train and serve measured, with the model, setup and machine needed to predict it.
// Writers fill RunMetrics and call run_metrics_to_json; `calc check` reads it back.
#pragma once

#include <optional>
#include <string>

#include "lmstack/core/json.h"

namespace lmstack::calc {

inline constexpr const char* kRunMetricsSchema = "lmstack.run.v1";

struct RunSetup {
  std::string dtype = "bf16";  // weight storage type (dtype_bytes() names)
  std::string kv_dtype;        // "" = same as dtype
  int batch = 1;
  int prompt_tokens = 0;
  int generated_tokens = 0;
  int context = 0;  // KV capacity per sequence; 0 = prompt_tokens + generated_tokens
  int threads = 0;
  int micro_batch = 1;
  int seq = 0;
  int grad_accum = 1;
  std::string precision = "mixed";  // "mixed" or "fp32"
  std::string recompute = "none";   // "none", "selective", "full"
  int tp = 1, pp = 1, dp = 1, zero = 0;
  int ep = 1;  // expert-parallel group size (train --ep)
  std::string flops_convention = "palm";
};

// Everything optional: a run reports what it measured.
struct RunMeasured {
  std::optional<double> weights_bytes, kv_cache_bytes, activations_bytes, gradients_bytes,
      optimizer_bytes;
  std::optional<double> decode_tok_s, prefill_tok_s, train_tok_s, flops_per_token;
  std::optional<double> comm_bytes;  // bytes this rank sent in one training step (Comm::stats)
  // --ep: the expert-parallel all-to-alls and the experts' gradient all-reduce of the step
  std::optional<double> ep_all_to_all_bytes, expert_all_reduce_bytes;
};

struct RunMetrics {
  std::string kind;  // generate, bench_decode, bench_prefill, train, serve
  Json model;        // preset name (string) or HF config.json object
  RunSetup setup;
  Json machine;  // null, a doctor report object, or a hardware preset name
  RunMeasured measured;
  Json parallel;  // measured.parallel of a TP/PP training log (null otherwise; parallel_check.h)
};

// Parses and validates; ConfigError naming `source` and the field on a missing/mistyped field,
// a wrong schema string, an unknown kind or a non-positive count.
RunMetrics run_metrics_from_json(const Json& j, const std::string& source);
// Reads a file through core/file.h (IoError / FormatError / ConfigError naming the path).
RunMetrics read_run_metrics(const std::string& path);
// The JSON form; absent optionals are omitted. Round-trips through run_metrics_from_json.
Json run_metrics_to_json(const RunMetrics& m);

}  // namespace lmstack::calc
