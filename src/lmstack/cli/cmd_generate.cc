// `lmstack generate`: the token's journey for one prompt: tokenize, prefill, decode with
// sampling, stream text, then print speed against this machine's roofline and the bytes held
// against calc's prediction.
#include <csignal>
#include <cstdio>

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/predict.h"
#include "lmstack/calc/run_metrics.h"
#include "lmstack/cli/command.h"
#include "lmstack/cli/generate_report.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/cli/tp_session.h"
#include "lmstack/core/npy.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/generate.h"

namespace lmstack::cli {
namespace {

struct GenerateOptions {
  std::string model, prompt = "Once upon a time", dump_logits, machine, metrics_out;
  std::string kv_dtype = "f32";
  bool chat = false, json = false, trace = false;
  int threads = 1, ctx = 0, tp = 1;
  model::SamplingParams sampling;
};

void add_sampling_options(CLI::App& app, model::SamplingParams& s) {
  app.add_option("--max-tokens", s.max_tokens, "tokens to generate")->capture_default_str();
  app.add_option("--temperature", s.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", s.top_k, "keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", s.top_p, "nucleus sampling mass (1 = off)");
  app.add_option("--min-p", s.min_p, "drop tokens below min-p x p(best) (0 = off)");
  app.add_option("--repetition-penalty", s.repetition_penalty, "CTRL-style (1 = off)");
  app.add_option("--presence-penalty", s.presence_penalty, "OpenAI presence penalty");
  app.add_option("--frequency-penalty", s.frequency_penalty, "OpenAI frequency penalty");
  app.add_option("--seed", s.seed, "sampling seed (same seed, same output)");
  app.add_option("--stop", s.stop, "stop string (repeatable)");
  app.add_flag("--ignore-eos", s.ignore_eos, "keep generating past EOS");
}

int run_generate(const GenerateOptions& o) {
  ModelSession s = load_session(o.model);
  const TpSession tp = enter_tensor_parallel(s, o.tp);
  ThreadPool pool(o.threads);
  repack_for_decode(s, pool);
  const std::vector<int32_t> prompt = encode_prompt(s, o.prompt, o.chat);
  const int ctx = o.ctx > 0 ? o.ctx : static_cast<int>(prompt.size()) + o.sampling.max_tokens;
  model::Generator gen(s.model.config, s.model.weights, pool, ctx, 16,
                       model::parse_kv_dtype(o.kv_dtype));
  gen.set_tensor_parallel(tp.group);
  print_tp_rank_bytes(tp, s.model.weights.bytes(), gen.kv_cache_bytes());
  // Under --tp every rank runs the same steps; only rank 0 prints.
  const bool quiet = o.json || !tp.leader();
  tokenizer::Tokenizer::IncrementalDecoder detok(s.tokenizer);
  std::vector<float> dumped;
  model::GenerateCallbacks cb;
  // A model's vocabulary may be larger than its tokenizer's (padded embedding tables, random
  // test models): such ids print nothing, as Hugging Face's decode skips them.
  const int tokenizer_vocab = s.tokenizer.vocab_size();
  cb.detokenize = [&](int32_t id) { return id < tokenizer_vocab ? detok.push(id) : std::string(); };
  cb.on_token = [&](const model::GeneratedToken& t) {
    if (!quiet) {
      std::fputs(t.text.c_str(), stdout);
      std::fflush(stdout);
    }
    return !interrupted();
  };
  if (!o.dump_logits.empty())
    cb.on_logits = [&](const float* l, int v) { dumped.insert(dumped.end(), l, l + v); };
  const bool trace = o.trace && tp.leader();
  if (trace) cb.trace = print_trace_line;
  if (trace) print_trace_tokens(s.tokenizer, prompt);
  install_interrupt_handler();
  model::GenerateResult r = gen.generate(prompt, o.sampling, s.eos_ids, cb);
  const std::string tail = detok.flush();
  r.text += tail;
  if (!tp.leader()) return 0;
  if (!o.json) std::printf("%s\n", tail.c_str());
  if (trace) print_trace_top5(s.tokenizer, r.last_logits);
  if (!o.dump_logits.empty()) {
    const int64_t v = gen.decoder().vocab_size();
    write_npy(o.dump_logits, {static_cast<int64_t>(dumped.size()) / v, v}, dumped);
  }
  const GenerateReport report =
      make_generate_report(s, gen, r, machine_report(o.machine, o.threads), o.threads);
  if (o.json)
    std::printf("%s\n", generate_report_json(report, r).dump(2).c_str());
  else
    print_generate_report(report);
  if (!o.metrics_out.empty()) write_run_metrics_file(o.metrics_out, s, report);
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  add_model_option(app, o->model);
  app.add_option("-p,--prompt", o->prompt, "prompt text")->capture_default_str();
  app.add_flag("--chat", o->chat, "wrap the prompt in the model's chat template");
  add_sampling_options(app, o->sampling);
  app.add_option("--ctx", o->ctx, "KV cache capacity in tokens (default: prompt + max-tokens)");
  add_kv_dtype_option(app, o->kv_dtype);
  app.add_flag("--json", o->json, "print the result and statistics as JSON");
  app.add_option(
      "--dump-logits", o->dump_logits,
      "write float32 logits [positions, vocab] of every prompt position and step (.npy)");
  app.add_flag("--trace", o->trace,
               "show the token's journey: ids, per-layer time and norm, top-5");
  app.add_option("--machine", o->machine, "doctor --json file (default: cached measurement)");
  app.add_option("--metrics-out", o->metrics_out, "write run metrics for `lmstack calc check`");
  add_threads_option(app, o->threads);
  app.add_option("--tp", o->tp,
                 "tensor-parallel ranks: run under mpirun -np T; each rank holds 1/T of the "
                 "weights and KV cache")
      ->capture_default_str();
  return [o] { return run_generate(*o); };
}

const RegisterCommand kRegister{
    {"generate", "generate text from a prompt, with speed vs roofline and memory vs calc",
     "  lmstack generate --prompt 'The capital of France is' --max-tokens 32\n"
     "  lmstack generate -m DIR --chat -p 'Write a haiku' --temperature 0.7 --seed 1\n"
     "  lmstack generate -m DIR -p 'Hello' --temperature 0 --dump-logits logits.npy --trace\n"
     "  lmstack generate -p 'Once upon a time' --max-tokens 64 --kv-dtype int8\n"
     "  mpirun -np 2 lmstack generate -m DIR -p 'Hello' --temperature 0 --tp 2",
     setup}};

}  // namespace
}  // namespace lmstack::cli
