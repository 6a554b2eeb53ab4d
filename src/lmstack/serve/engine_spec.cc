// Speculative decoding in the serving loop (see engine.h, speculative.h): which sequences get
// drafts, and how one verified draft becomes emitted tokens. The draft tokens ride in the
// step's one batched forward next to other requests' prefill chunks and plain decodes
// (Scheduler), with logits for each of the k + 1 positions.
#include <algorithm>

#include "lmstack/serve/engine.h"
#include "lmstack/serve/engine_internal.h"

namespace lmstack::serve {

// Penalties make p depend on the tokens accepted just before, logprobs want the top
// alternatives of every position, n > 1 shares the prompt's blocks among choices, and a
// grammar constraint (structured output) masks p by a state each accepted token advances:
// those requests decode one token per step as before.
bool Engine::is_speculable(const Sequence& seq) const {
  const ActiveRequest& req = *requests_.at(seq.request_id);
  const model::SamplingParams& p = req.request.params;
  return req.request.n == 1 && !seq.constraint && p.logprobs == 0 && p.repetition_penalty == 1.0f &&
         p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
         seq.status == SeqStatus::kRunning && seq.num_uncomputed() == 1;
}

// A draft never reaches past max_tokens or the context: of k accepted drafts plus the bonus
// token, all k + 1 must be emittable, so at most (tokens left) - 1 drafts.
void Engine::propose_drafts() {
  std::vector<DraftSlot> slots;
  for (Sequence* seq : scheduler_.running()) {
    seq->draft.clear();
    seq->draft_probs.clear();
    if (!is_speculable(*seq)) continue;
    const int left = std::min(seq->sampler.params().max_tokens - seq->num_generated(),
                              max_context_ - seq->num_tokens());
    const int k = std::min(options_.spec.num_tokens, left - 1);
    if (k >= 1) slots.push_back({seq, k});
  }
  if (!slots.empty()) drafter_->propose(slots);
}

// Rejection sampling over the draft (Leviathan et al. 2023, Algorithm 1): position i accepts
// draft[i] with probability min(1, p_i / q_i); the first rejection is replaced by a draw from
// norm(max(0, p_i - q_i)) and ends the step; if all are accepted, a bonus token comes from
// p_k. Then the tokens are emitted one at a time through emit_token, so EOS, stop strings,
// max_tokens and the context end the sequence exactly where plain decoding would.
void Engine::on_draft_logits(Sequence& seq, std::span<const float> logits, int num_draft) {
  ActiveRequest& req = *requests_.at(seq.request_id);
  const size_t vocab = logits.size() / static_cast<size_t>(num_draft + 1);
  const auto row = [&](int i) { return logits.subspan(static_cast<size_t>(i) * vocab, vocab); };
  std::vector<int32_t> out;
  int accepted = 0;
  for (; accepted < num_draft; ++accepted) {
    const std::vector<float> p = seq.sampler.probabilities(row(accepted), seq.tokens);
    const std::span<const float> q =
        seq.draft_probs.empty() ? std::span<const float>() : seq.draft_probs[accepted];
    const int32_t x = seq.draft[static_cast<size_t>(accepted)];
    if (const auto replacement = accept_or_resample(p, x, q, seq.spec_rng)) {
      out.push_back(*replacement);
      break;
    }
    out.push_back(x);
  }
  if (accepted == num_draft)
    out.push_back(draw_from(seq.sampler.probabilities(row(num_draft), seq.tokens), seq.spec_rng));
  metrics_.add_spec_decode(num_draft, accepted);
  for (size_t i = 0; i < out.size() && seq.status != SeqStatus::kFinished; ++i) {
    // Every token before out[i] has its KV now: the step wrote it for the accepted drafts.
    // (The scheduler committed only the position before the draft.)
    seq.num_computed = seq.num_tokens();
    model::SampleResult r;
    r.token = out[i];
    r.logprob = seq.sampler.logprob(row(static_cast<int>(i)), seq.tokens, out[i]);
    emit_token(req, seq, r);
  }
}

}  // namespace lmstack::serve
