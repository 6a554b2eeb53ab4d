// Speculative decoding (Leviathan et al. 2023, "Fast Inference from Transformers via
// Speculative Decoding"; Chen et al. 2023, "Accelerating LLM Decoding with Speculative
// Sampling"): a cheap drafter proposes k tokens per running sequence, the target model scores
// all of them in the engine's one batched forward, and rejection sampling keeps the prefix the
// target agrees with, so the output has exactly the target's distribution (greedy: the same
// tokens). This file holds the drafters and the per-position rejection sampler; the engine
// side (who is drafted, verification, emission) is serve/engine_spec.cc. Not here: tree
// drafts (Medusa, EAGLE), typical acceptance.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/kv_cache.h"
#include "lmstack/serve/block_manager.h"
#include "lmstack/serve/sequence.h"

namespace lmstack::serve {

enum class SpecMethod { kNone, kNgram, kDraft };

// "none" | "ngram" | "draft" → SpecMethod; RequestError naming --spec otherwise.
SpecMethod parse_spec_method(const std::string& name);

struct SpecOptions {
  SpecMethod method = SpecMethod::kNone;
  int num_tokens = 4;  // k: draft tokens per sequence per step (--num-spec-tokens)
  // n-gram prompt lookup (vLLM's prompt_lookup_max / _min): match the last n tokens, n from
  // ngram_max down to ngram_min, against the sequence's earlier tokens.
  int ngram_max = 4;
  int ngram_min = 1;
  // Draft model (kDraft): must outlive the engine; same vocabulary as the target.
  const model::ModelConfig* draft_config = nullptr;
  const model::ModelWeights* draft_weights = nullptr;
  int64_t draft_num_blocks = 0;  // the draft's own KV pool (0: as many blocks as the target's)
};

// One draft request: fill seq->draft (and seq->draft_probs when the drafter's q is not a
// point mass) with at most max_tokens tokens (>= 1).
struct DraftSlot {
  Sequence* seq;
  int max_tokens;
};

// Thread safety: none; the engine loop thread only.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Proposes drafts for all slots (a drafter may leave a draft empty: nothing to propose).
  virtual void propose(std::span<const DraftSlot> slots) = 0;
  // The sequence is gone (finished or failed): drop its state.
  virtual void release(int64_t /*seq_id*/) {}
  // Blocks of the drafter's own KV pool held right now (0 for drafters without one).
  virtual int64_t num_blocks_held() const { return 0; }
};

// Prompt lookup decoding (Saxena 2023; vLLM's "[ngram]"): find the latest earlier occurrence
// of the sequence's last n tokens and propose the tokens that followed it. q is a point mass.
class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int ngram_min, int ngram_max);
  void propose(std::span<const DraftSlot> slots) override;
  // The proposal for `tokens` (empty when no n-gram of the last tokens recurs).
  std::vector<int32_t> lookup(std::span<const int32_t> tokens, int max_tokens) const;

 private:
  int ngram_min_, ngram_max_;
};

// A second, smaller model::Decoder with its own paged KV pool. Each step it first feeds the
// tokens its cache lacks (the longest common prefix of what it fed and the sequence's tokens
// stays: that is the rollback of rejected drafts), then runs k one-token forwards for all
// slots at once, drawing each draft token from its own processed distribution q (the
// request's temperature / top-k / top-p), kept in draft_probs unless q is a point mass.
// A sequence whose draft KV does not fit in the pool gets no draft this step.
class DraftModelDrafter : public Drafter {
 public:
  // ConfigError naming both vocabulary sizes when the draft's differs from target_vocab.
  DraftModelDrafter(const model::ModelConfig& config, const model::ModelWeights& weights,
                    ThreadPool& pool, int target_vocab, int64_t num_blocks, int block_size);
  void propose(std::span<const DraftSlot> slots) override;
  void release(int64_t seq_id) override;
  int64_t num_blocks_held() const override { return blocks_.num_blocks() - blocks_.num_free(); }

 private:
  struct State {
    std::vector<int32_t> fed;  // tokens whose KV is in `blocks`, in order
    std::vector<int32_t> blocks;
  };
  bool prepare(const DraftSlot& slot, State& st);
  void draw(Sequence& seq, std::span<const float> logits);

  model::Decoder decoder_;
  model::KvCache kv_;
  BlockManager blocks_;
  std::map<int64_t, State> states_;
  std::vector<float> logits_;
};

// The configured drafter, or null for SpecMethod::kNone.
std::unique_ptr<Drafter> make_drafter(const SpecOptions& o, ThreadPool& pool, int target_vocab,
                                      int64_t target_num_blocks, int block_size);

// One position of speculative sampling (Leviathan et al. 2023, section 2.3; Chen et al. 2023,
// Algorithm 2): accept `draft` with probability min(1, p(draft) / q(draft)); otherwise return
// a token drawn from norm(max(0, p - q)). q empty means a point mass on `draft` (q = 1).
// nullopt: accepted. p and q sum to 1 over the vocabulary.
std::optional<int32_t> accept_or_resample(std::span<const float> p, int32_t draft,
                                          std::span<const float> q, std::mt19937_64& rng);
// A token drawn from p (the bonus token after k acceptances, and draft tokens from q).
int32_t draw_from(std::span<const float> p, std::mt19937_64& rng);

}  // namespace lmstack::serve
