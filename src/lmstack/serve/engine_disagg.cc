// Prefill/decode disaggregation in the engine (see engine.h, EngineRequest::kv_export and
// kv_import; docs/disaggregation.md): the prefill side copies a sequence's prompt KV out of
// its blocks after the first sample, the decode side copies it into fresh blocks at
// admission and emits that first token, so the rest of the sequence runs through the normal
// batch. Both sides return every block they took, on success and on failure.
#include "lmstack/core/error.h"
#include "lmstack/core/log.h"
#include "lmstack/serve/engine.h"
#include "lmstack/serve/engine_internal.h"

namespace lmstack::serve {

KvLayout Engine::kv_layout() const {
  KvLayout l;
  l.num_layers = static_cast<uint32_t>(config_.num_layers);
  l.kv_heads = static_cast<uint32_t>(kv_.kv_heads());
  l.head_dim = static_cast<uint32_t>(kv_.head_dim());
  l.dtype = kv_.dtype();
  l.vocab_size = static_cast<uint32_t>(decoder_.vocab_size());
  l.layer_token_bytes = static_cast<uint32_t>(kv_.layer_token_bytes());
  return l;
}

void Engine::validate_disagg(const EngineRequest& r) const {
  if (!r.kv_export && !r.kv_import) return;
  if (r.kv_export && r.kv_import)
    throw_error<RequestError>("kv_import: a request cannot both export and import its KV");
  if (r.n != 1) throw_error<RequestError>("n: {} choices; disaggregated serving runs n = 1", r.n);
  if (drafter_)
    throw_error<RequestError>("kv_import: disaggregated serving runs without speculative decoding");
  if (tp_.enabled())
    throw_error<RequestError>("kv_import: disaggregated serving runs without tensor parallelism");
  if (!r.kv_import) return;
  if (r.kv_import->layout != kv_layout())
    throw_error<RequestError>("kv_import: the KV layout differs from this engine's");
  if (r.kv_import->prompt != r.prompt)
    throw_error<RequestError>(
        "prompt: the prefill server's {} prompt tokens differ from this server's {} (another "
        "tokenizer or chat template?)",
        r.kv_import->prompt.size(), r.prompt.size());
  if (r.kv_import->seed != r.params.seed)
    throw_error<RequestError>("seed: {} differs from the prefill server's {}", r.params.seed,
                              r.kv_import->seed);
}

// After the first sample: the prompt's KV rows leave the blocks, token by token, layer-major
// (kv_transfer.h); the sequence then finishes and its blocks go back (to the prefix cache).
void Engine::export_kv(ActiveRequest& req, Sequence& seq, const model::SampleResult& first) {
  KvHandoff& h = *req.request.kv_export;
  h.layout = kv_layout();
  h.seed = req.request.params.seed;
  h.rng_draws = seq.sampler.num_rng_draws();
  h.prompt.assign(seq.tokens.begin(), seq.tokens.begin() + seq.num_prompt_tokens);
  h.first = first;
  const size_t T = h.prompt.size(), per = h.layout.layer_token_bytes;
  const int bs = options_.block_size;
  bool complete = seq.num_computed >= seq.num_prompt_tokens;
  for (size_t t = 0; t < T && complete; ++t)
    complete = seq.blocks[t / static_cast<size_t>(bs)] != kReleasedBlock;
  if (!complete) {
    // A sliding-window model may have released the prompt's first blocks (scheduler.h).
    h.kv.clear();
    retire(seq, false);
    finish_request(req, false, "the prompt's KV was released (sliding window): cannot export");
    return;
  }
  h.kv.resize(h.layout.num_layers * T * per);
  for (uint32_t l = 0; l < h.layout.num_layers; ++l)
    for (size_t t = 0; t < T; ++t) {
      const int64_t slot = int64_t{seq.blocks[t / static_cast<size_t>(bs)]} * bs +
                           static_cast<int64_t>(t % static_cast<size_t>(bs));
      kv_.read_token(static_cast<int>(l), slot, h.kv.data() + (l * T + t) * per);
    }
  finish_seq(req, seq, "prefilled");
}

// Admission of a request whose prompt was prefilled elsewhere: blocks, KV rows, sampler
// position, then the first token through emit_token, exactly as if sampled here.
void Engine::admit_imported(std::unique_ptr<ActiveRequest> owned) {
  ActiveRequest& req = *owned;
  const KvHandoff& h = *req.request.kv_import;
  auto seq = new_sequence(req, req.request.prompt, req.request.params);
  Sequence& s = *seq;
  req.seqs.push_back(std::move(seq));
  requests_.emplace(req.id, std::move(owned));
  const int T = static_cast<int>(h.prompt.size());
  if (!scheduler_.add_prefilled(&s, T)) {
    s.status = SeqStatus::kFinished;
    finish_request(req, false,
                   fmt::format("the KV pool cannot hold the {}-token prompt now ({} blocks "
                               "needed, {} free); retry later",
                               T, blocks_.blocks_for_tokens(T), blocks_.num_free()));
    return;
  }
  const size_t per = h.layout.layer_token_bytes, bs = static_cast<size_t>(options_.block_size);
  for (uint32_t l = 0; l < h.layout.num_layers; ++l)
    for (size_t t = 0; t < h.prompt.size(); ++t)
      kv_.write_token(
          static_cast<int>(l),
          int64_t{s.blocks[t / bs]} * options_.block_size + static_cast<int64_t>(t % bs),
          h.kv.data() + (l * h.prompt.size() + t) * per);
  s.sampler.skip_rng_draws(h.rng_draws);
  if (s.constraint) s.constraint->accept(h.first.token);
  emit_token(req, s, h.first);
}

}  // namespace lmstack::serve
