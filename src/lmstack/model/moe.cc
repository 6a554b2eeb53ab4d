// MoE forward (see moe.h). Routing follows transformers' MixtralSparseMoeBlock,
// Qwen2MoeSparseMoeBlock, DeepseekV2MoEGate and DeepseekV3TopkRouter operation for operation;
// the expert loop is the grouped ("dropless", Gale et al. 2023) form: a counting sort of the
// T·k (token, expert) pairs by expert, then per expert one gather, one SwiGLU MLP over its n_e
// rows and one weighted scatter-add.
#include "lmstack/model/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"

namespace lmstack::model {
namespace {

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// Group-limited eligibility: keep the topk_groups best groups (V2: a group's best score; V3:
// the sum of its best two), zero the rest's choice scores, as transformers' masked_fill does.
void limit_groups(const MoeConfig& cfg, float* choice) {
  const int g = cfg.num_groups, per = cfg.num_experts / g;
  if (g <= 1) return;
  std::vector<float> group(static_cast<size_t>(g));
  for (int i = 0; i < g; ++i) {
    const float* s = choice + static_cast<ptrdiff_t>(i) * per;
    std::vector<float> v(s, s + per);
    std::partial_sort(v.begin(), v.begin() + (cfg.group_top2_sum ? 2 : 1), v.end(),
                      std::greater<float>());
    group[static_cast<size_t>(i)] = cfg.group_top2_sum ? v[0] + v[1] : v[0];
  }
  std::vector<int> idx(static_cast<size_t>(g));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return group[static_cast<size_t>(a)] > group[static_cast<size_t>(b)];
  });
  for (size_t i = static_cast<size_t>(cfg.topk_groups); i < idx.size(); ++i)
    std::fill_n(choice + static_cast<ptrdiff_t>(idx[i]) * per, per, 0.0f);
}

}  // namespace

void moe_scores(RouterScore kind, const float* logits, int e, float* scores) {
  if (kind == RouterScore::kSigmoid) {
    for (int i = 0; i < e; ++i) scores[i] = sigmoid(logits[i]);
    return;
  }
  const float mx = *std::max_element(logits, logits + e);
  double sum = 0;
  for (int i = 0; i < e; ++i) sum += scores[i] = std::exp(logits[i] - mx);
  for (int i = 0; i < e; ++i) scores[i] = static_cast<float>(scores[i] / sum);
}

int64_t MoeLayerWeights::expert_bytes(int e) const {
  const size_t i = static_cast<size_t>(e);
  return w_gate[i].nbytes() + w_up[i].nbytes() + w_down[i].nbytes();
}

std::vector<const Tensor*> MoeLayerWeights::tensors() const {
  std::vector<const Tensor*> out = {&router,    &score_bias,  &shared_gate,
                                    &shared_up, &shared_down, &shared_expert_gate};
  for (size_t e = 0; e < w_gate.size(); ++e)
    for (const Tensor* t : {&w_gate[e], &w_up[e], &w_down[e]}) out.push_back(t);
  return out;
}

void moe_route(const MoeConfig& cfg, const float* logits, int64_t tokens, const float* score_bias,
               MoeRouting& out) {
  const int e = cfg.num_experts, k = cfg.top_k;
  out.chosen.resize(static_cast<size_t>(tokens * k));
  out.weight.resize(static_cast<size_t>(tokens * k));
  std::vector<float> scores(static_cast<size_t>(e)), choice(static_cast<size_t>(e));
  std::vector<int> idx(static_cast<size_t>(e));
  for (int64_t t = 0; t < tokens; ++t) {
    moe_scores(cfg.score, logits + t * e, e, scores.data());
    for (int i = 0; i < e; ++i)
      choice[static_cast<size_t>(i)] =
          scores[static_cast<size_t>(i)] + (score_bias != nullptr ? score_bias[i] : 0.0f);
    limit_groups(cfg, choice.data());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
      const float ca = choice[static_cast<size_t>(a)], cb = choice[static_cast<size_t>(b)];
      return ca > cb || (ca == cb && a < b);
    });
    // The weights are the scores (without the bias) of the chosen experts.
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += scores[static_cast<size_t>(idx[static_cast<size_t>(j)])];
    // DeepSeek-V3 adds 1e-20 to the denominator (DeepseekV3TopkRouter).
    const double denom = cfg.norm_topk_prob ? sum + (cfg.score_bias ? 1e-20 : 0.0) : 1.0;
    for (int j = 0; j < k; ++j) {
      const int ex = idx[static_cast<size_t>(j)];
      out.chosen[static_cast<size_t>(t * k + j)] = ex;
      out.weight[static_cast<size_t>(t * k + j)] =
          static_cast<float>(scores[static_cast<size_t>(ex)] / denom * cfg.routed_scale);
    }
  }
}

namespace {

// y[n, C] = down(silu(gate·x) ⊙ up·x) for n rows of x (a SwiGLU expert).
void swiglu(ThreadPool& pool, float* y, const float* x, int64_t n, const Tensor& gate,
            const Tensor& up, const Tensor& down, std::vector<float>& g, std::vector<float>& u) {
  const int64_t f = gate.dim(0);
  g.resize(static_cast<size_t>(n * f));
  u.resize(static_cast<size_t>(n * f));
  kernels::linear(pool, g.data(), x, gate, n);
  kernels::linear(pool, u.data(), x, up, n);
  kernels::silu_mul(u.data(), g.data(), u.data(), n * f);
  kernels::linear(pool, y, u.data(), down, n);
}

}  // namespace

void moe_group_by_expert(const MoeRouting& r, int num_experts, std::vector<int32_t>& offsets,
                         std::vector<int32_t>& order) {
  offsets.assign(static_cast<size_t>(num_experts) + 1, 0);
  for (int32_t ex : r.chosen) ++offsets[static_cast<size_t>(ex) + 1];
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  order.resize(r.chosen.size());
  std::vector<int32_t> fill(offsets.begin(), offsets.end() - 1);
  for (size_t p = 0; p < r.chosen.size(); ++p)
    order[static_cast<size_t>(fill[static_cast<size_t>(r.chosen[p])]++)] = static_cast<int32_t>(p);
}

void moe_forward(ThreadPool& pool, float* x, const float* h, int64_t tokens, int layer,
                 const ModelConfig& config, const MoeLayerWeights& w, MoeScratch& s,
                 MoeStats* stats) {
  const MoeConfig& cfg = config.moe;
  const int64_t C = config.hidden_size;
  const int E = cfg.num_experts, k = cfg.top_k;
  s.logits.resize(static_cast<size_t>(tokens * E));
  kernels::linear(pool, s.logits.data(), h, w.router, tokens);
  moe_route(cfg, s.logits.data(), tokens,
            w.score_bias.defined() ? w.score_bias.data<float>() : nullptr, s.routing);
  moe_group_by_expert(s.routing, E, s.offsets, s.order);
  s.combined.assign(static_cast<size_t>(tokens * C), 0.0f);
  for (int e = 0; e < E; ++e) {
    const int32_t begin = s.offsets[static_cast<size_t>(e)],
                  end = s.offsets[static_cast<size_t>(e) + 1];
    const int64_t n = end - begin;
    if (stats != nullptr) stats->tokens_per_expert[static_cast<size_t>(layer) * E + e] += n;
    if (n == 0) continue;  // an expert no token chose is never read
    if (stats != nullptr) stats->expert_bytes_read += w.expert_bytes(e);
    s.xe.resize(static_cast<size_t>(n * C));
    s.ye.resize(static_cast<size_t>(n * C));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = s.order[static_cast<size_t>(begin + i)] / k;
      std::copy_n(h + t * C, C, s.xe.data() + i * C);
    }
    swiglu(pool, s.ye.data(), s.xe.data(), n, w.w_gate[static_cast<size_t>(e)],
           w.w_up[static_cast<size_t>(e)], w.w_down[static_cast<size_t>(e)], s.gate, s.up);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t pair = s.order[static_cast<size_t>(begin + i)];
      const float wt = s.routing.weight[static_cast<size_t>(pair)];
      float* dst = s.combined.data() + (pair / k) * C;
      const float* src = s.ye.data() + i * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += wt * src[c];
    }
  }
  kernels::add_inplace(x, s.combined.data(), tokens * C);
  if (cfg.shared_intermediate == 0) return;
  // Shared experts see every token (DeepSeekMoE's "shared expert isolation"); Qwen2-MoE scales
  // them by sigmoid(shared_expert_gate · h) per token.
  s.ye.resize(static_cast<size_t>(tokens * C));
  swiglu(pool, s.ye.data(), h, tokens, w.shared_gate, w.shared_up, w.shared_down, s.gate, s.up);
  if (cfg.shared_gate) {
    s.shared_g.resize(static_cast<size_t>(tokens));
    kernels::linear(pool, s.shared_g.data(), h, w.shared_expert_gate, tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      const float g = sigmoid(s.shared_g[static_cast<size_t>(t)]);
      for (int64_t c = 0; c < C; ++c) s.ye[static_cast<size_t>(t * C + c)] *= g;
    }
  }
  kernels::add_inplace(x, s.ye.data(), tokens * C);
}

}  // namespace lmstack::model
