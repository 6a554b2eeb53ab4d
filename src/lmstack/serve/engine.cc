// The serving loop (see engine.h): admission, cancellation, one batched forward per step,
// per-sequence sampling and streaming, and the end of requests.
#include "lmstack/serve/engine.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <numeric>

#include "lmstack/core/error.h"
#include "lmstack/core/log.h"
#include "lmstack/core/timer.h"
#include "lmstack/serve/engine_internal.h"

namespace lmstack::serve {
namespace {

constexpr int kMaxChoices = 16;

// Samples under the sequence's constraint (structured output), if it has one.
model::SampleResult sample(Sequence& seq, std::span<float> logits) {
  if (seq.constraint) seq.constraint->mask(logits);
  const model::SampleResult s = seq.sampler.sample(logits, seq.tokens);
  if (seq.constraint) seq.constraint->accept(s.token);
  return s;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The scheduler may drop KV outside the window only when no layer reads it: every layer
// windowed (one full-attention layer, as in Qwen2 with max_window_layers > 0, keeps it all).
SchedulerOptions scheduler_options(SchedulerOptions o, const model::ModelConfig& config) {
  o.kv_window = 0;
  if (config.every_layer_windowed())
    for (int l = 0; l < config.num_layers; ++l)
      o.kv_window = std::max(o.kv_window, config.attention_window(l));
  return o;
}

}  // namespace

Engine::Engine(const model::ModelConfig& config, const model::ModelWeights& weights,
               ThreadPool& pool, EngineOptions options)
    : config_(config),
      options_(std::move(options)),
      max_context_(options_.max_context > 0 ? options_.max_context : config.max_position),
      pool_(pool),
      decoder_(config, weights, pool),
      kv_(config, options_.num_blocks, options_.block_size, options_.kv_dtype),
      blocks_(options_.num_blocks, options_.block_size),
      cache_(options_.prefix_cache ? std::make_unique<PrefixCache>(blocks_) : nullptr),
      scheduler_(scheduler_options(options_.scheduler, config), blocks_, cache_.get()),
      drafter_(make_drafter(options_.spec, pool, decoder_.vocab_size(), options_.num_blocks,
                            options_.block_size)),
      start_time_(now_seconds()) {
  LMSTACK_CHECK(max_context_ > 0, "the engine needs a context length");
}

Engine::~Engine() { stop(); }

void Engine::validate(const EngineRequest& r) const {
  r.params.validate();
  if (r.prompt.empty()) throw_error<RequestError>("prompt: is empty (no tokens)");
  if (r.n < 1 || r.n > kMaxChoices)
    throw_error<RequestError>("n: {} is outside [1, {}]", r.n, kMaxChoices);
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= decoder_.vocab_size())
      throw_error<RequestError>("prompt: token {} at position {} is outside the vocabulary of {}",
                                r.prompt[i], i, decoder_.vocab_size());
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens;
  if (total > max_context_)
    throw_error<RequestError>(
        "max_tokens: the prompt ({} tokens) + max_tokens ({}) = {} exceeds the context of {}",
        r.prompt.size(), r.params.max_tokens, total, max_context_);
  validate_disagg(r);
  if (blocks_.blocks_for_tokens(total) > blocks_.num_blocks())
    throw_error<RequestError>(
        "max_tokens: the prompt + max_tokens = {} tokens need {} KV blocks; the pool has {}", total,
        blocks_.blocks_for_tokens(total), blocks_.num_blocks());
}

std::optional<std::shared_ptr<RequestStream>> Engine::submit(EngineRequest request) {
  validate(request);
  auto req = std::make_unique<ActiveRequest>();
  req->request = std::move(request);
  req->arrival = now_seconds();
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard lock(mu_);
    if (num_waiting_ + static_cast<int>(incoming_.size()) >= options_.max_waiting) {
      metrics_.observe_rejected();
      return std::nullopt;
    }
    req->id = next_request_id_++;
    req->stream = stream = std::make_shared<RequestStream>(req->id);
    incoming_.push_back(std::move(req));
  }
  cv_.notify_one();
  return stream;
}

void Engine::admit_incoming() {
  std::vector<std::unique_ptr<ActiveRequest>> batch;
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(mu_);
    batch.swap(incoming_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
  for (auto& req : batch) {
    if (req->request.kv_import) {
      admit_imported(std::move(req));
      continue;
    }
    auto seq = new_sequence(*req, req->request.prompt, req->request.params);
    scheduler_.add(seq.get());
    req->seqs.push_back(std::move(seq));
    requests_.emplace(req->id, std::move(req));
  }
}

void Engine::cancel_requests() {
  for (auto& [id, req] : requests_) {
    if (req->done || !req->stream->is_cancelled()) continue;
    for (auto& seq : req->seqs)
      if (seq->status != SeqStatus::kFinished) finish_seq(*req, *seq, "cancelled");
  }
}

void Engine::copy_blocks(const StepPlan& plan) {
  if (tp_.enabled() && !plan.copies.empty()) model::tp_send_block_copies(tp_, plan.copies);
  for (auto [src, dst] : plan.copies) kv_.copy_block(src, dst);
}

StepTimes Engine::run_plan(const StepPlan& plan) {
  const Timer forward_timer;
  copy_blocks(plan);
  model::ForwardBatch batch;
  int64_t prompt_tokens = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    const Sequence& seq = *s.seq;
    const auto first = seq.tokens.begin() + seq.num_computed;
    std::vector<int32_t> feed(first, first + (s.num_new_tokens - s.num_draft_tokens));
    feed.insert(feed.end(), seq.draft.begin(), seq.draft.begin() + s.num_draft_tokens);
    batch.add_sequence(feed, seq.num_computed, seq.blocks, options_.block_size, s.wants_logits,
                       /*all_logits=*/s.num_draft_tokens > 0);
    prompt_tokens += std::max(
        0, std::min(seq.num_prompt_tokens, seq.num_computed + s.num_new_tokens) - seq.num_computed);
  }
  if (tp_.enabled()) model::tp_send_batch(tp_, batch);
  decoder_.forward(batch, kv_, logits_);
  StepTimes times;
  times.forward_s = forward_timer.seconds();
  const Timer sample_timer;
  scheduler_.commit(plan);
  const size_t vocab = static_cast<size_t>(decoder_.vocab_size());
  std::vector<Sequence*> rows;    // the sequences that sample this step
  std::vector<size_t> first_row;  // each one's first logits row: a verified draft has 1 + k
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.wants_logits) continue;
    first_row.push_back(rows.empty() ? 0 : first_row.back() + 1 + rows.back()->draft.size());
    rows.push_back(s.seq);
  }
  std::vector<std::optional<model::SampleResult>> sampled = sample_rows(rows, first_row);
  int64_t generated = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& seq = *rows[i];
    const int before = seq.num_generated();
    float* logits = logits_.data() + first_row[i] * vocab;
    if (!seq.draft.empty())
      on_draft_logits(seq, std::span<const float>(logits, (seq.draft.size() + 1) * vocab),
                      static_cast<int>(seq.draft.size()));
    else
      on_logits(seq, std::span<float>(logits, vocab), std::move(sampled[i]));
    generated += std::max(0, seq.num_generated() - before);
  }
  metrics_.add_tokens(prompt_tokens, generated, now_seconds() - start_time_);
  times.sample_s = sample_timer.seconds();
  return times;
}

std::unique_ptr<Sequence> Engine::new_sequence(const ActiveRequest& req,
                                               std::vector<int32_t> tokens,
                                               const model::SamplingParams& params) {
  auto seq = std::make_unique<Sequence>(next_seq_id_++, std::move(tokens), params);
  seq->request_id = req.id;
  if (options_.make_detokenizer) seq->detokenize = options_.make_detokenizer();
  if (req.request.make_constraint) seq->constraint = req.request.make_constraint();
  return seq;
}

// The request's first sampled position: fork the other n - 1 choices, sharing every block
// of the prompt (the last, partly filled one is copied on write later).
void Engine::fork_choices(ActiveRequest& req, Sequence& parent) {
  for (int c = 1; c < req.request.n; ++c) {
    model::SamplingParams p = req.request.params;
    p.seed += static_cast<uint64_t>(c);
    auto child = new_sequence(req, parent.tokens, p);
    child->choice = c;
    child->num_computed = parent.num_computed;
    child->num_cached_prompt = parent.num_cached_prompt;
    child->prompt_in_cache = true;
    child->blocks = parent.blocks;
    for (int32_t b : child->blocks)
      if (b != kReleasedBlock) blocks_.add_ref(b);
    scheduler_.add_running(child.get(), &parent);
    req.seqs.push_back(std::move(child));
  }
}

bool Engine::forks_here(const Sequence& seq) const {
  const ActiveRequest& req = *requests_.at(seq.request_id);
  return seq.choice == 0 && seq.num_generated() == 0 && req.seqs.size() == 1 && req.request.n > 1;
}

std::vector<std::optional<model::SampleResult>> Engine::sample_rows(
    const std::vector<Sequence*>& rows, const std::vector<size_t>& first_row) {
  std::vector<std::optional<model::SampleResult>> out(rows.size());
  const size_t vocab = static_cast<size_t>(decoder_.vocab_size());
  pool_.parallel_for(static_cast<int64_t>(rows.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Sequence& seq = *rows[static_cast<size_t>(i)];
      // on_logits samples a forking row after the fork; on_draft_logits verifies a draft.
      if (forks_here(seq) || !seq.draft.empty()) continue;
      out[static_cast<size_t>(i)] = sample(
          seq, std::span<float>(logits_.data() + first_row[static_cast<size_t>(i)] * vocab, vocab));
    }
  });
  return out;
}

void Engine::on_logits(Sequence& seq, std::span<float> logits,
                       std::optional<model::SampleResult> sampled) {
  ActiveRequest& req = *requests_.at(seq.request_id);
  if (sampled) {
    emit_token(req, seq, *sampled);
    return;
  }
  if (forks_here(seq)) {
    const std::vector<float> original(logits.begin(), logits.end());
    fork_choices(req, seq);
    for (size_t c = 1; c < req.seqs.size(); ++c) {
      std::vector<float> copy = original;
      Sequence& child = *req.seqs[c];
      emit_token(req, child, sample(child, copy));
    }
  }
  emit_token(req, seq, sample(seq, logits));
}

void Engine::emit_token(ActiveRequest& req, Sequence& seq, const model::SampleResult& sample) {
  const model::SamplingParams& p = req.request.params;
  if (!req.first_token) req.first_token = now_seconds();
  if (req.request.kv_export) {
    export_kv(req, seq, sample);
    return;
  }
  if (!p.ignore_eos && std::find(options_.eos_ids.begin(), options_.eos_ids.end(), sample.token) !=
                           options_.eos_ids.end()) {
    finish_seq(req, seq, "stop", &sample);
    return;
  }
  seq.tokens.push_back(sample.token);
  ++req.completion_tokens;
  StreamEvent e;
  e.kind = StreamEvent::Kind::kToken;
  e.choice = seq.choice;
  e.token.token = sample.token;
  e.token.sample = sample;
  e.token.text = seq.stops.push(seq.detokenize ? seq.detokenize(sample.token) : "");
  req.stream->push(std::move(e));
  if (seq.stops.stopped())
    finish_seq(req, seq, "stop");
  else if (seq.num_generated() >= p.max_tokens || seq.num_tokens() >= max_context_)
    finish_seq(req, seq, "length");
}

void Engine::finish_seq(ActiveRequest& req, Sequence& seq, const std::string& reason,
                        const model::SampleResult* eos) {
  // Text the stop matcher held back could still have begun a stop string: it is output now.
  std::string tail = seq.stops.flush();
  if (!tail.empty()) {
    StreamEvent e;
    e.choice = seq.choice;
    e.token.token = -1;
    e.token.text = std::move(tail);
    req.stream->push(std::move(e));
  }
  StreamEvent fin;
  fin.kind = StreamEvent::Kind::kFinish;
  fin.choice = seq.choice;
  fin.finish_reason = reason;
  fin.token.token = eos ? eos->token : -1;  // RL scores the EOS choice too (rl/rollout.h)
  if (eos) fin.token.sample = *eos;
  req.stream->push(std::move(fin));
  retire(seq, reason != "cancelled");
  if (++req.num_finished == req.request.n ||
      (reason == "cancelled" && req.num_finished == static_cast<int>(req.seqs.size())))
    finish_request(req, reason != "cancelled", "");
}

// A sequence leaves the scheduler (its blocks freed, or given to the prefix cache when it
// finished well) and the drafter (a draft model's KV for it).
void Engine::retire(Sequence& seq, bool cache_blocks) {
  scheduler_.finish(&seq, cache_blocks);
  if (drafter_) drafter_->release(seq.id);
}

void Engine::finish_request(ActiveRequest& req, bool ok, const std::string& error) {
  const double now = now_seconds();
  RequestUsage u;
  u.prompt_tokens = static_cast<int>(req.request.prompt.size());
  u.completion_tokens = req.completion_tokens;
  u.cached_tokens = req.seqs.empty() ? 0 : req.seqs[0]->num_cached_prompt;
  for (const auto& s : req.seqs) u.num_preemptions += s->num_preemptions;
  u.ttft_seconds = req.first_token.value_or(now) - req.arrival;
  u.e2e_seconds = now - req.arrival;
  StreamEvent e;
  e.kind = error.empty() ? StreamEvent::Kind::kDone : StreamEvent::Kind::kError;
  e.usage = u;
  e.error = error;
  req.stream->push(std::move(e));
  const int per_choice = req.completion_tokens / std::max(1, req.request.n);
  metrics_.observe_request(u.ttft_seconds, u.e2e_seconds, per_choice, ok);
  req.done = true;
}

void Engine::reap_finished() {
  std::erase_if(requests_, [](const auto& kv) { return kv.second->done; });
}

void Engine::publish_gauges() {
  EngineGauges g;
  for (const auto& [id, req] : requests_) {
    const bool running = std::any_of(req->seqs.begin(), req->seqs.end(), [](const auto& s) {
      return s->status == SeqStatus::kRunning;
    });
    (running ? g.num_running : g.num_waiting) += 1;
  }
  g.kv_blocks_total = blocks_.num_blocks();
  g.kv_blocks_used = blocks_.num_blocks() - blocks_.num_free();
  const KvOccupancy kv = scheduler_.running_kv_occupancy();
  if (kv.blocks > peak_kv_.blocks) peak_kv_ = kv;
  g.kv_running_blocks = kv.blocks;
  g.kv_tokens_stored = kv.tokens_stored;
  g.kv_tokens_allocated = kv.token_slots;
  g.kv_peak_running_blocks = peak_kv_.blocks;
  g.kv_peak_tokens_stored = peak_kv_.tokens_stored;
  g.kv_peak_tokens_allocated = peak_kv_.token_slots;
  if (cache_) {
    const PrefixCacheStats st = cache_->stats();
    g.prefix_query_tokens = st.num_query_tokens;
    g.prefix_hit_tokens = st.num_hit_tokens;
  }
  g.num_preemptions = scheduler_.num_preemptions();
  {
    std::lock_guard lock(mu_);
    num_waiting_ = g.num_waiting;
  }
  metrics_.set_gauges(g);
}

bool Engine::step() {
  const Timer step_timer;
  admit_incoming();
  cancel_requests();
  const Timer draft_timer;
  if (drafter_) propose_drafts();
  const double draft_s = draft_timer.seconds();
  const StepPlan plan = scheduler_.schedule();
  StepTimes times;
  if (!plan.empty()) {
    try {
      times = run_plan(plan);
    } catch (const std::exception& e) {
      // One bad batch fails the requests in it, not the server.
      log_error("engine step failed: {}", e.what());
      for (const ScheduledSeq& s : plan.seqs) {
        auto it = requests_.find(s.seq->request_id);
        if (it == requests_.end() || it->second->done) continue;
        for (auto& seq : it->second->seqs) retire(*seq, false);
        finish_request(*it->second, false, e.what());
      }
    }
  }
  reap_finished();
  publish_gauges();
  if (!plan.empty()) {
    times.draft_s = draft_s;
    times.schedule_s =
        std::max(0.0, step_timer.seconds() - times.forward_s - times.sample_s - draft_s);
    metrics_.add_step(times);
  }
  return !plan.empty();
}

void Engine::run_until_idle() {
  LMSTACK_CHECK(!thread_.joinable(), "run_until_idle() while the loop thread runs");
  while (true) {
    const bool worked = step();
    bool incoming = false;
    {
      std::lock_guard lock(mu_);
      incoming = !incoming_.empty();
    }
    if (requests_.empty() && !incoming) return;
    LMSTACK_CHECK(worked || incoming, "{} requests are stuck: nothing could be scheduled",
                  requests_.size());
  }
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stopping_ || !incoming_.empty() || !tasks_.empty() || !requests_.empty();
      });
      if (stopping_) break;
    }
    step();
  }
  admit_incoming();  // runs pending tasks, so no explain_prefix() caller waits forever
  for (auto& [id, req] : requests_) {
    if (req->done) continue;
    for (auto& seq : req->seqs) retire(*seq, false);
    finish_request(*req, false, "the server is shutting down");
  }
  requests_.clear();
}

void Engine::warmup() {
  LMSTACK_CHECK(!thread_.joinable() && requests_.empty(), "warmup() on a busy engine");
  const int64_t tokens =
      std::min<int64_t>({options_.scheduler.max_batch_tokens,
                         blocks_.num_blocks() * options_.block_size, max_context_});
  std::vector<int32_t> table(static_cast<size_t>(blocks_.blocks_for_tokens(tokens)));
  std::iota(table.begin(), table.end(), 0);  // nobody holds a block yet
  model::ForwardBatch batch;
  batch.add_sequence(std::vector<int32_t>(static_cast<size_t>(tokens), 0), 0, table,
                     options_.block_size, true);
  if (tp_.enabled()) model::tp_send_batch(tp_, batch);
  decoder_.forward(batch, kv_, logits_);
}

void Engine::start() {
  LMSTACK_CHECK(!thread_.joinable(), "engine started twice");
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::clear_prefix_cache() {
  if (cache_) cache_->clear();
}

std::optional<PrefixCacheStats> Engine::prefix_cache_stats() const {
  if (!cache_) return std::nullopt;
  return cache_->stats();
}

PrefixMatch Engine::explain_prefix(const std::vector<int32_t>& tokens) {
  auto answer = [this, tokens] {
    if (!cache_) return PrefixMatch{{}, 0, "the prefix cache is off (--no-prefix-cache)"};
    return cache_->match(tokens, static_cast<int>(tokens.size()) - 1);
  };
  if (!thread_.joinable()) return answer();
  auto task = std::make_shared<std::packaged_task<PrefixMatch()>>(answer);
  std::future<PrefixMatch> result = task->get_future();
  {
    std::lock_guard lock(mu_);
    tasks_.push_back([task] { (*task)(); });
  }
  cv_.notify_one();
  return result.get();
}

}  // namespace lmstack::serve
