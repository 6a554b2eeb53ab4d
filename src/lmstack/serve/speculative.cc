// Drafters and the rejection sampler of speculative decoding (see speculative.h).
#include "lmstack/serve/speculative.h"

#include <algorithm>

#include "lmstack/core/error.h"

namespace lmstack::serve {

SpecMethod parse_spec_method(const std::string& name) {
  if (name == "none") return SpecMethod::kNone;
  if (name == "ngram") return SpecMethod::kNgram;
  if (name == "draft") return SpecMethod::kDraft;
  throw_error<RequestError>("--spec: '{}' is not one of none, ngram, draft", name);
}

NgramDrafter::NgramDrafter(int ngram_min, int ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_max < ngram_min)
    throw_error<ConfigError>("n-gram speculation: need 1 <= ngram_min ({}) <= ngram_max ({})",
                             ngram_min, ngram_max);
}

// Longest n first, then the latest earlier occurrence (recent context predicts best). The copy
// may run into the proposal itself, as an LZ77 match does, so a loop of period < k still
// proposes k tokens.
std::vector<int32_t> NgramDrafter::lookup(std::span<const int32_t> tokens, int max_tokens) const {
  const int64_t size = static_cast<int64_t>(tokens.size());
  for (int n = ngram_max_; n >= ngram_min_; --n) {
    if (size <= n) continue;
    const auto suffix = tokens.subspan(static_cast<size_t>(size - n));
    for (int64_t i = size - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      std::vector<int32_t> out;
      for (int64_t j = 0; j < max_tokens; ++j) {
        const int64_t from = i + n + j;
        out.push_back(from < size ? tokens[static_cast<size_t>(from)]
                                  : out[static_cast<size_t>(from - size)]);
      }
      return out;
    }
  }
  return {};
}

void NgramDrafter::propose(std::span<const DraftSlot> slots) {
  for (const DraftSlot& s : slots) {
    s.seq->draft = lookup(s.seq->tokens, s.max_tokens);
    s.seq->draft_probs.clear();
  }
}

namespace {

const model::ModelConfig& same_vocab(const model::ModelConfig& draft, int target_vocab) {
  if (draft.vocab_size != target_vocab)
    throw_error<ConfigError>(
        "--draft-model: its vocabulary has {} tokens, the target model's has {}; the draft must "
        "share the target's tokenizer",
        draft.vocab_size, target_vocab);
  return draft;
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(const model::ModelConfig& config,
                                     const model::ModelWeights& weights, ThreadPool& pool,
                                     int target_vocab, int64_t num_blocks, int block_size)
    : decoder_(same_vocab(config, target_vocab), weights, pool),
      kv_(config, num_blocks, block_size),
      blocks_(num_blocks, block_size) {}

// Rolls the draft's KV back to the longest prefix it shares with the sequence (rejected drafts
// and the target's replacement token differ from what was fed) and reserves blocks for the
// tokens still to feed plus max_tokens - 1 drafts. False: no room, no draft this step.
bool DraftModelDrafter::prepare(const DraftSlot& slot, State& st) {
  const std::vector<int32_t>& t = slot.seq->tokens;
  const auto diff = std::mismatch(st.fed.begin(), st.fed.end(), t.begin(), t.end());
  // The last token's logits are needed, so at least it is fed again.
  const size_t keep = std::min(static_cast<size_t>(diff.first - st.fed.begin()), t.size() - 1);
  st.fed.resize(keep);
  const int64_t positions = static_cast<int64_t>(t.size()) + slot.max_tokens - 1;
  if (positions > decoder_.config().max_position) return false;
  const int64_t missing =
      blocks_.blocks_for_tokens(positions) - static_cast<int64_t>(st.blocks.size());
  if (!blocks_.can_allocate(missing)) return false;
  for (int64_t i = 0; i < missing; ++i) st.blocks.push_back(*blocks_.allocate());
  return true;
}

void DraftModelDrafter::draw(Sequence& seq, std::span<const float> logits) {
  std::vector<float> q = seq.sampler.probabilities(logits, seq.tokens);
  const int32_t token = draw_from(q, seq.spec_rng);
  seq.draft.push_back(token);
  // Greedy: q is a point mass on the argmax, which draft_probs left empty stands for.
  if (seq.sampler.params().temperature > 0.0f) seq.draft_probs.push_back(std::move(q));
}

// Round 0 feeds what each sequence's draft cache lacks (a whole prompt the first time) and
// draws draft token 1; round r feeds draft token r and draws token r + 1. One batched forward
// per round over all slots still drafting.
void DraftModelDrafter::propose(std::span<const DraftSlot> slots) {
  std::vector<std::pair<const DraftSlot*, State*>> live;
  for (const DraftSlot& s : slots) {
    s.seq->draft.clear();
    s.seq->draft_probs.clear();
    State& st = states_[s.seq->id];
    if (prepare(s, st)) live.emplace_back(&s, &st);
  }
  const int bs = blocks_.block_size();
  const size_t vocab = static_cast<size_t>(decoder_.vocab_size());
  for (int round = 0; !live.empty(); ++round) {
    model::ForwardBatch batch;
    for (auto& [slot, st] : live) {
      const std::vector<int32_t>& t = slot->seq->tokens;
      const std::vector<int32_t> feed =
          round == 0 ? std::vector<int32_t>(t.begin() + static_cast<std::ptrdiff_t>(st->fed.size()),
                                            t.end())
                     : std::vector<int32_t>{slot->seq->draft.back()};
      batch.add_sequence(feed, static_cast<int>(st->fed.size()), st->blocks, bs, true);
      st->fed.insert(st->fed.end(), feed.begin(), feed.end());
    }
    decoder_.forward(batch, kv_, logits_);
    for (size_t i = 0; i < live.size(); ++i)
      draw(*live[i].first->seq, std::span<const float>(logits_.data() + i * vocab, vocab));
    std::erase_if(live, [&](const auto& l) { return round + 1 >= l.first->max_tokens; });
  }
}

void DraftModelDrafter::release(int64_t seq_id) {
  auto it = states_.find(seq_id);
  if (it == states_.end()) return;
  blocks_.release_all(it->second.blocks);
  states_.erase(it);
}

std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, ThreadPool& pool, int target_vocab,
                                      int64_t target_num_blocks, int block_size) {
  if (o.num_tokens < 1 && o.method != SpecMethod::kNone)
    throw_error<ConfigError>("--num-spec-tokens: {} must be >= 1", o.num_tokens);
  switch (o.method) {
    case SpecMethod::kNone:
      return nullptr;
    case SpecMethod::kNgram:
      return std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max);
    case SpecMethod::kDraft:
      if (o.draft_config == nullptr || o.draft_weights == nullptr)
        throw_error<ConfigError>("--spec draft needs --draft-model DIR");
      return std::make_unique<DraftModelDrafter>(
          *o.draft_config, *o.draft_weights, pool, target_vocab,
          o.draft_num_blocks > 0 ? o.draft_num_blocks : target_num_blocks, block_size);
  }
  return nullptr;
}

std::optional<int32_t> accept_or_resample(std::span<const float> p, int32_t draft,
                                          std::span<const float> q, std::mt19937_64& rng) {
  const size_t d = static_cast<size_t>(draft);
  const double qx = q.empty() ? 1.0 : q[d];
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  // u < p(x) / q(x), written without the division so that q(x) = 0 rejects.
  if (u * qx < p[d]) return std::nullopt;
  // Rejected: the residual norm(max(0, p - q)) makes the total P(token) exactly p(token)
  // (Leviathan et al. 2023, Appendix A.1).
  std::vector<float> residual(p.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double qi = q.empty() ? (i == d ? 1.0 : 0.0) : q[i];
    residual[i] = static_cast<float>(std::max(0.0, p[i] - qi));
    sum += residual[i];
  }
  // p == q up to rounding: rejection had probability ~0; p itself is the right fallback.
  return sum > 0 ? draw_from(residual, rng) : draw_from(p, rng);
}

int32_t draw_from(std::span<const float> p, std::mt19937_64& rng) {
  double total = 0;
  for (float x : p) total += x;
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng);
  double cumulative = 0;
  int32_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    cumulative += p[i];
    if (u < cumulative) return last;
  }
  return last;  // rounding at the top end: the last token with mass
}

}  // namespace lmstack::serve
