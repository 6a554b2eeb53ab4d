// Prometheus text rendering of the serving metrics (see metrics.h).
#include "lmstack/serve/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace lmstack::serve {
namespace {

constexpr double kRateWindowSeconds = 10.0;

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,
          0.5,   0.75,   1.0,   2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0, 160.0};
}

std::string number(double v) { return fmt::format("{}", v); }

double ratio(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

void gauge(std::string& out, const std::string& name, const std::string& help, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, number(value));
}

void counter(std::string& out, const std::string& name, const std::string& help, double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, number(value));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                                       bounds_.begin());
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bounds_[i]), cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
  return out;
}

Metrics::Metrics() : ttft_(latency_buckets()), tpot_(latency_buckets()), e2e_(latency_buckets()) {}

void Metrics::observe_request(double ttft_s, double e2e_s, int completion_tokens,
                              bool finished_ok) {
  std::lock_guard lock(mu_);
  if (!finished_ok) {
    ++num_requests_cancelled_;
    return;
  }
  ++num_requests_ok_;
  if (completion_tokens > 0) ttft_.observe(ttft_s);
  if (completion_tokens > 1) tpot_.observe((e2e_s - ttft_s) / (completion_tokens - 1));
  e2e_.observe(e2e_s);
}

void Metrics::observe_rejected() {
  std::lock_guard lock(mu_);
  ++num_rejected_;
}

void Metrics::add_tokens(int64_t prompt_tokens, int64_t generation_tokens, double now_s) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
  recent_.emplace_back(now_s, generation_tokens);
  const auto old = std::find_if(recent_.begin(), recent_.end(), [&](const auto& p) {
    return p.first >= now_s - kRateWindowSeconds;
  });
  recent_.erase(recent_.begin(), old);
}

void Metrics::add_step(const StepTimes& t) {
  std::lock_guard lock(mu_);
  ++num_steps_;
  step_totals_.schedule_s += t.schedule_s;
  step_totals_.forward_s += t.forward_s;
  step_totals_.sample_s += t.sample_s;
  step_totals_.draft_s += t.draft_s;
}

void Metrics::set_gauges(const EngineGauges& g) {
  std::lock_guard lock(mu_);
  gauges_ = g;
}

void Metrics::add_spec_decode(int64_t draft_tokens, int64_t accepted_tokens) {
  std::lock_guard lock(mu_);
  ++spec_.num_drafts;
  spec_.num_draft_tokens += draft_tokens;
  spec_.num_accepted_tokens += accepted_tokens;
}

SpecDecodeStats Metrics::spec_decode() const {
  std::lock_guard lock(mu_);
  return spec_;
}

EngineGauges Metrics::gauges() const {
  std::lock_guard lock(mu_);
  return gauges_;
}

void Metrics::add_kv_transfer(const KvTransferStats& d) {
  std::lock_guard lock(mu_);
  kv_transfer_.num_transfers += d.num_transfers;
  kv_transfer_.bytes += d.bytes;
  kv_transfer_.seconds += d.seconds;
  kv_transfer_.num_failed += d.num_failed;
  kv_transfer_.num_retried += d.num_retried;
}

KvTransferStats Metrics::kv_transfer() const {
  std::lock_guard lock(mu_);
  return kv_transfer_;
}

namespace {

void render_kv_transfer(std::string& out, const KvTransferStats& k) {
  counter(out, "lmstack:kv_transfers_total", "KV messages sent or received (disaggregation).",
          static_cast<double>(k.num_transfers));
  counter(out, "lmstack:kv_transfer_bytes_total", "Bytes of those KV messages.",
          static_cast<double>(k.bytes));
  counter(out, "lmstack:kv_transfer_seconds_total", "Wall time of those KV transfers.", k.seconds);
  counter(out, "lmstack:kv_transfers_failed_total", "Requests failed by a KV transfer.",
          static_cast<double>(k.num_failed));
  counter(out, "lmstack:kv_transfers_retried_total", "KV transfer attempts repeated.",
          static_cast<double>(k.num_retried));
}

}  // namespace

std::string Metrics::render_prometheus() const {
  std::lock_guard lock(mu_);
  std::string out;
  const EngineGauges& g = gauges_;
  gauge(out, "lmstack:num_requests_running", "Requests with sequences in the running batch.",
        g.num_running);
  gauge(out, "lmstack:num_requests_waiting", "Requests queued for admission.", g.num_waiting);
  gauge(out, "lmstack:kv_cache_usage_perc", "Fraction of KV blocks held (0-1).",
        ratio(g.kv_blocks_used, g.kv_blocks_total));
  gauge(out, "lmstack:kv_cache_blocks_used", "KV blocks held by sequences or the prefix cache.",
        static_cast<double>(g.kv_blocks_used));
  gauge(out, "lmstack:kv_cache_utilization",
        "Tokens stored / token slots of the KV blocks running sequences hold (0-1).",
        ratio(g.kv_tokens_stored, g.kv_tokens_allocated));
  gauge(out, "lmstack:kv_cache_running_blocks", "KV blocks held by running sequences.",
        static_cast<double>(g.kv_running_blocks));
  gauge(out, "lmstack:kv_cache_peak_running_blocks",
        "Most KV blocks running sequences have held at once (peak load).",
        static_cast<double>(g.kv_peak_running_blocks));
  gauge(out, "lmstack:kv_cache_peak_utilization",
        "kv_cache_utilization at peak load (the step with the most running blocks).",
        ratio(g.kv_peak_tokens_stored, g.kv_peak_tokens_allocated));
  gauge(out, "lmstack:prefix_cache_hit_rate", "Prompt tokens found in the prefix cache (0-1).",
        g.prefix_query_tokens ? static_cast<double>(g.prefix_hit_tokens) / g.prefix_query_tokens
                              : 0.0);
  counter(out, "lmstack:prefix_cache_queries_total", "Prompt tokens looked up.",
          static_cast<double>(g.prefix_query_tokens));
  counter(out, "lmstack:prefix_cache_hits_total", "Prompt tokens found.",
          static_cast<double>(g.prefix_hit_tokens));
  render_kv_transfer(out, kv_transfer_);
  counter(out, "lmstack:num_preemptions_total", "Sequences preempted (recomputed later).",
          static_cast<double>(g.num_preemptions));
  counter(out, "lmstack:prompt_tokens_total", "Prompt tokens computed.",
          static_cast<double>(prompt_tokens_));
  counter(out, "lmstack:generation_tokens_total", "Tokens generated.",
          static_cast<double>(generation_tokens_));
  counter(out, "lmstack:engine_steps_total", "Engine steps that ran a forward batch.",
          static_cast<double>(num_steps_));
  counter(out, "lmstack:engine_schedule_seconds_total",
          "Step time in admission, cancellation, scheduling and bookkeeping.",
          step_totals_.schedule_s);
  counter(out, "lmstack:engine_forward_seconds_total",
          "Step time in the batched forward and KV block copies.", step_totals_.forward_s);
  counter(out, "lmstack:engine_sample_seconds_total",
          "Step time in sampling, stop checks and streaming tokens.", step_totals_.sample_s);
  counter(out, "lmstack:engine_draft_seconds_total",
          "Step time in speculative drafting (a draft model's forwards).", step_totals_.draft_s);
  double window_tokens = 0;
  for (const auto& p : recent_) window_tokens += static_cast<double>(p.second);
  gauge(out, "lmstack:generation_tokens_per_second",
        "Generated tokens per second over the last 10 s.", window_tokens / kRateWindowSeconds);
  counter(out, "lmstack:request_success_total", "Requests finished.",
          static_cast<double>(num_requests_ok_));
  counter(out, "lmstack:request_cancelled_total", "Requests cancelled by their client.",
          static_cast<double>(num_requests_cancelled_));
  counter(out, "lmstack:request_rejected_total", "Requests refused because the queue was full.",
          static_cast<double>(num_rejected_));
  counter(out, "lmstack:spec_decode_num_drafts_total",
          "Speculative drafts verified (one per sequence per step).",
          static_cast<double>(spec_.num_drafts));
  counter(out, "lmstack:spec_decode_num_draft_tokens_total", "Draft tokens verified.",
          static_cast<double>(spec_.num_draft_tokens));
  counter(out, "lmstack:spec_decode_num_accepted_tokens_total", "Draft tokens the target accepted.",
          static_cast<double>(spec_.num_accepted_tokens));
  gauge(out, "lmstack:spec_decode_acceptance_rate", "Accepted / draft tokens since start (0-1).",
        spec_.acceptance_rate());
  out += ttft_.render("lmstack:time_to_first_token_seconds", "Arrival to first token.");
  out += tpot_.render("lmstack:time_per_output_token_seconds",
                      "Mean time between output tokens of a request.");
  out += e2e_.render("lmstack:e2e_request_latency_seconds", "Arrival to last token.");
  return out;
}

}  // namespace lmstack::serve
