// Token sampling from logits: penalties, temperature, top-k, top-p (nucleus, Holtzman et al.
// 2020), min-p, with a per-request seeded generator so a run is reproducible. Temperature 0
// means greedy (argmax; ties to the lowest id). Order of operations, as in vLLM/llama.cpp:
// penalties → temperature → top-k → top-p → min-p → sample.
//
// Thread safety: a Sampler holds one request's RNG; use one per request.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace lmstack::model {

struct SamplingParams {
  float temperature = 1.0f;
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off
  float repetition_penalty = 1.0f;  // CTRL-style (Keskar et al. 2019): 1 = off
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence · [count > 0]
  float frequency_penalty = 0.0f;   // OpenAI: logit -= frequency · count
  uint64_t seed = 0;
  int max_tokens = 256;
  std::vector<std::string> stop;  // stop strings (may span tokens)
  bool ignore_eos = false;
  int logprobs = 0;  // top alternatives to report per token (0 = none)

  // Throws RequestError naming the field for out-of-range values.
  void validate() const;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0;              // log-softmax of the chosen token (after penalties/temp)
  std::vector<TokenLogprob> top;  // the `logprobs` most likely tokens, best first
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Picks the next token from `logits` (modified in place by penalties/temperature) given the
  // tokens of the sequence so far (prompt + generated; penalties count them).
  SampleResult sample(std::span<float> logits, std::span<const int32_t> history);
  // The distribution sample() draws from, over the whole vocabulary (zeros outside the
  // top-k / top-p / min-p survivors; summing to 1): what speculative decoding's rejection
  // sampling needs as p and q (serve/speculative.h). Temperature 0 gives a point mass on the
  // argmax (ties to the lowest id). Does not touch the RNG (only the scratch buffers).
  std::vector<float> probabilities(std::span<const float> logits, std::span<const int32_t> history);
  // The logprob sample() would report for `token`: its log-softmax after penalties and
  // temperature, over the whole vocabulary.
  float logprob(std::span<const float> logits, std::span<const int32_t> history, int32_t token);
  const SamplingParams& params() const { return params_; }
  // Calls made to the RNG so far, and a skip past that many: a sequence continued on another
  // server (serve's prefill/decode disaggregation) resumes the same random stream.
  uint64_t num_rng_draws() const { return num_draws_; }
  void skip_rng_draws(uint64_t n);

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history) const;
  double tempered_probs(std::span<const float> logits, float inv_t, float max_logit);
  void sort_candidates(std::span<const float> logits, size_t need);
  size_t filter(std::span<const float> logits, size_t sorted);
  SamplingParams params_;
  std::mt19937_64 rng_;
  uint64_t num_draws_ = 0;
  std::vector<float> probs_;    // scratch, reused across steps: the tempered distribution
  std::vector<int32_t> cand_;   // scratch: token ids, a sorted prefix of them
  std::vector<float> weights_;  // scratch: the survivors' probabilities
};

}  // namespace lmstack::model
