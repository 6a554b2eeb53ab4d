// RemoteRollouts and serve_rollouts (remote.h): the wire protocol between the trainer (rank 0)
// and the rollout ranks.
#include "lmstack/rl/remote.h"

#include <cstring>
#include <exception>
#include <type_traits>

#include "lmstack/core/error.h"
#include "lmstack/train/model_train.h"

namespace lmstack::rl {
namespace {

enum Op : int32_t { kGenerate = 1, kSync = 2, kStop = 3 };

// {op, n, number of prompts, total prompt tokens}: the first broadcast of every call.
struct Header {
  int32_t op = 0, n = 0, prompts = 0, tokens = 0;
};

// SamplingParams without its strings (RL sets none), as bytes on the wire.
struct WireSampling {
  float temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  int32_t top_k, max_tokens, ignore_eos, logprobs;
  uint64_t seed;
};
static_assert(std::is_trivially_copyable_v<WireSampling>);

WireSampling to_wire(const model::SamplingParams& p) {
  if (!p.stop.empty()) throw_error<RequestError>("rollout ranks: stop strings are not sent");
  return {p.temperature,
          p.top_p,
          p.min_p,
          p.repetition_penalty,
          p.presence_penalty,
          p.frequency_penalty,
          p.top_k,
          p.max_tokens,
          p.ignore_eos ? 1 : 0,
          p.logprobs,
          p.seed};
}

model::SamplingParams from_wire(const WireSampling& w) {
  model::SamplingParams p;
  p.temperature = w.temperature, p.top_p = w.top_p, p.min_p = w.min_p;
  p.repetition_penalty = w.repetition_penalty, p.presence_penalty = w.presence_penalty;
  p.frequency_penalty = w.frequency_penalty, p.top_k = w.top_k, p.max_tokens = w.max_tokens;
  p.ignore_eos = w.ignore_eos != 0, p.logprobs = w.logprobs, p.seed = w.seed;
  return p;
}

void broadcast_header(dist::Comm& comm, Header& h) {
  comm.broadcast(&h, sizeof(Header) / sizeof(int32_t), DType::kI32, 0);
}

// The first prompt of rollout rank w's slice (w = 1..ranks; w = ranks + 1 is the end).
int slice_begin(int prompts, int w, int ranks) {
  return static_cast<int>(static_cast<int64_t>(prompts) * (w - 1) / ranks);
}

int32_t finish_code(const std::string& reason) {
  if (reason == "stop") return 0;
  if (reason == "length") return 1;
  throw_error<RequestError>("rollout finished with '{}' (expected stop or length)", reason);
}

// `fields` (weight_fields order on every rank), checked to be the f32 a sync sends.
std::vector<std::pair<std::string, Tensor*>> f32_fields(
    std::vector<std::pair<std::string, Tensor*>> fields) {
  for (auto& [name, t] : fields)
    if (t->dtype() != DType::kF32)
      throw_error<RequestError>("weight sync: {} is {}, expected f32", name,
                                dtype_name(t->dtype()));
  return fields;
}

// Rollout rank side of a generate call (the header already received).
void answer_generate(dist::Comm& comm, EngineReplica& replica, const Header& h) {
  WireSampling wire{};
  comm.broadcast(&wire, sizeof(wire), DType::kI8, 0);
  std::vector<int32_t> lengths(static_cast<size_t>(h.prompts)), flat(static_cast<size_t>(h.tokens));
  if (h.prompts) comm.broadcast(lengths.data(), h.prompts, DType::kI32, 0);
  if (h.tokens) comm.broadcast(flat.data(), h.tokens, DType::kI32, 0);
  const int ranks = comm.size() - 1;
  const int begin = slice_begin(h.prompts, comm.rank(), ranks);
  const int end = slice_begin(h.prompts, comm.rank() + 1, ranks);
  if (begin == end) return;  // more rollout ranks than prompts: nothing to send
  std::vector<std::vector<int32_t>> prompts;
  size_t at = 0;
  for (int i = 0; i < end; ++i) {
    const size_t len = static_cast<size_t>(lengths[static_cast<size_t>(i)]);
    if (i >= begin) prompts.emplace_back(flat.begin() + at, flat.begin() + at + len);
    at += len;
  }
  const auto rollouts = generate_rollouts(replica.engine(), prompts, h.n, from_wire(wire), begin);
  std::vector<int32_t> meta, tokens;
  std::vector<float> logp;
  for (const Rollout& r : rollouts) {
    meta.push_back(static_cast<int32_t>(r.response.size()));
    meta.push_back(finish_code(r.finish_reason));
    tokens.insert(tokens.end(), r.response.begin(), r.response.end());
    logp.insert(logp.end(), r.engine_logprobs.begin(), r.engine_logprobs.end());
  }
  comm.send(meta.data(), static_cast<int64_t>(meta.size()), DType::kI32, 0);
  if (tokens.empty()) return;
  comm.send(tokens.data(), static_cast<int64_t>(tokens.size()), DType::kI32, 0);
  comm.send(logp.data(), static_cast<int64_t>(logp.size()), DType::kF32, 0);
}

}  // namespace

RemoteRollouts::RemoteRollouts(dist::Comm& comm, const model::ModelConfig& config,
                               const model::ModelWeights& initial)
    : comm_(comm), tied_(config.tie_word_embeddings) {
  if (comm.rank() != 0 || comm.size() < 2)
    throw_error<RequestError>("RemoteRollouts runs on rank 0 of two or more ranks (rank {} of {})",
                              comm.rank(), comm.size());
  sync(initial);
}

RemoteRollouts::~RemoteRollouts() {
  if (stopped_ || std::uncaught_exceptions() > 0) return;
  try {
    stop();
  } catch (const std::exception&) {  // the job is failing anyway; its abort reports why
  }
}

void RemoteRollouts::stop() {
  if (stopped_) return;
  Header h{kStop, 0, 0, 0};
  broadcast_header(comm_, h);
  stopped_ = true;
}

std::vector<Rollout> RemoteRollouts::generate(const std::vector<std::vector<int32_t>>& prompts,
                                              int n, const model::SamplingParams& params) {
  LMSTACK_CHECK(!stopped_, "RemoteRollouts used after stop()");
  WireSampling wire = to_wire(params);
  std::vector<int32_t> lengths, flat;
  for (const auto& p : prompts) {
    lengths.push_back(static_cast<int32_t>(p.size()));
    flat.insert(flat.end(), p.begin(), p.end());
  }
  Header h{kGenerate, n, static_cast<int32_t>(prompts.size()), static_cast<int32_t>(flat.size())};
  broadcast_header(comm_, h);
  comm_.broadcast(&wire, sizeof(wire), DType::kI8, 0);
  if (h.prompts) comm_.broadcast(lengths.data(), h.prompts, DType::kI32, 0);
  if (h.tokens) comm_.broadcast(flat.data(), h.tokens, DType::kI32, 0);
  const int ranks = comm_.size() - 1;
  std::vector<Rollout> out;
  for (int w = 1; w <= ranks; ++w) {
    const int begin = slice_begin(h.prompts, w, ranks), end = slice_begin(h.prompts, w + 1, ranks);
    const size_t count = static_cast<size_t>(end - begin) * static_cast<size_t>(n);
    if (count == 0) continue;
    std::vector<int32_t> meta(2 * count);
    comm_.recv(meta.data(), static_cast<int64_t>(meta.size()), DType::kI32, w);
    int64_t total = 0;
    for (size_t j = 0; j < count; ++j) total += meta[2 * j];
    std::vector<int32_t> tokens(static_cast<size_t>(total));
    std::vector<float> logp(tokens.size());
    if (total) {
      comm_.recv(tokens.data(), total, DType::kI32, w);
      comm_.recv(logp.data(), total, DType::kF32, w);
    }
    size_t at = 0;
    for (size_t j = 0; j < count; ++j) {
      const int group = begin + static_cast<int>(j / static_cast<size_t>(n));
      const size_t len = static_cast<size_t>(meta[2 * j]);
      Rollout r{group, prompts[static_cast<size_t>(group)], {}, {}, "", 0};
      r.response.assign(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                        tokens.begin() + static_cast<std::ptrdiff_t>(at + len));
      r.engine_logprobs.assign(logp.begin() + static_cast<std::ptrdiff_t>(at),
                               logp.begin() + static_cast<std::ptrdiff_t>(at + len));
      r.finish_reason = meta[2 * j + 1] == 0 ? "stop" : "length";
      at += len;
      out.push_back(std::move(r));
    }
  }
  return out;
}

SyncStats RemoteRollouts::sync(const model::ModelWeights& policy) {
  LMSTACK_CHECK(!stopped_, "RemoteRollouts used after stop()");
  const double start = seconds_now();
  Header h{kSync, 0, 0, 0};
  broadcast_header(comm_, h);
  model::ModelWeights handles = policy;  // the Comm API takes void*; the root only reads
  SyncStats st;
  for (auto& [name, t] : f32_fields(train::weight_fields(handles, tied_))) {
    comm_.broadcast(t->raw_data(), t->numel(), DType::kF32, 0);
    st.bytes += t->nbytes();
  }
  st.seconds = seconds_now() - start;
  return st;
}

void serve_rollouts(dist::Comm& comm, EngineReplica& replica,
                    const std::function<void(const EngineReplica&)>& after_sync) {
  try {
    for (;;) {
      Header h;
      broadcast_header(comm, h);
      if (h.op == kStop) return;
      if (h.op == kGenerate) {
        answer_generate(comm, replica, h);
      } else if (h.op == kSync) {
        for (auto& [name, t] : f32_fields(replica.fields()))
          comm.broadcast(t->raw_data(), t->numel(), DType::kF32, 0);
        replica.weights_changed();  // its prefix cache holds KV of the old weights
        if (after_sync) after_sync(replica);
      } else {
        throw_error<DistError>("unknown request {} from the trainer", h.op);
      }
    }
  } catch (const std::exception& e) {
    throw_error<DistError>("rollout rank {}: {}", comm.rank(), e.what());
  }
}

}  // namespace lmstack::rl
