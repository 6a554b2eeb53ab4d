// DPO's loss, gradient and data (dpo.h).
#include "lmstack/rl/dpo.h"

#include <cmath>
#include <cstring>

#include "lmstack/core/error.h"
#include "lmstack/core/json.h"
#include "lmstack/rl/policy_loss.h"
#include "lmstack/train/train_log.h"

namespace lmstack::rl {
namespace {

// Rows 2i (chosen) and 2i + 1 (rejected) of pair i.
PackedBatch pack_pairs(const std::vector<TokenPair>& pairs) {
  std::vector<const std::vector<int32_t>*> prompts, responses;
  for (const TokenPair& p : pairs) {
    prompts.push_back(&p.prompt), responses.push_back(&p.chosen);
    prompts.push_back(&p.prompt), responses.push_back(&p.rejected);
  }
  return pack(prompts, responses);
}

std::vector<double> row_sums(const PackedBatch& b, const std::vector<float>& flat) {
  std::vector<double> out;
  for (const auto& row : split_rows(b, flat)) {
    double sum = 0;
    for (float v : row) sum += v;
    out.push_back(sum);
  }
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

std::vector<PreferencePair> read_preference_pairs(const std::string& path) {
  std::vector<PreferencePair> out;
  const std::vector<Json> lines = train::read_train_log(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = fmt::format("{} line {}", path, i + 1);
    PreferencePair p;
    try {
      p.prompt = require<std::string>(lines[i], "prompt", where);
      p.chosen = require<std::string>(lines[i], "chosen", where);
      p.rejected = require<std::string>(lines[i], "rejected", where);
    } catch (const ConfigError& e) {
      throw_error<FormatError>("{}", e.what());
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) throw_error<FormatError>("{}: no preference pairs", path);
  return out;
}

std::vector<double> ref_sequence_logprobs(RlSession& s, const std::vector<TokenPair>& pairs) {
  const PackedBatch b = pack_pairs(pairs);
  std::vector<float> logp;
  model_logprobs(s.ref(), b, 1.0f, &logp, nullptr);
  return row_sums(b, logp);
}

DpoStats dpo_loss_backward(RlSession& s, const std::vector<TokenPair>& pairs,
                           const std::vector<double>& ref_logp, const DpoConfig& c) {
  const PackedBatch b = pack_pairs(pairs);
  LMSTACK_CHECK(ref_logp.size() == static_cast<size_t>(b.batch), "{} ref log-probs for {} rows",
                ref_logp.size(), b.batch);
  const int vocab = s.config().vocab_size;
  const double num_pairs = static_cast<double>(pairs.size());
  DpoStats st;
  s.policy().forward_backward_logits(b.inputs.data(), b.batch, b.seq, [&](float* logits) {
    std::vector<float> logp;
    token_logprobs(logits, b, vocab, 1.0f, &logp, nullptr);
    const std::vector<double> pi = row_sums(b, logp);
    std::vector<double> g(pi.size());  // ∂L/∂(sequence log π) per row
    for (size_t i = 0; i < pairs.size(); ++i) {
      const double lc = pi[2 * i] - ref_logp[2 * i], lr = pi[2 * i + 1] - ref_logp[2 * i + 1];
      const double h = c.beta * (lc - lr);
      const double nll = h > 0 ? std::log1p(std::exp(-h)) : -h + std::log1p(std::exp(h));
      st.loss += nll / num_pairs;  // −log σ(h), stable for either sign
      st.accuracy += (h > 0) / num_pairs;
      st.margin += (lc - lr) / num_pairs;
      st.chosen_reward += c.beta * lc / num_pairs;
      st.rejected_reward += c.beta * lr / num_pairs;
      g[2 * i] = -c.beta * sigmoid(-h) / num_pairs;
      g[2 * i + 1] = c.beta * sigmoid(-h) / num_pairs;
    }
    std::vector<char> touched(static_cast<size_t>(b.batch) * b.seq, 0);
    for (int r = 0; r < b.batch; ++r)
      for (int j = 0; j < b.length[static_cast<size_t>(r)]; ++j) {
        const int64_t row = static_cast<int64_t>(r) * b.seq + b.first[static_cast<size_t>(r)] + j;
        logprob_grad_row(logits + row * vocab, vocab, b.targets[static_cast<size_t>(row)], 1.0f,
                         g[static_cast<size_t>(r)]);
        touched[static_cast<size_t>(row)] = 1;
      }
    for (size_t row = 0; row < touched.size(); ++row)
      if (!touched[row]) std::memset(logits + row * vocab, 0, sizeof(float) * vocab);
    return st.loss;
  });
  return st;
}

DpoStats dpo_step(RlSession& s, const std::vector<TokenPair>& pairs, const DpoConfig& c) {
  const std::vector<double> ref = ref_sequence_logprobs(s, pairs);
  DpoStats st = dpo_loss_backward(s, pairs, ref, c);
  st.grad_norm = s.optimizer_step();
  return st;
}

}  // namespace lmstack::rl
