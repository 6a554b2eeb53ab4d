// Per-step expert loads, bias update, log fields and the MoE option checks (moe_balance.h).
#include "lmstack/train/moe_balance.h"

#include <algorithm>

#include "lmstack/core/error.h"
#include "lmstack/model/moe.h"
#include "lmstack/train/moe_train.h"

namespace lmstack::train {

void moe_begin_step(MoeStepLoads& s, const model::ModelConfig& config) {
  const size_t n = config.moe.enabled() ? static_cast<size_t>(config.num_layers) *
                                              static_cast<size_t>(config.moe.num_experts)
                                        : 0;
  s.tokens.assign(n, 0);
  s.aux_loss = 0;
  s.micro_batches = 0;
}

void moe_add_micro_batch(MoeStepLoads& s, const TrainModel& model) {
  if (s.tokens.empty()) return;
  const std::vector<int64_t>& t = model.expert_tokens();
  for (size_t i = 0; i < s.tokens.size(); ++i) s.tokens[i] += t[i];
  // A running mean, so the step's value is the mean over micro-batches.
  ++s.micro_batches;
  s.aux_loss += (model.moe_aux_loss() - s.aux_loss) / s.micro_batches;
}

void moe_reduce_step(MoeStepLoads& s, dist::Comm& comm) {
  if (s.tokens.empty() || comm.size() == 1) return;
  std::vector<int32_t> counts(s.tokens.begin(), s.tokens.end());  // a step's rows fit in int32
  comm.all_reduce(counts.data(), static_cast<int64_t>(counts.size()), DType::kI32);
  std::copy(counts.begin(), counts.end(), s.tokens.begin());
  s.aux_loss = dist::sum_in_rank_order(comm, s.aux_loss) / comm.size();
}

void moe_update_score_biases(TrainModel& model, const MoeStepLoads& s, float rate) {
  const model::ModelConfig& c = model.config();
  const int E = c.moe.num_experts;
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.moe.is_sparse(l)) continue;
    Tensor& bias = model.master().layers[static_cast<size_t>(l)].moe->score_bias;
    moe_update_score_bias(bias.data<float>(), s.tokens.data() + static_cast<ptrdiff_t>(l) * E, E,
                          rate);
  }
}

void moe_log_fields(const model::ModelConfig& config, const MoeStepLoads& s, Json& measured) {
  if (s.tokens.empty()) return;
  const int E = config.moe.num_experts;
  Json tokens = Json::array(), layers = Json::array();
  double worst = 0;
  for (int l = 0; l < config.num_layers; ++l) {
    if (!config.moe.is_sparse(l)) continue;
    const auto first = s.tokens.begin() + static_cast<ptrdiff_t>(l) * E;
    const std::vector<int64_t> row(first, first + E);
    int64_t total = 0;
    for (int64_t t : row) total += t;
    if (total > 0)
      worst = std::max(worst, static_cast<double>(*std::max_element(row.begin(), row.end())) * E /
                                  static_cast<double>(total));
    tokens.push_back(row);
    layers.push_back(l);
  }
  measured["expert_tokens"] = tokens;
  measured["expert_layers"] = layers;
  measured["moe_max_load_ratio"] = worst;
  measured["moe_aux_loss"] = s.aux_loss;
}

double moe_aux_loss_weight(const TrainConfig& tc, const model::ModelConfig& mc) {
  if (tc.moe_aux_loss_coef >= 0) return tc.moe_aux_loss_coef;
  return mc.moe.aux_loss_coef >= 0 ? mc.moe.aux_loss_coef : 0.01;
}

void check_moe_train_config(const TrainConfig& tc, const model::ModelConfig& mc) {
  if (!mc.moe.enabled()) {
    if (tc.moe_bias_update_rate > 0 || tc.moe_aux_loss_coef >= 0)
      throw_error<ConfigError>("--moe-* options need a mixture-of-experts model ({} is dense)",
                               mc.architecture);
    return;
  }
  if (tc.tp * tc.pp > 1)
    throw_error<ConfigError>(
        "--tp/--pp with experts ({}) are not implemented: train MoE models with --dp",
        mc.architecture);
  if (tc.moe_bias_update_rate > 0 && !mc.moe.score_bias)
    throw_error<ConfigError>(
        "--moe-bias-update-rate needs a router with e_score_correction_bias "
        "(DeepSeek-V3); {} has none",
        mc.architecture);
  if (tc.moe_bias_update_rate > 0 && tc.zero == 3)
    throw_error<ConfigError>(
        "--moe-bias-update-rate with --zero 3 is not implemented (each rank "
        "holds only its shard of the biases)");
}

}  // namespace lmstack::train
