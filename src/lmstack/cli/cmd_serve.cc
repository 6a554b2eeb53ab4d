// `lmstack serve`: the OpenAI-compatible server over the serving engine (src/lmstack/serve/).
// Sizes the paged KV pool from --kv-memory or --kv-fraction, prints the pool and memory
// ledger beside calc's prediction (--dry-run stops there), then serves until SIGINT/SIGTERM.
#include <sys/resource.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include <fmt/ranges.h>

#include "lmstack/calc/model_shape.h"
#include "lmstack/calc/predict.h"
#include "lmstack/cli/command.h"
#include "lmstack/cli/model_session.h"
#include "lmstack/cli/spec_options.h"
#include "lmstack/cli/tp_session.h"
#include "lmstack/core/error.h"
#include "lmstack/core/file.h"
#include "lmstack/core/memory.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/model/tp_inference.h"
#include "lmstack/serve/disagg.h"
#include "lmstack/serve/disagg_router.h"
#include "lmstack/serve/http_server.h"

namespace lmstack::cli {
namespace {

struct ServeOptions {
  std::string model, served_name, api_key, kv_memory, chat_template_file;
  std::string host = "127.0.0.1";
  int port = 8080, threads = 1, max_batch_tokens = 512, max_num_seqs = 256, block_size = 16;
  int max_queue = 1024, max_model_len = 0, http_workers = 0, max_connections = 4096, tp = 1;
  std::string max_body = "16MiB", kv_dtype = "f32", tool_call_parser = "auto";
  double kv_fraction = 0, read_timeout = 30, shutdown_grace = 5;
  bool no_prefix_cache = false, dry_run = false;
  SpecCliOptions spec;
  // Prefill/decode disaggregation (docs/disaggregation.md).
  std::string role = "colocated", inject_kv_fault;
  std::vector<std::string> prefill_urls, decode_urls;
  int kv_retries = 2;
  double kv_timeout = 120;
  bool disaggregate = false;
};

// "4096", "512MiB", "2G", "1.5GB" → bytes (K/M/G are binary, KB/MB/GB decimal).
int64_t parse_bytes(const std::string& text, const char* flag = "--kv-memory") {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw_error<RequestError>("{}: '{}' is not a size (e.g. 512MiB, 2G)", flag, text);
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  for (const auto& [name, s] :
       std::initializer_list<std::pair<const char*, double>>{{"", 1},
                                                             {"B", 1},
                                                             {"K", 1024.0},
                                                             {"KiB", 1024.0},
                                                             {"KB", 1e3},
                                                             {"M", 1048576.0},
                                                             {"MiB", 1048576.0},
                                                             {"MB", 1e6},
                                                             {"G", 1073741824.0},
                                                             {"GiB", 1073741824.0},
                                                             {"GB", 1e9}})
    if (unit == name) scale = s;
  if (scale == 0 || value <= 0)
    throw_error<RequestError>("{}: '{}' is not a positive size (e.g. 512MiB, 2G)", flag, text);
  return static_cast<int64_t>(value * scale);
}

// MemAvailable from /proc/meminfo, in bytes (0 when unknown).
int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

// KV bytes: --kv-memory, else --kv-fraction of available memory, else room for 64 full
// contexts capped at 10% of available memory.
int64_t kv_budget_bytes(const ServeOptions& o, int64_t bytes_per_token, int context) {
  if (!o.kv_memory.empty()) return parse_bytes(o.kv_memory);
  const int64_t available = available_memory_bytes();
  if (o.kv_fraction > 0)
    return static_cast<int64_t>(o.kv_fraction * static_cast<double>(available));
  const int64_t roomy = bytes_per_token * context * 64;
  return available > 0 ? std::min(roomy, available / 10) : roomy;
}

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

// "KV cache: N blocks × B tokens = T tokens, X bytes; max concurrency ..." and the ledger.
void print_memory(const serve::Engine& engine, const ModelSession& s, const ServeOptions& o) {
  const model::ModelConfig& c = s.model.config;
  const int64_t blocks = engine.kv_cache().num_blocks();
  const int64_t tokens = blocks * o.block_size;
  const calc::ModelShape shape = calc::ModelShape::from_hf_config(c.to_json(), s.model.path);
  const double calc_per_token = calc::kv_bytes_per_token(shape, o.kv_dtype);
  std::printf(
      "KV cache (%s): %lld blocks x %d tokens = %lld tokens, %s; max concurrency for %d-token "
      "requests: %.2f\n",
      o.kv_dtype.c_str(), static_cast<long long>(blocks), o.block_size,
      static_cast<long long>(tokens), mib(static_cast<double>(engine.kv_cache().bytes())).c_str(),
      engine.max_context(), static_cast<double>(tokens) / engine.max_context());
  std::printf("  calc predicts %.0f bytes/token -> %s for %lld tokens (measured/predicted %.3f)\n",
              calc_per_token, mib(calc_per_token * static_cast<double>(tokens)).c_str(),
              static_cast<long long>(tokens),
              static_cast<double>(engine.kv_cache().bytes()) /
                  (calc_per_token * static_cast<double>(tokens)));
  const MemorySnapshot m = memory_snapshot();
  const int step_tokens = std::min(o.max_batch_tokens, engine.max_context());
  const double act_pred =
      4.0 * step_tokens *
          (2.0 * c.hidden_size + 2.0 * c.q_dim() + 2.0 * c.kv_dim() + 2.0 * c.intermediate_size) +
      4.0 * std::min(step_tokens, o.max_num_seqs) * c.vocab_size;
  std::printf("memory ledger (held now; prediction):\n");
  std::printf("  weights      %12s   %s (%lld parameters)\n",
              mib(static_cast<double>(m.held(MemoryCategory::kWeights))).c_str(),
              mib(predicted_weight_bytes(c, s.model.weights, s.model.path)).c_str(),
              static_cast<long long>(c.num_parameters()));
  std::printf("  kv_cache     %12s   %s\n",
              mib(static_cast<double>(m.held(MemoryCategory::kKvCache))).c_str(),
              mib(calc_per_token * static_cast<double>(tokens)).c_str());
  std::printf("  activations  %12s   %s (a %d-token step)\n",
              mib(static_cast<double>(m.held(MemoryCategory::kActivations))).c_str(),
              mib(act_pred).c_str(), step_tokens);
  std::printf("  buffers      %12s\n",
              mib(static_cast<double>(m.held(MemoryCategory::kBuffers))).c_str());
  int64_t total = 0;
  for (int i = 0; i < kNumMemoryCategories; ++i) total += m.held(static_cast<MemoryCategory>(i));
  std::printf("  total        %12s\n", mib(static_cast<double>(total)).c_str());
}

serve::EngineOptions engine_options(const ServeOptions& o, const ModelSession& s) {
  const model::ModelConfig& c = s.model.config;
  serve::EngineOptions e;
  e.scheduler.max_batch_tokens = o.max_batch_tokens;
  e.scheduler.max_num_seqs = o.max_num_seqs;
  e.block_size = o.block_size;
  e.max_context = o.max_model_len > 0 ? std::min(o.max_model_len, c.max_position) : c.max_position;
  // The same byte budget holds 2x (bf16) or ~4x (int8) the f32 blocks.
  e.kv_dtype = model::parse_kv_dtype(o.kv_dtype);
  const int64_t per_token = model::KvCache::bytes_per_token(c, e.kv_dtype);
  e.num_blocks = model::KvCache::blocks_for_bytes(
      c, o.block_size, kv_budget_bytes(o, per_token, e.max_context), e.kv_dtype);
  if (e.num_blocks < 1)
    throw_error<RequestError>("--kv-memory: too small for one block of {} tokens ({} bytes)",
                              o.block_size, per_token * o.block_size);
  e.prefix_cache = !o.no_prefix_cache;
  e.max_waiting = o.max_queue;
  e.eos_ids = s.eos_ids;
  e.make_detokenizer = serve::OpenAiApi::detokenizer_factory(s.tokenizer);
  return e;
}

std::string model_name(const ServeOptions& o, const std::string& path) {
  if (!o.served_name.empty()) return o.served_name;
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p.substr(p.find_last_of('/') + 1);
}

// The HTTP layer's options. Workers parse, tokenize and submit: as many as the engine has
// threads (at least 2, so a long tokenization does not hold up short requests).
serve::HttpServerOptions http_options(const ServeOptions& o) {
  serve::HttpServerOptions h;
  h.host = o.host;
  h.port = o.port;
  h.api_key = o.api_key;
  h.num_workers = o.http_workers > 0 ? o.http_workers : std::max(2, o.threads);
  // A prefill or decode worker waits for the other server or the engine for a whole prefill
  // (serve/disagg.h): enough of them that concurrent requests overlap.
  if (o.http_workers == 0 && o.role != "colocated") h.num_workers = std::max(16, o.threads);
  h.read_timeout_s = o.read_timeout;
  h.max_connections = o.max_connections;
  h.shutdown_grace_s = o.shutdown_grace;
  h.limits.max_body_bytes = static_cast<size_t>(parse_bytes(o.max_body, "--max-body"));
  return h;
}

// Each connection is a descriptor: raise the soft limit to the hard one so that
// --max-connections is reachable.
void raise_descriptor_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

// --tp, ranks 1..T-1: no HTTP, no scheduler; run each forward and block copy rank 0's engine
// sends on this rank's slice and KV cache, until rank 0 shuts down.
int follow_tensor_parallel(const ModelSession& s, const TpSession& tp, ThreadPool& pool,
                           const serve::EngineOptions& e) {
  model::Decoder decoder(s.model.config, s.model.weights, pool);
  decoder.set_tensor_parallel(tp.group);
  model::KvCache kv(s.model.config, e.num_blocks, e.block_size, e.kv_dtype);
  print_tp_rank_bytes(tp, s.model.weights.bytes(), kv.bytes());
  const int64_t forwards = model::tp_follow(decoder, kv, tp.group);
  std::fprintf(stderr, "tp rank %d: stopped after %lld forwards\n", tp.rank,
               static_cast<long long>(forwards));
  return 0;
}

serve::ServeRole serve_role(const std::string& role) {
  if (role == "prefill") return serve::ServeRole::kPrefill;
  if (role == "decode") return serve::ServeRole::kDecode;
  return serve::ServeRole::kColocated;
}

// --role prefill|decode: the options of serve/disagg.h, and what the roles cannot combine with.
serve::DisaggOptions disagg_options(const ServeOptions& o) {
  serve::DisaggOptions d;
  d.role = serve_role(o.role);
  if (d.role == serve::ServeRole::kColocated) return d;
  if (o.tp > 1 || o.spec.method != "none" || !o.spec.draft_model.empty())
    throw_error<RequestError>("--role {}: runs without --tp and --spec", o.role);
  if (d.role == serve::ServeRole::kDecode) {
    if (o.prefill_urls.size() > 1)
      throw_error<RequestError>("--prefill: a decode server takes one default prefill server");
    if (!o.prefill_urls.empty()) d.prefill_url = o.prefill_urls[0];
  }
  d.kv_retries = o.kv_retries;
  d.kv_timeout_s = o.kv_timeout;
  if (!o.inject_kv_fault.empty()) {  // KIND:COUNT
    const size_t colon = o.inject_kv_fault.find(':');
    d.fault_kind = o.inject_kv_fault.substr(0, colon);
    d.fault_count = colon == std::string::npos ? 1 : std::stoi(o.inject_kv_fault.substr(colon + 1));
    if (d.fault_kind != "corrupt" && d.fault_kind != "truncate" && d.fault_kind != "error")
      throw_error<RequestError>("--inject-kv-fault '{}': expected corrupt|truncate|error[:COUNT]",
                                o.inject_kv_fault);
  }
  return d;
}

sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Serves until SIGINT/SIGTERM (blocked in `signals`, so only the waiter thread takes them).
int serve_router_until_signal(serve::ProxyRouter& router, sigset_t signals) {
  std::fflush(stdout);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    router.stop();
  });
  router.serve();
  waiter.join();
  std::printf("stopped\n");
  return 0;
}

// --role router: no model, no engine; a proxy in front of the prefill and decode servers.
int run_router(const ServeOptions& o) {
  sigset_t signals = block_stop_signals();
  serve::ProxyRouterOptions r;
  r.host = o.host;
  r.port = o.port;
  r.prefill_urls = o.prefill_urls;
  r.decode_urls = o.decode_urls;
  r.read_timeout_s = o.read_timeout;
  r.shutdown_grace_s = o.shutdown_grace;
  serve::ProxyRouter router(r);
  const int port = router.bind();
  std::printf("serving router on http://%s:%d (prefill %s; decode %s)\n", o.host.c_str(), port,
              fmt::format("{}", fmt::join(o.prefill_urls, ", ")).c_str(),
              fmt::format("{}", fmt::join(o.decode_urls, ", ")).c_str());
  return serve_router_until_signal(router, signals);
}

// One engine behind one HTTP server on 127.0.0.1, in a prefill or decode role: the two halves
// of --disaggregate. Both share the model's weights (read-only) but each has its own thread
// pool, KV pool and engine loop, as two processes would.
struct RoleServer {
  RoleServer(const ModelSession& s, const ServeOptions& o, serve::EngineOptions eo,
             serve::DisaggOptions d)
      : pool(o.threads), engine(s.model.config, s.model.weights, pool, std::move(eo)) {
    engine.warmup();
    std::string chat_template;
    if (!o.chat_template_file.empty()) chat_template = read_file(o.chat_template_file);
    api = std::make_unique<serve::OpenAiApi>(engine, s.tokenizer, model_name(o, s.model.path),
                                             chat_template);
    if (o.tool_call_parser != "auto")
      api->set_tool_call_format(*serve::tool_call_format_named(o.tool_call_parser));
    disagg = std::make_unique<serve::Disaggregation>(*api, std::move(d));
    serve::HttpServerOptions h = http_options(o);
    h.host = "127.0.0.1";
    h.port = 0;
    if (o.http_workers == 0) h.num_workers = std::max(16, o.threads);  // see http_options
    h.disagg = disagg.get();
    server = std::make_unique<serve::HttpServer>(*api, h);
    url = fmt::format("http://127.0.0.1:{}", server->bind());
    engine.start();
    thread = std::thread([this] { server->listen(); });
  }
  ~RoleServer() {
    server->stop();
    thread.join();
    engine.stop();
  }
  ThreadPool pool;
  serve::Engine engine;
  std::unique_ptr<serve::OpenAiApi> api;
  std::unique_ptr<serve::Disaggregation> disagg;
  std::unique_ptr<serve::HttpServer> server;
  std::string url;
  std::thread thread;
};

// --disaggregate: a prefill and a decode server on loopback ports and the router on --port,
// in this one process; each server gets half the KV budget.
int run_disaggregated(const ServeOptions& o, sigset_t signals) {
  if (o.role != "colocated" || o.tp > 1 || o.spec.method != "none" || !o.spec.draft_model.empty())
    throw_error<RequestError>("--disaggregate: runs without --role, --tp and --spec");
  ModelSession s = load_session(o.model);
  serve::EngineOptions eo = engine_options(o, s);
  eo.num_blocks = std::max<int64_t>(1, eo.num_blocks / 2);
  serve::DisaggOptions d;
  d.kv_retries = o.kv_retries;
  d.kv_timeout_s = o.kv_timeout;
  d.role = serve::ServeRole::kPrefill;
  RoleServer prefill(s, o, eo, d);
  d.role = serve::ServeRole::kDecode;
  d.prefill_url = prefill.url;
  RoleServer decode(s, o, eo, d);
  print_memory(decode.engine, s, o);
  serve::ProxyRouterOptions r;
  r.host = o.host;
  r.port = o.port;
  r.prefill_urls = {prefill.url};
  r.decode_urls = {decode.url};
  r.read_timeout_s = o.read_timeout;
  r.shutdown_grace_s = o.shutdown_grace;
  serve::ProxyRouter router(r);
  const int port = router.bind();
  std::printf(
      "serving %s disaggregated on http://%s:%d (prefill %s, decode %s; each %lld KV "
      "blocks)\n",
      decode.api->model_id().c_str(), o.host.c_str(), port, prefill.url.c_str(), decode.url.c_str(),
      static_cast<long long>(eo.num_blocks));
  return serve_router_until_signal(router, signals);
}

int run_serve(const ServeOptions& o) {
  // Block SIGINT/SIGTERM in every thread; one thread waits for them and stops the server.
  if (o.role == "router") return run_router(o);
  if (o.disaggregate) {
    const sigset_t signals = block_stop_signals();
    raise_descriptor_limit();
    return run_disaggregated(o, signals);
  }
  sigset_t signals = block_stop_signals();
  raise_descriptor_limit();
  const serve::DisaggOptions disagg_opts = disagg_options(o);
  ModelSession s = load_session(o.model);
  const TpSession tp = enter_tensor_parallel(s, o.tp);
  ThreadPool pool(o.threads);
  repack_for_decode(s, pool);
  serve::EngineOptions eo = engine_options(o, s);
  std::optional<ModelSession> draft;  // --draft-model: outlives the engine
  eo.spec = spec_options(o.spec, draft);
  if (eo.spec.method != serve::SpecMethod::kNone && tp.size > 1)
    throw_error<RequestError>("--spec: not supported with --tp {} (one process only)", tp.size);
  if (tp.size > 1) {  // rank 0's block tables index every rank's cache: one block count
    int32_t blocks = static_cast<int32_t>(std::min<int64_t>(eo.num_blocks, INT32_MAX));
    tp.group.broadcast_i32(&blocks, 1);
    eo.num_blocks = blocks;
  }
  if (!tp.leader()) return follow_tensor_parallel(s, tp, pool, eo);
  serve::Engine engine(s.model.config, s.model.weights, pool, std::move(eo));
  if (tp.size > 1) engine.set_tensor_parallel(tp.group);
  engine.warmup();
  print_tp_rank_bytes(tp, s.model.weights.bytes(), engine.kv_cache().bytes());
  print_memory(engine, s, o);
  if (const std::string spec = describe(engine.options().spec, o.spec); !spec.empty())
    std::printf("%s\n", spec.c_str());
  if (o.dry_run) {
    if (tp.size > 1) model::tp_send_shutdown(tp.group);
    return 0;
  }
  std::string chat_template;
  if (!o.chat_template_file.empty()) chat_template = read_file(o.chat_template_file);
  serve::OpenAiApi api(engine, s.tokenizer, model_name(o, s.model.path), chat_template);
  if (o.tool_call_parser != "auto")
    api.set_tool_call_format(*serve::tool_call_format_named(o.tool_call_parser));
  serve::Disaggregation disagg(api, disagg_opts);
  serve::HttpServerOptions ho = http_options(o);
  if (disagg_opts.role != serve::ServeRole::kColocated) ho.disagg = &disagg;
  serve::HttpServer server(api, ho);
  const int port = server.bind();
  engine.start();
  std::printf("serving %s%s on http://%s:%d (OpenAI API under /v1, chat page at /)\n",
              api.model_id().c_str(), o.role == "colocated" ? "" : (" as " + o.role).c_str(),
              o.host.c_str(), port);
  std::fflush(stdout);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.stop();
  });
  server.listen();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes it if listen() ended on its own
  waiter.join();
  engine.stop();
  if (tp.size > 1) model::tp_send_shutdown(tp.group);
  std::printf("stopped\n");
  return 0;
}

void add_disagg_options(CLI::App& app, ServeOptions& o) {
  app.add_option("--role", o.role,
                 "prefill/decode disaggregation (docs/disaggregation.md): colocated (one "
                 "server), prefill, decode, or router (no model; proxies to --decode)")
      ->capture_default_str()
      ->check(CLI::IsMember({"colocated", "prefill", "decode", "router"}));
  app.add_option("--prefill", o.prefill_urls,
                 "router: prefill servers (http://host:port, repeatable); decode: the default "
                 "prefill server");
  app.add_option("--decode", o.decode_urls,
                 "router: decode servers (http://host:port, repeatable)");
  app.add_flag("--disaggregate", o.disaggregate,
               "run a prefill server, a decode server (loopback ports, half the KV budget each) "
               "and the router on --port, in this one process");
  app.add_option("--kv-retries", o.kv_retries, "decode: KV transfer attempts after the first")
      ->capture_default_str()
      ->check(CLI::Range(0, 10));
  app.add_option("--kv-timeout", o.kv_timeout, "decode: seconds per KV transfer attempt")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--inject-kv-fault", o.inject_kv_fault,
                 "prefill, for tests: damage the first COUNT KV messages "
                 "(corrupt|truncate|error[:COUNT])");
}

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  add_model_option(app, o->model);
  add_threads_option(app, o->threads);
  app.add_option("--host", o->host, "address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "port (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--max-batch-tokens", o->max_batch_tokens,
                 "token budget per engine step (chunked prefill splits longer prompts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--max-num-seqs", o->max_num_seqs, "running sequences at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  add_kv_dtype_option(app, o->kv_dtype);
  auto* mem = app.add_option("--kv-memory", o->kv_memory, "KV pool size (e.g. 512MiB, 2G)");
  app.add_option("--kv-fraction", o->kv_fraction, "KV pool as a fraction of available memory")
      ->check(CLI::Range(0.0, 0.95))
      ->excludes(mem);
  app.add_option("--block-size", o->block_size, "tokens per KV block")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--max-model-len", o->max_model_len, "context limit (default: the model's)");
  app.add_option("--max-queue", o->max_queue, "queued requests before answering 429")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--http-workers", o->http_workers,
                 "threads that parse and tokenize requests (0: the engine's --threads, >= 2; "
                 ">= 16 for --role prefill|decode)")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  app.add_option("--max-connections", o->max_connections, "open connections at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--read-timeout", o->read_timeout,
                 "seconds for a request's head and body to arrive (else 408)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--max-body", o->max_body, "largest request body (else 413)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", o->shutdown_grace,
                 "seconds requests in flight get to finish after SIGTERM")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY'");
  app.add_option("--served-model-name", o->served_name, "model id in the API (default: dir name)");
  app.add_option("--chat-template", o->chat_template_file, "Jinja chat template file");
  app.add_option("--tool-call-parser", o->tool_call_parser,
                 "how tool calls are read from replies: auto (from the chat template), "
                 "llama3_json, mistral, hermes or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "llama3_json", "mistral", "hermes", "none"}));
  app.add_flag("--no-prefix-cache", o->no_prefix_cache, "disable the radix-tree prefix cache");
  add_spec_options(app, o->spec);
  app.add_flag("--dry-run", o->dry_run, "print the KV pool and memory ledger, then exit");
  app.add_option("--tp", o->tp,
                 "tensor-parallel ranks: run under mpirun -np T; rank 0 serves HTTP, each rank "
                 "holds 1/T of the weights and KV cache")
      ->capture_default_str();
  add_disagg_options(app, *o);
  return [o] { return run_serve(*o); };
}

const RegisterCommand kRegister{
    {"serve", "OpenAI-compatible server: paged KV, continuous batching, prefix cache",
     "  lmstack serve --model models/smollm-135m --port 8080\n"
     "  lmstack serve --model DIR --kv-memory 512MiB --max-batch-tokens 256 --dry-run\n"
     "  lmstack serve --model DIR --api-key secret --port 0\n"
     "  lmstack serve --model DIR --spec ngram --num-spec-tokens 4\n"
     "  lmstack serve --model DIR --draft-model SMALL_DIR --num-spec-tokens 4\n"
     "  mpirun -np 2 lmstack serve --model DIR --tp 2 --port 8080\n"
     "  lmstack serve --model DIR --role prefill --port 8081 &\n"
     "  lmstack serve --model DIR --role decode --port 8082 --prefill http://127.0.0.1:8081 &\n"
     "  lmstack serve --role router --port 8080 --prefill http://127.0.0.1:8081 \\\n"
     "       --decode http://127.0.0.1:8082\n"
     "  lmstack serve --model DIR --disaggregate --port 8080   # the three in one process\n"
     "  curl http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' \\\n"
     "       -d '{\"model\": \"smollm-135m\", \"prompt\": \"Hello\", \"max_tokens\": 16}'",
     setup}};

}  // namespace
}  // namespace lmstack::cli
