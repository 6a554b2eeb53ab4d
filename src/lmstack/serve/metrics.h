// Serving metrics in the Prometheus text exposition format (version 0.0.4), named like
// vLLM's (`vllm:time_to_first_token_seconds` → `lmstack:time_to_first_token_seconds`):
// latency histograms (TTFT, time per output token, end-to-end), request and token counters,
// and gauges the engine sets once per step (running / waiting requests, KV usage, prefix
// cache hit rate, preemptions, tokens/s over the last seconds), and speculative decoding's
// counters (vLLM's spec_decode_num_drafts / _num_draft_tokens / _num_accepted_tokens).
//
// Thread safety: all methods may be called from any thread; state is guarded by mu_.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace lmstack::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // "# HELP/# TYPE" lines, then name_bucket{le="..."} (cumulative), name_sum, name_count.
  std::string render(const std::string& name, const std::string& help) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the engine knows at the end of a step.
struct EngineGauges {
  int num_running = 0;
  int num_waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;  // held by sequences or the prefix cache
  // Running sequences' KV now (Scheduler::running_kv_occupancy): distinct blocks, the token
  // slots they hold and the tokens stored in them; and the same at peak load, the step with
  // the most blocks held by running sequences so far.
  int64_t kv_running_blocks = 0;
  int64_t kv_tokens_stored = 0;
  int64_t kv_tokens_allocated = 0;
  int64_t kv_peak_running_blocks = 0;
  int64_t kv_peak_tokens_stored = 0;
  int64_t kv_peak_tokens_allocated = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t num_preemptions = 0;
};

// Speculative decoding since start: drafts verified (one per sequence per step), draft tokens
// in them, and how many the target accepted (the bonus or replacement token not counted).
struct SpecDecodeStats {
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  double acceptance_rate() const {
    return num_draft_tokens > 0 ? static_cast<double>(num_accepted_tokens) / num_draft_tokens : 0;
  }
  // Tokens emitted per verified draft: 1 + accepted / drafts (vLLM's mean acceptance length).
  double mean_acceptance_length() const {
    return num_drafts > 0 ? 1.0 + static_cast<double>(num_accepted_tokens) / num_drafts : 0;
  }
};

// Prefill/decode disaggregation since start (docs/disaggregation.md): KV messages sent (the
// prefill role) or received and imported (the decode role), their bytes and wall time, and
// the transfers that failed for good or were tried again.
struct KvTransferStats {
  int64_t num_transfers = 0;  // that succeeded
  int64_t bytes = 0;          // of those, whole messages (header and checksums included)
  double seconds = 0;         // decode role: the request to the prefill server until the
                              // message was read and checked; prefill role: prefill + encode
  int64_t num_failed = 0;     // requests answered with an error after the last attempt
  int64_t num_retried = 0;    // attempts repeated after a failed one
};

// Where one engine step's wall time went (Engine::step): admission, cancellation, scheduling
// and end-of-step bookkeeping; the batched forward with its KV block copies; and sampling,
// stop checks and streaming of every sequence's token. A request's time per output token
// minus these is what the HTTP side and the client cost.
struct StepTimes {
  double schedule_s = 0;
  double forward_s = 0;
  double sample_s = 0;
  double draft_s = 0;  // speculative decoding: the drafter's proposals (a draft model's forwards)
};

class Metrics {
 public:
  Metrics();
  void observe_request(double ttft_s, double e2e_s, int completion_tokens, bool finished_ok);
  void observe_rejected();  // a full queue answered 429
  void add_tokens(int64_t prompt_tokens, int64_t generation_tokens, double now_s);
  void add_step(const StepTimes& t);  // a step that ran a forward batch
  void set_gauges(const EngineGauges& g);
  void add_spec_decode(int64_t draft_tokens, int64_t accepted_tokens);
  SpecDecodeStats spec_decode() const;
  void add_kv_transfer(const KvTransferStats& delta);
  KvTransferStats kv_transfer() const;
  EngineGauges gauges() const;
  std::string render_prometheus() const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_;                      // GUARDED_BY(mu_)
  Histogram tpot_;                      // GUARDED_BY(mu_)
  Histogram e2e_;                       // GUARDED_BY(mu_)
  EngineGauges gauges_;                 // GUARDED_BY(mu_)
  SpecDecodeStats spec_;                // GUARDED_BY(mu_)
  KvTransferStats kv_transfer_;         // GUARDED_BY(mu_)
  int64_t num_requests_ok_ = 0;         // GUARDED_BY(mu_)
  int64_t num_requests_cancelled_ = 0;  // GUARDED_BY(mu_)
  int64_t num_rejected_ = 0;            // GUARDED_BY(mu_)
  int64_t prompt_tokens_ = 0;           // GUARDED_BY(mu_)
  int64_t generation_tokens_ = 0;       // GUARDED_BY(mu_)
  int64_t num_steps_ = 0;               // GUARDED_BY(mu_)
  StepTimes step_totals_;               // GUARDED_BY(mu_)
  // (time, generated tokens) per step over the last window, for the tokens/s gauge.
  std::vector<std::pair<double, int64_t>> recent_;  // GUARDED_BY(mu_)
};

}  // namespace lmstack::serve
