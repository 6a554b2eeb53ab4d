// `lmstack quantize`: writes a weight-quantized copy of a model directory that generate,
// perplexity, bench and serve load directly (safetensors with quantized tensors as U8 bytes,
// docs/formats/quantization.md). The work is in model/quantize.h; this file maps options
// onto it and prints what was done.
#include <cstdio>
#include <map>

#include "lmstack/cli/command.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/core/file.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/quantize.h"

namespace lmstack::cli {
namespace {

struct QuantizeCliOptions {
  std::string model, type, output_type, method = "rtn", calibration, out;
  int calib_ctx = 256, calib_tokens = 16384, search_rows = 256, threads = 1;
  bool json = false;
};

model::QuantizeOptions resolve(const QuantizeCliOptions& o, const ModelSession& s) {
  model::QuantizeOptions q;
  q.weight_type = model::parse_quant_type(o.type);
  q.output_type = o.output_type.empty() ? model::default_output_type(q.weight_type)
                                        : model::parse_quant_type(o.output_type);
  q.method = model::parse_quant_method(o.method);
  q.calibration_ctx = o.calib_ctx;
  q.search_rows = o.search_rows;
  if (q.method == model::QuantMethod::kAwq) {
    if (o.calibration.empty())
      throw_error<RequestError>("quantize: --method awq needs --calibration FILE.txt");
    q.calibration_tokens =
        s.tokenizer.encode(read_file(o.calibration), tokenizer::SpecialMode::kAsText);
    if (o.calib_tokens > 0 && q.calibration_tokens.size() > static_cast<size_t>(o.calib_tokens))
      q.calibration_tokens.resize(static_cast<size_t>(o.calib_tokens));
  }
  return q;
}

// Per (from -> to) type: tensor count and mean relative RMS error.
void print_summary(const model::QuantizeReport& r, const std::string& out) {
  std::map<std::string, std::pair<int, double>> by_type;
  for (const model::QuantizedTensor& t : r.tensors) {
    auto& [count, err] =
        by_type[std::string(dtype_name(t.from)) + " -> " + std::string(dtype_name(t.to))];
    ++count;
    err += t.rel_rms_error;
  }
  for (const auto& [k, v] : by_type)
    std::printf("  %-18s %4d tensors, mean relative RMS error %.4f\n", k.c_str(), v.first,
                v.second / v.first);
  for (size_t l = 0; l < r.awq.size(); ++l) {
    std::printf("  AWQ layer %zu:", l);
    const char* names[] = {"qkv", "o", "gate/up", "down"};
    for (int g = 0; g < model::kNumLinearInputs; ++g) {
      const model::AwqGroupChoice& c = r.awq[l].groups[static_cast<size_t>(g)];
      if (c.searched)
        std::printf("  %s a=%.2f err %.2e->%.2e", names[g], c.alpha, c.rtn_error, c.awq_error);
    }
    std::printf("\n");
  }
  std::printf("wrote %s: %.2f MB -> %.2f MB of weights in %.1f s\n", out.c_str(),
              static_cast<double>(r.bytes_before) / 1e6, static_cast<double>(r.bytes_after) / 1e6,
              r.seconds);
}

int run_quantize(const QuantizeCliOptions& o) {
  if (o.out.empty()) throw_error<RequestError>("quantize: --out DIR is required");
  ModelSession s = load_session(o.model);
  const model::QuantizeOptions q = resolve(o, s);
  ThreadPool pool(o.threads);
  model::QuantizeReport report;
  const model::ModelWeights w =
      model::quantize_weights(pool, s.model.config, s.model.weights, q, &report);
  model::write_quantized_model_dir(o.out, s.model, w, q);
  if (o.json) {
    Json j = model::quantization_config_json(q);
    j["out"] = o.out;
    j["bytes_before"] = report.bytes_before;
    j["bytes_after"] = report.bytes_after;
    j["seconds"] = report.seconds;
    j["calibration_tokens"] = q.calibration_tokens.size();
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_summary(report, o.out);
  }
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  add_model_option(app, o->model);
  app.add_option("--type", o->type,
                 "q8_0 | q4_0 | q4_k | int4_g128 (int4-g128) | int4_g64 | "
                 "int4_g32 | q6_k")
      ->required();
  app.add_option("--output-type", o->output_type,
                 "lm_head type (default: q6_k beside 4-bit types, else --type)");
  app.add_option("--method", o->method, "rtn (round-to-nearest) or awq")->capture_default_str();
  app.add_option("--calibration", o->calibration, "text file for AWQ's activation statistics");
  app.add_option("--calib-ctx", o->calib_ctx, "tokens per calibration window")
      ->capture_default_str();
  app.add_option("--calib-tokens", o->calib_tokens, "use at most this many calibration tokens")
      ->capture_default_str();
  app.add_option("--search-rows", o->search_rows,
                 "activation rows per layer the AWQ scale search scores")
      ->capture_default_str();
  app.add_option("--out", o->out, "output model directory (created; model files replaced)");
  app.add_flag("--json", o->json, "print a JSON summary");
  add_threads_option(app, o->threads);
  return [o] { return run_quantize(*o); };
}

const RegisterCommand kRegister{
    {"quantize", "write a weight-quantized copy of a model (RTN or AWQ)",
     "  lmstack quantize -m models/default --type q4_k --out /tmp/q4k\n"
     "  lmstack quantize -m DIR --type int4-g128 --method awq --calibration calib.txt --out Q\n"
     "  lmstack generate -m /tmp/q4k --prompt 'Hello'",
     setup}};

}  // namespace
}  // namespace lmstack::cli
