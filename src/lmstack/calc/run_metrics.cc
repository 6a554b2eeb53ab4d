// Reader and writer of lmstack.run.v1 (docs/formats/run_metrics.md). Validation names the
// field at fault; unknown keys inside `measured` are ignored so writers can add their own.
#include "lmstack/calc/run_metrics.h"

#include <algorithm>
#include <array>

#include "lmstack/core/file.h"

namespace lmstack::calc {
namespace {

constexpr std::array<const char*, 5> kKinds = {"generate", "bench_decode", "bench_prefill", "train",
                                               "serve"};

struct MeasuredField {
  const char* key;
  std::optional<double> RunMeasured::*member;
};
constexpr std::array<MeasuredField, 12> kMeasuredFields = {{
    {"weights_bytes", &RunMeasured::weights_bytes},
    {"kv_cache_bytes", &RunMeasured::kv_cache_bytes},
    {"activations_bytes", &RunMeasured::activations_bytes},
    {"gradients_bytes", &RunMeasured::gradients_bytes},
    {"optimizer_bytes", &RunMeasured::optimizer_bytes},
    {"decode_tok_s", &RunMeasured::decode_tok_s},
    {"prefill_tok_s", &RunMeasured::prefill_tok_s},
    {"train_tok_s", &RunMeasured::train_tok_s},
    {"flops_per_token", &RunMeasured::flops_per_token},
    {"comm_bytes", &RunMeasured::comm_bytes},
    {"ep_all_to_all_bytes", &RunMeasured::ep_all_to_all_bytes},
    {"expert_all_reduce_bytes", &RunMeasured::expert_all_reduce_bytes},
}};

int positive(const Json& j, const char* key, int fallback, const std::string& source) {
  const int v = optional<int>(j, key, fallback, source);
  if (v < 1) throw_error<ConfigError>("{}: field '{}' must be >= 1, got {}", source, key, v);
  return v;
}

int non_negative(const Json& j, const char* key, const std::string& source) {
  const int v = optional<int>(j, key, 0, source);
  if (v < 0) throw_error<ConfigError>("{}: field '{}' must be >= 0, got {}", source, key, v);
  return v;
}

RunSetup setup_from_json(const Json& j, const std::string& src) {
  RunSetup s;
  s.dtype = optional<std::string>(j, "dtype", s.dtype, src);
  s.kv_dtype = optional<std::string>(j, "kv_dtype", "", src);
  s.batch = positive(j, "batch", 1, src);
  s.prompt_tokens = non_negative(j, "prompt_tokens", src);
  s.generated_tokens = non_negative(j, "generated_tokens", src);
  s.context = non_negative(j, "context", src);
  s.threads = non_negative(j, "threads", src);
  s.micro_batch = positive(j, "micro_batch", 1, src);
  s.seq = non_negative(j, "seq", src);
  s.grad_accum = positive(j, "grad_accum", 1, src);
  s.precision = optional<std::string>(j, "precision", s.precision, src);
  if (s.precision != "mixed" && s.precision != "fp32")
    throw_error<ConfigError>("{}: field 'precision' must be 'mixed' or 'fp32', got '{}'", src,
                             s.precision);
  s.recompute = optional<std::string>(j, "recompute", s.recompute, src);
  if (s.recompute != "none" && s.recompute != "selective" && s.recompute != "full")
    throw_error<ConfigError>("{}: field 'recompute' must be none, selective or full, got '{}'", src,
                             s.recompute);
  s.tp = positive(j, "tp", 1, src);
  s.pp = positive(j, "pp", 1, src);
  s.dp = positive(j, "dp", 1, src);
  s.zero = non_negative(j, "zero", src);
  if (s.zero > 3) throw_error<ConfigError>("{}: field 'zero' must be 0..3, got {}", src, s.zero);
  s.ep = positive(j, "ep", 1, src);
  s.flops_convention = optional<std::string>(j, "flops_convention", s.flops_convention, src);
  return s;
}

}  // namespace

RunMetrics run_metrics_from_json(const Json& j, const std::string& source) {
  const std::string schema = require<std::string>(j, "schema", source);
  if (schema != kRunMetricsSchema)
    throw_error<ConfigError>("{}: field 'schema' is '{}', expected '{}'", source, schema,
                             kRunMetricsSchema);
  RunMetrics m;
  m.kind = require<std::string>(j, "kind", source);
  if (std::find_if(kKinds.begin(), kKinds.end(), [&](const char* k) { return m.kind == k; }) ==
      kKinds.end())
    throw_error<ConfigError>(
        "{}: field 'kind' is '{}'; known: generate, bench_decode, bench_prefill, train, serve",
        source, m.kind);
  m.model = require<Json>(j, "model", source);
  if (!m.model.is_string() && !m.model.is_object())
    throw_error<ConfigError>("{}: field 'model' must be a preset name or a config.json object",
                             source);
  m.setup = setup_from_json(optional<Json>(j, "setup", Json::object(), source), source + ": setup");
  m.machine = optional<Json>(j, "machine", Json(), source);
  const Json measured = require<Json>(j, "measured", source);
  if (!measured.is_object())
    throw_error<ConfigError>("{}: field 'measured' must be an object", source);
  for (const MeasuredField& f : kMeasuredFields)
    if (measured.contains(f.key) && !measured[f.key].is_null())
      m.measured.*f.member = require<double>(measured, f.key, source + ": measured");
  if (measured.contains("parallel") && measured["parallel"].is_object())
    m.parallel = measured["parallel"];
  return m;
}

RunMetrics read_run_metrics(const std::string& path) {
  // One JSON document (generate --metrics-out), or a training log in JSONL, one record per
  // step, whose last record is the run's final state.
  const std::string text = read_file(path);
  const Json whole = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!whole.is_discarded()) return run_metrics_from_json(whole, path);
  const size_t end = text.find_last_not_of(" \t\r\n");
  const size_t begin = end == std::string::npos ? std::string::npos : text.rfind('\n', end);
  if (begin == std::string::npos) return run_metrics_from_json(parse_json(text, path), path);
  const std::string source = path + " (last line)";
  return run_metrics_from_json(parse_json(text.substr(begin + 1, end - begin), source), source);
}

Json run_metrics_to_json(const RunMetrics& m) {
  const RunSetup& s = m.setup;
  Json setup = {{"dtype", s.dtype},
                {"batch", s.batch},
                {"prompt_tokens", s.prompt_tokens},
                {"generated_tokens", s.generated_tokens},
                {"context", s.context},
                {"threads", s.threads},
                {"micro_batch", s.micro_batch},
                {"seq", s.seq},
                {"grad_accum", s.grad_accum},
                {"precision", s.precision},
                {"recompute", s.recompute},
                {"tp", s.tp},
                {"pp", s.pp},
                {"dp", s.dp},
                {"zero", s.zero},
                {"ep", s.ep},
                {"flops_convention", s.flops_convention}};
  if (!s.kv_dtype.empty()) setup["kv_dtype"] = s.kv_dtype;
  Json measured = Json::object();
  for (const MeasuredField& f : kMeasuredFields)
    if ((m.measured.*f.member).has_value()) measured[f.key] = *(m.measured.*f.member);
  Json j = {{"schema", kRunMetricsSchema},
            {"kind", m.kind},
            {"model", m.model},
            {"setup", setup},
            {"measured", measured}};
  if (!m.machine.is_null()) j["machine"] = m.machine;
  return j;
}

}  // namespace lmstack::calc
