// Load generator for the OpenAI-compatible server (see bench_serve.h). Each request streams
// /v1/completions; the client times the first content chunk (TTFT), the gaps between chunks
// (ITL) and the end (E2E); TPOT = (E2E - TTFT) / (output tokens - 1), as vLLM defines it.
#include "lmstack/cli/bench_serve.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "lmstack/cli/model_session.h"
#include "lmstack/cli/spec_options.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/json.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/serve/http_server.h"

namespace lmstack::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
  std::string url, model, dataset = "random", model_name, api_key, kv_memory = "256MiB";
  std::string kv_dtype = "f32";
  int num_prompts = 64, max_concurrency = 0, input_len = 128, output_len = 64, warmup = 2;
  int shared_prefix_len = 1024, threads = 1, max_batch_tokens = 512, block_size = 16;
  double request_rate = 0;  // 0 = inf: all requests at once
  std::string request_rate_text = "inf";
  double slo_ttft_ms = 0, slo_tpot_ms = 0;
  uint64_t seed = 0;
  bool json = false, no_prefix_cache = false;
  SpecCliOptions spec;
};

struct Prompt {
  Json prompt;  // token ids or text
  int max_tokens;
};

struct Sample {
  bool ok = false;
  double ttft = 0, e2e = 0;
  int output_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  std::vector<double> itl;
};

std::vector<Prompt> make_prompts(const BenchServeOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int> id(10, 250);  // ids every byte-level vocabulary has
  std::vector<Prompt> out;
  if (o.dataset == "random" || o.dataset == "shared-prefix") {
    std::vector<int> prefix;
    if (o.dataset == "shared-prefix")
      for (int i = 0; i < o.shared_prefix_len; ++i) prefix.push_back(id(rng));
    for (int p = 0; p < o.num_prompts + o.warmup; ++p) {
      std::vector<int> ids = prefix;
      for (int i = 0; i < o.input_len; ++i) ids.push_back(id(rng));
      out.push_back({Json(ids), o.output_len});
    }
    return out;
  }
  const std::string text = read_file(o.dataset);  // JSONL: {"prompt": ..., "max_tokens"?}
  size_t start = 0, line = 0;
  while (start < text.size() && static_cast<int>(out.size()) < o.num_prompts + o.warmup) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line;
    const std::string row = text.substr(start, end - start);
    start = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json j = parse_json(row, fmt::format("{}:{}", o.dataset, line));
    if (!j.contains("prompt"))
      throw_error<FormatError>("{}:{}: missing field 'prompt'", o.dataset, line);
    out.push_back({j["prompt"], j.value("max_tokens", o.output_len)});
  }
  if (out.empty()) throw_error<FormatError>("{}: no prompts", o.dataset);
  while (static_cast<int>(out.size()) < o.num_prompts + o.warmup)
    out.push_back(out[out.size() % std::max<size_t>(1, line)]);
  return out;
}

// Parses the SSE stream as it arrives, timing each chunk that carries text.
Sample run_request(const std::string& host, int port, const BenchServeOptions& o,
                   const std::string& model, const Prompt& p) {
  httplib::Client client(host, port);
  client.set_read_timeout(600, 0);
  Json body = {{"model", model},
               {"prompt", p.prompt},
               {"max_tokens", p.max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  Sample s;
  std::string buffer;
  const auto start = Clock::now();
  auto last = start;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buffer.append(data, n);
    size_t cut;
    while ((cut = buffer.find("\n\n")) != std::string::npos) {
      const std::string event = buffer.substr(0, cut);
      buffer.erase(0, cut + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const Json j = Json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) {
        s.output_tokens = j["usage"]["completion_tokens"].get<int>();
        s.prompt_tokens = j["usage"]["prompt_tokens"].get<int>();
        s.cached_tokens = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
      }
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const auto now = Clock::now();
      if (s.ttft == 0)
        s.ttft = std::chrono::duration<double>(now - start).count();
      else
        s.itl.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  s.ok = client.send(req, res, error) && res.status == 200 && s.output_tokens > 0;
  s.e2e = std::chrono::duration<double>(Clock::now() - start).count();
  return s;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Json summary_ms(const std::vector<double>& seconds) {
  double sum = 0;
  for (double x : seconds) sum += x;
  const double mean = seconds.empty() ? 0 : sum / static_cast<double>(seconds.size());
  return Json{{"mean", mean * 1e3},
              {"median", percentile(seconds, 0.5) * 1e3},
              {"p90", percentile(seconds, 0.9) * 1e3},
              {"p99", percentile(seconds, 0.99) * 1e3}};
}

// Value of an unlabelled Prometheus sample "name value" in `text`.
double metric_value(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::atof(text.c_str() + at + name.size() + 2);
}

// Samples /metrics while the run lasts for the peak fraction of KV blocks held (sequences and
// prefix cache), then reads the server's own KV utilisation at peak load (its step with the
// most blocks held by running sequences, exact rather than sampled; since server start).
struct KvWatcher {
  std::atomic<bool> stop{false};
  double peak_usage = 0, peak_utilisation = 0, peak_running_blocks = 0;
  static std::optional<std::string> metrics(httplib::Client& client, const std::string& key) {
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    auto r = client.Get("/metrics", headers);
    if (!r || r->status != 200) return std::nullopt;
    return "\n" + r->body;
  }
  void run(const std::string& host, int port, const std::string& key) {
    httplib::Client client(host, port);
    for (int i = 0; i < 100000 && !stop; ++i) {  // bounded: ~5.5 h at 200 ms
      if (auto text = metrics(client, key))
        peak_usage = std::max(peak_usage, metric_value(*text, "lmstack:kv_cache_usage_perc"));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (auto text = metrics(client, key)) {
      peak_utilisation = metric_value(*text, "lmstack:kv_cache_peak_utilization");
      peak_running_blocks = metric_value(*text, "lmstack:kv_cache_peak_running_blocks");
    }
  }
};

// The server's speculative-decoding counters (serve/metrics.h); zero without speculation.
serve::SpecDecodeStats spec_counters(const std::string& host, int port, const std::string& key) {
  httplib::Client client(host, port);
  serve::SpecDecodeStats s;
  if (auto text = KvWatcher::metrics(client, key)) {
    s.num_drafts =
        static_cast<int64_t>(metric_value(*text, "lmstack:spec_decode_num_drafts_total"));
    s.num_draft_tokens =
        static_cast<int64_t>(metric_value(*text, "lmstack:spec_decode_num_draft_tokens_total"));
    s.num_accepted_tokens =
        static_cast<int64_t>(metric_value(*text, "lmstack:spec_decode_num_accepted_tokens_total"));
  }
  return s;
}

// Acceptance over the measured requests only (the counters' change during the run).
Json spec_report(const serve::SpecDecodeStats& before, const serve::SpecDecodeStats& after) {
  serve::SpecDecodeStats d;
  d.num_drafts = after.num_drafts - before.num_drafts;
  d.num_draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
  d.num_accepted_tokens = after.num_accepted_tokens - before.num_accepted_tokens;
  return Json{{"num_drafts", d.num_drafts},
              {"num_draft_tokens", d.num_draft_tokens},
              {"num_accepted_tokens", d.num_accepted_tokens},
              {"acceptance_rate", d.acceptance_rate()},
              {"mean_acceptance_length", d.mean_acceptance_length()}};
}
// The engine's step-phase counters (Metrics::add_step) at one moment; the difference over
// the run says where the server's time went. Zero where the server does not export them.
struct EngineCounters {
  double steps = 0, schedule_s = 0, forward_s = 0, sample_s = 0, draft_s = 0;
  static EngineCounters read(const std::string& host, int port, const std::string& key) {
    httplib::Client client(host, port);
    EngineCounters c;
    if (auto text = KvWatcher::metrics(client, key)) {
      c.steps = metric_value(*text, "lmstack:engine_steps_total");
      c.schedule_s = metric_value(*text, "lmstack:engine_schedule_seconds_total");
      c.forward_s = metric_value(*text, "lmstack:engine_forward_seconds_total");
      c.sample_s = metric_value(*text, "lmstack:engine_sample_seconds_total");
      c.draft_s = metric_value(*text, "lmstack:engine_draft_seconds_total");
    }
    return c;
  }
  // Per-step means over the run, in ms, and the fraction of the run the engine was busy.
  Json since(const EngineCounters& before, double duration_s) const {
    const double n = std::max(1.0, steps - before.steps);
    const double busy = (schedule_s - before.schedule_s) + (forward_s - before.forward_s) +
                        (sample_s - before.sample_s) + (draft_s - before.draft_s);
    return Json{{"steps", steps - before.steps},
                {"schedule_ms_per_step", 1e3 * (schedule_s - before.schedule_s) / n},
                {"forward_ms_per_step", 1e3 * (forward_s - before.forward_s) / n},
                {"sample_ms_per_step", 1e3 * (sample_s - before.sample_s) / n},
                {"draft_ms_per_step", 1e3 * (draft_s - before.draft_s) / n},
                {"busy_fraction", duration_s > 0 ? busy / duration_s : 0.0}};
  }
};

Json measure(const std::string& host, int port, const BenchServeOptions& o,
             const std::string& model) {
  const std::vector<Prompt> prompts = make_prompts(o);
  for (int i = 0; i < o.warmup; ++i)
    run_request(host, port, o, model, prompts[static_cast<size_t>(i)]);
  const serve::SpecDecodeStats spec_before = spec_counters(host, port, o.api_key);
  std::vector<double> arrival(static_cast<size_t>(o.num_prompts), 0.0);
  std::mt19937_64 rng(o.seed + 1);
  std::exponential_distribution<double> gap(o.request_rate > 0 ? o.request_rate : 1.0);
  for (size_t i = 1; i < arrival.size(); ++i)
    arrival[i] = arrival[i - 1] + (o.request_rate > 0 ? gap(rng) : 0.0);
  std::vector<Sample> samples(arrival.size());
  std::atomic<size_t> next{0};
  const EngineCounters engine_before = EngineCounters::read(host, port, o.api_key);
  KvWatcher watcher;
  std::thread watch([&] { watcher.run(host, port, o.api_key); });
  const auto start = Clock::now();
  const int workers =
      o.max_concurrency > 0 ? std::min(o.max_concurrency, o.num_prompts) : o.num_prompts;
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i = next++; i < arrival.size(); i = next++) {
        std::this_thread::sleep_until(start + std::chrono::duration<double>(arrival[i]));
        samples[i] = run_request(host, port, o, model, prompts[i + static_cast<size_t>(o.warmup)]);
      }
    });
  for (auto& t : pool) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  watcher.stop = true;
  watch.join();
  const Json spec = spec_report(spec_before, spec_counters(host, port, o.api_key));
  const Json engine = EngineCounters::read(host, port, o.api_key).since(engine_before, duration);
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t ok = 0, in_tokens = 0, out_tokens = 0, cached = 0, good = 0;
  for (const Sample& s : samples) {
    if (!s.ok) continue;
    ++ok;
    in_tokens += s.prompt_tokens;
    out_tokens += s.output_tokens;
    cached += s.cached_tokens;
    ttft.push_back(s.ttft);
    e2e.push_back(s.e2e);
    const double t = s.output_tokens > 1 ? (s.e2e - s.ttft) / (s.output_tokens - 1) : 0;
    tpot.push_back(t);
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
    good += (o.slo_ttft_ms <= 0 || s.ttft * 1e3 <= o.slo_ttft_ms) &&
            (o.slo_tpot_ms <= 0 || t * 1e3 <= o.slo_tpot_ms);
  }
  return Json{{"kind", "bench_serve"},
              {"dataset", o.dataset},
              {"num_prompts", o.num_prompts},
              {"completed", ok},
              {"failed", o.num_prompts - ok},
              {"request_rate", o.request_rate_text},
              {"max_concurrency", o.max_concurrency},
              {"duration_s", duration},
              {"request_throughput", ok / duration},
              {"input_tokens", in_tokens},
              {"output_tokens", out_tokens},
              {"cached_prompt_tokens", cached},
              {"output_token_throughput", out_tokens / duration},
              {"total_token_throughput", (in_tokens + out_tokens) / duration},
              {"goodput_requests_per_s", good / duration},
              {"ttft_ms", summary_ms(ttft)},
              {"tpot_ms", summary_ms(tpot)},
              {"itl_ms", summary_ms(itl)},
              {"e2e_ms", summary_ms(e2e)},
              {"peak_kv_usage", watcher.peak_usage},
              {"peak_kv_running_blocks", watcher.peak_running_blocks},
              {"peak_kv_utilisation", watcher.peak_utilisation},
              {"spec_decode", spec},
              {"engine", engine}};
}

void print_report(const Json& r) {
  std::printf("requests      %lld completed, %lld failed in %.2f s (rate %s, concurrency %s)\n",
              r["completed"].get<long long>(), r["failed"].get<long long>(),
              r["duration_s"].get<double>(), r["request_rate"].get<std::string>().c_str(),
              r["max_concurrency"].get<int>() > 0
                  ? std::to_string(r["max_concurrency"].get<int>()).c_str()
                  : "unlimited");
  std::printf("throughput    %.2f req/s, %.1f output tok/s, %.1f total tok/s, goodput %.2f req/s\n",
              r["request_throughput"].get<double>(), r["output_token_throughput"].get<double>(),
              r["total_token_throughput"].get<double>(), r["goodput_requests_per_s"].get<double>());
  std::printf("tokens        %lld in (%lld from the prefix cache), %lld out\n",
              r["input_tokens"].get<long long>(), r["cached_prompt_tokens"].get<long long>(),
              r["output_tokens"].get<long long>());
  std::printf("%-6s %10s %10s %10s %10s  (ms)\n", "", "mean", "median", "p90", "p99");
  for (const char* k : {"ttft", "tpot", "itl", "e2e"}) {
    const Json& m = r[std::string(k) + "_ms"];
    std::printf("%-6s %10.2f %10.2f %10.2f %10.2f\n", k, m["mean"].get<double>(),
                m["median"].get<double>(), m["p90"].get<double>(), m["p99"].get<double>());
  }
  std::printf(
      "KV            peak usage %.1f%% of blocks; at peak load (%.0f blocks held by running "
      "requests) utilisation %.1f%% (tokens stored / token slots)\n",
      100 * r["peak_kv_usage"].get<double>(), r["peak_kv_running_blocks"].get<double>(),
      100 * r["peak_kv_utilisation"].get<double>());
  const Json& spec = r["spec_decode"];
  if (spec["num_drafts"].get<int64_t>() > 0)
    std::printf(
        "speculative   acceptance %.1f%% (%lld of %lld draft tokens), mean acceptance length "
        "%.2f tokens per verified draft\n",
        100 * spec["acceptance_rate"].get<double>(),
        static_cast<long long>(spec["num_accepted_tokens"].get<int64_t>()),
        static_cast<long long>(spec["num_draft_tokens"].get<int64_t>()),
        spec["mean_acceptance_length"].get<double>());
  const Json& e = r["engine"];
  if (e["steps"].get<double>() > 0)
    std::printf(
        "engine        %.0f steps, per step %.2f ms forward + %.2f ms sampling/streaming + %.2f ms "
        "scheduling + %.2f ms drafting; busy %.1f%% of the run\n",
        e["steps"].get<double>(), e["forward_ms_per_step"].get<double>(),
        e["sample_ms_per_step"].get<double>(), e["schedule_ms_per_step"].get<double>(),
        e["draft_ms_per_step"].get<double>(), 100 * e["busy_fraction"].get<double>());
}

std::string served_model(const std::string& host, int port, const BenchServeOptions& o) {
  if (!o.model_name.empty()) return o.model_name;
  httplib::Client client(host, port);
  httplib::Headers headers;
  if (!o.api_key.empty()) headers.emplace("Authorization", "Bearer " + o.api_key);
  auto r = client.Get("/v1/models", headers);
  if (!r || r->status != 200)
    throw_error<IoError>("bench serve: GET http://{}:{}/v1/models failed", host, port);
  return parse_json(r->body, "/v1/models")["data"][0]["id"].get<std::string>();
}

// --model: an in-process server on a free loopback port for the length of the run.
Json bench_in_process(BenchServeOptions o) {
  const ModelSession s = load_session(o.model);
  ThreadPool pool(o.threads);
  serve::EngineOptions e;
  e.scheduler.max_batch_tokens = o.max_batch_tokens;
  e.block_size = o.block_size;
  e.max_context = s.model.config.max_position;
  e.kv_dtype = model::parse_kv_dtype(o.kv_dtype);
  e.num_blocks = model::KvCache::blocks_for_bytes(
      s.model.config, e.block_size, static_cast<int64_t>(std::stod(o.kv_memory) * 1048576.0),
      e.kv_dtype);
  e.prefix_cache = !o.no_prefix_cache;
  e.max_waiting = 1 << 20;
  e.eos_ids = s.eos_ids;
  e.make_detokenizer = serve::OpenAiApi::detokenizer_factory(s.tokenizer);
  std::optional<ModelSession> draft;  // --draft-model: outlives the engine
  e.spec = spec_options(o.spec, draft);
  serve::Engine engine(s.model.config, s.model.weights, pool, e);
  serve::OpenAiApi api(engine, s.tokenizer, "bench");
  serve::HttpServerOptions http;
  http.host = "127.0.0.1";
  http.port = 0;
  http.request_timeout_s = 3600;
  serve::HttpServer server(api, http);
  const int port = server.bind();
  engine.start();
  std::thread listener([&] { server.listen(); });
  o.api_key.clear();
  Json r;
  try {
    r = measure("127.0.0.1", port, o, "bench");
  } catch (...) {
    server.stop();
    listener.join();
    throw;
  }
  server.stop();
  listener.join();
  engine.stop();
  return r;
}

int run_bench_serve(BenchServeOptions o) {
  if (o.request_rate_text != "inf") o.request_rate = std::stod(o.request_rate_text);
  if (o.url.empty() == o.model.empty())
    throw_error<RequestError>("bench serve: give exactly one of --url and --model");
  if (!o.url.empty() && (o.spec.method != "none" || !o.spec.draft_model.empty()))
    throw_error<RequestError>(
        "--spec / --draft-model: only with --model (start the server with them)");
  Json r;
  if (!o.model.empty()) {
    r = bench_in_process(o);
  } else {
    const std::string prefix = "http://";
    if (o.url.rfind(prefix, 0) != 0) throw_error<RequestError>("--url: expected http://HOST:PORT");
    const std::string hostport =
        o.url.substr(prefix.size(), o.url.find('/', prefix.size()) - prefix.size());
    const size_t colon = hostport.rfind(':');
    const std::string host = hostport.substr(0, colon);
    const int port = colon == std::string::npos ? 80 : std::stoi(hostport.substr(colon + 1));
    r = measure(host, port, o, served_model(host, port, o));
  }
  if (o.json)
    std::printf("%s\n", r.dump(2).c_str());
  else
    print_report(r);
  return r["completed"].get<int>() == o.num_prompts ? 0 : 1;
}

}  // namespace

void add_bench_serve(CLI::App& bench, std::function<int()>& runner) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* sub = bench.add_subcommand(
      "serve", "load-test an OpenAI-compatible server (TTFT, TPOT, ITL, E2E, throughput)");
  auto* url = sub->add_option("--url", o->url, "server to test, e.g. http://127.0.0.1:8080");
  sub->add_option("--model", o->model, "model directory: test an in-process lmstack server")
      ->excludes(url);
  sub->add_option("--dataset", o->dataset, "random | shared-prefix | FILE.jsonl ({\"prompt\"})")
      ->capture_default_str();
  sub->add_option("--num-prompts", o->num_prompts, "requests measured")->capture_default_str();
  sub->add_option("--request-rate", o->request_rate_text, "Poisson arrivals per second, or inf")
      ->capture_default_str();
  sub->add_option("--max-concurrency", o->max_concurrency, "requests in flight at most (0: all)");
  sub->add_option("--input-len", o->input_len, "prompt tokens (random datasets)")
      ->capture_default_str();
  sub->add_option("--output-len", o->output_len, "tokens generated per request")
      ->capture_default_str();
  sub->add_option("--shared-prefix-len", o->shared_prefix_len, "shared-prefix dataset: prefix")
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "requests sent first and not measured")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "dataset and arrival seed");
  sub->add_option("--slo-ttft-ms", o->slo_ttft_ms, "goodput: TTFT limit");
  sub->add_option("--slo-tpot-ms", o->slo_tpot_ms, "goodput: TPOT limit");
  sub->add_option("--served-model-name", o->model_name, "model id (default: from /v1/models)");
  sub->add_option("--api-key", o->api_key, "bearer key for --url");
  add_kv_dtype_option(*sub, o->kv_dtype);
  sub->add_option("--kv-memory-mib", o->kv_memory, "--model: KV pool in MiB")
      ->capture_default_str();
  sub->add_option("--max-batch-tokens", o->max_batch_tokens, "--model: token budget per step");
  sub->add_option("--block-size", o->block_size, "--model: tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_flag("--no-prefix-cache", o->no_prefix_cache, "--model: disable the prefix cache");
  sub->add_option("-t,--threads", o->threads,
                  "--model: engine threads (default 1: the load generator shares this process; "
                  "for all cores, serve separately and use --url)");
  add_spec_options(*sub, o->spec);
  sub->add_flag("--json", o->json, "print the report as JSON");
  sub->footer(
      "Examples:\n  lmstack bench serve --url http://127.0.0.1:8080 --num-prompts 64 "
      "--max-concurrency 16\n  lmstack bench serve --model DIR --dataset shared-prefix "
      "--input-len 64 --output-len 32 --json\n  lmstack bench serve --model DIR --spec ngram "
      "--num-spec-tokens 4 --max-concurrency 4");
  sub->callback([o, &runner] { runner = [o] { return run_bench_serve(*o); }; });
}

}  // namespace lmstack::cli
