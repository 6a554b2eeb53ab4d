// Engine: many requests on the one forward path. Each step: schedule (continuous batching,
// chunked prefill, prefix reuse, preemption) → copy-on-write block copies → one
// Decoder::forward over the flattened batch → sample each sequence with its own parameters
// and RNG → stream tokens, stop strings, EOS, max_tokens → free finished sequences. With
// greedy sampling a request's tokens equal model::Generator's for the same prompt. With
// speculative decoding (EngineOptions::spec, serve/speculative.h) a drafter proposes tokens
// for each decoding sequence before scheduling and the same forward verifies them
// (engine_spec.cc); the output distribution is unchanged (greedy: the same tokens). With
// prefill/decode disaggregation (engine_disagg.cc) one engine exports a prefilled sequence's
// KV and another imports it and decodes on (EngineRequest::kv_export, kv_import).
//
// Thread safety: submit(), snapshot(), metrics() and RequestStream::cancel() may be called
// from any thread. Everything else (scheduler, blocks, KV, requests_) belongs to the loop
// thread started by start(), or, without start(), to the one thread calling step().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/kv_cache.h"
#include "lmstack/model/tp_inference.h"
#include "lmstack/serve/block_manager.h"
#include "lmstack/serve/kv_transfer.h"
#include "lmstack/serve/metrics.h"
#include "lmstack/serve/prefix_cache.h"
#include "lmstack/serve/request_stream.h"
#include "lmstack/serve/scheduler.h"
#include "lmstack/serve/speculative.h"
#include "lmstack/serve/token_constraint.h"

namespace lmstack::serve {

// Makes a fresh incremental detokenizer (one per choice): token id → text completed by it.
using DetokenizerFactory = std::function<std::function<std::string(int32_t)>()>;

struct EngineOptions {
  SchedulerOptions scheduler;
  int block_size = 16;
  int64_t num_blocks = 0;        // KV pool size (required)
  DType kv_dtype = DType::kF32;  // KV cache element type (--kv-dtype; model/kv_cache.h)
  bool prefix_cache = true;
  int max_waiting = 1024;  // admission control: requests queued beyond this are refused
  int max_context = 0;     // prompt + max_tokens at most (0: the model's max_position)
  std::vector<int32_t> eos_ids;
  DetokenizerFactory make_detokenizer;  // null: token events carry no text
  // Speculative decoding. Requests with n > 1, logprobs or penalties are not speculated.
  SpecOptions spec;
};

struct EngineRequest {
  std::vector<int32_t> prompt;
  model::SamplingParams params;  // choice i samples with seed params.seed + i
  int n = 1;
  TokenConstraintFactory make_constraint;  // null: unconstrained; else one per choice
  // Prefill/decode disaggregation (docs/disaggregation.md), n == 1 and no speculation.
  // kv_export set (prefill role): run the prompt, sample the first token, fill *kv_export
  // with the sequence and finish with reason "prefilled" (no token event). kv_import set
  // (decode role): its prompt must equal `prompt`; at admission its KV is written into fresh
  // blocks and its first token emitted, then decoding continues in the batch. When the pool
  // cannot hold the prompt the request ends with a kError event and holds no block.
  std::shared_ptr<KvHandoff> kv_export;
  std::shared_ptr<const KvHandoff> kv_import;
};

class Engine {
 public:
  // Config, weights and pool must outlive the engine. Allocates the KV pool (and the draft
  // model's). ConfigError for bad speculation options (a draft model of another vocabulary).
  Engine(const model::ModelConfig& config, const model::ModelWeights& weights, ThreadPool& pool,
         EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws RequestError naming the field for an invalid one (empty prompt,
  // token id outside the vocabulary, prompt + max_tokens past the context or the KV pool,
  // bad sampling values, n outside [1, 16]). Returns nullopt when the queue is full.
  std::optional<std::shared_ptr<RequestStream>> submit(EngineRequest request);

  void start();  // runs step() on a loop thread until stop()
  void stop();   // finishes the current step, fails unfinished requests, joins
  // One iteration; false when there was nothing to do. Not while start()ed.
  bool step();
  // Steps until every submitted request has finished (tests, offline use).
  void run_until_idle();
  // One forward of a full token budget into free blocks, so the activation scratch is
  // allocated (and counted in the memory ledger) before serving. Before start() only.
  void warmup();

  // Tensor parallelism (model/tp_inference.h) on rank 0: config and weights are its slice,
  // and every forward and KV block copy is first sent to the other ranks, which run them in
  // model::tp_follow on caches of the same num_blocks. Before start() or warmup().
  void set_tensor_parallel(const model::TensorParallelGroup& group) {
    tp_ = group;
    decoder_.set_tensor_parallel(group);
  }

  Metrics& metrics() { return metrics_; }
  const model::ModelConfig& config() const { return config_; }
  const EngineOptions& options() const { return options_; }
  int max_context() const { return max_context_; }
  const model::KvCache& kv_cache() const { return kv_; }
  // What a KV transfer to or from this engine must match (serve/kv_transfer.h).
  KvLayout kv_layout() const;
  // Loop-thread state, for tests and start-up reports (not while start()ed).
  const BlockManager& block_manager() const { return blocks_; }
  const Drafter* drafter() const { return drafter_.get(); }  // null: no speculation
  void clear_prefix_cache();
  std::optional<PrefixCacheStats> prefix_cache_stats() const;
  // Why `tokens` would (not) hit the prefix cache right now (the /debug/prefix endpoint).
  // Thread-safe: asks the loop thread and waits for its answer.
  PrefixMatch explain_prefix(const std::vector<int32_t>& tokens);

 private:
  struct ActiveRequest;
  void validate(const EngineRequest& r) const;
  void admit_incoming();
  void cancel_requests();
  // Runs the batch and samples; returns the seconds spent in the forward and in sampling.
  StepTimes run_plan(const StepPlan& plan);
  void copy_blocks(const StepPlan& plan);
  // Samples the rows that need no fork, in parallel over the pool (each sequence has its own
  // sampler and RNG, so the rows are independent and the tokens are those of a serial loop).
  // first_row[i]: rows[i]'s first logits row. Rows with a draft are left to on_draft_logits.
  std::vector<std::optional<model::SampleResult>> sample_rows(const std::vector<Sequence*>& rows,
                                                              const std::vector<size_t>& first_row);
  bool forks_here(const Sequence& seq) const;
  void on_logits(Sequence& seq, std::span<float> logits,
                 std::optional<model::SampleResult> sampled);
  // engine_spec.cc: drafts for the running decodes, and a draft's verification.
  bool is_speculable(const Sequence& seq) const;
  void propose_drafts();
  void on_draft_logits(Sequence& seq, std::span<const float> logits, int num_draft);
  void fork_choices(ActiveRequest& req, Sequence& parent);
  // A new sequence of `req` (choice 0 unless set after): its own detokenizer and constraint.
  std::unique_ptr<Sequence> new_sequence(const ActiveRequest& req, std::vector<int32_t> tokens,
                                         const model::SamplingParams& params);
  // engine_disagg.cc: prefill/decode disaggregation.
  void validate_disagg(const EngineRequest& r) const;
  void export_kv(ActiveRequest& req, Sequence& seq, const model::SampleResult& first);
  void admit_imported(std::unique_ptr<ActiveRequest> req);
  void emit_token(ActiveRequest& req, Sequence& seq, const model::SampleResult& sample);
  void finish_seq(ActiveRequest& req, Sequence& seq, const std::string& reason,
                  const model::SampleResult* eos = nullptr);
  void retire(Sequence& seq, bool cache_blocks);
  void finish_request(ActiveRequest& req, bool ok, const std::string& error);
  void reap_finished();
  void publish_gauges();
  void loop();

  const model::ModelConfig& config_;
  EngineOptions options_;
  int max_context_;
  ThreadPool& pool_;
  model::Decoder decoder_;
  model::KvCache kv_;
  model::TensorParallelGroup tp_;
  BlockManager blocks_;
  std::unique_ptr<PrefixCache> cache_;
  Scheduler scheduler_;
  std::unique_ptr<Drafter> drafter_;
  Metrics metrics_;
  std::map<int64_t, std::unique_ptr<ActiveRequest>> requests_;  // loop thread only
  std::vector<float> logits_;                                   // loop thread only
  int64_t next_seq_id_ = 0;                                     // loop thread only
  KvOccupancy peak_kv_;  // loop thread only: at the step with the most running blocks
  double start_time_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<ActiveRequest>> incoming_;  // GUARDED_BY(mu_)
  std::vector<std::function<void()>> tasks_;              // GUARDED_BY(mu_): run on the loop
  int64_t next_request_id_ = 0;                           // GUARDED_BY(mu_)
  int num_waiting_ = 0;    // GUARDED_BY(mu_): queued requests not yet running
  bool stopping_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace lmstack::serve
