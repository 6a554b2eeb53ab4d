// AdamW, gradient clipping and learning-rate schedules (contracts in adamw.h). The update is
// written in f32 in the same operation order as torch 1.13's _single_tensor_adamw, so a f32
// PyTorch run and this one differ only by summation order in the gradients.
#include "lmstack/train/adamw.h"

#include <cmath>
#include <mutex>
#include <numbers>

#include "lmstack/core/error.h"

namespace lmstack::train {

AdamW::AdamW(std::vector<ParamRef>& params, const AdamWConfig& config)
    : params_(params), config_(config) {
  for (const ParamRef& p : params) {
    m_.push_back(Tensor::zeros(p.value->shape(), DType::kF32, MemoryCategory::kOptimizer));
    v_.push_back(Tensor::zeros(p.value->shape(), DType::kF32, MemoryCategory::kOptimizer));
  }
}

int64_t AdamW::state_bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < m_.size(); ++i) total += m_[i].nbytes() + v_[i].nbytes();
  return total;
}

AdamWStep AdamWStep::at(const AdamWConfig& c, int64_t t, float lr) {
  const double td = static_cast<double>(t);
  const float bias1 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta1), td));
  const float bias2 = static_cast<float>(1.0 - std::pow(static_cast<double>(c.beta2), td));
  return {lr, c.beta1, c.beta2, c.eps, c.weight_decay, lr / bias1, std::sqrt(bias2)};
}

void adamw_update(ThreadPool& pool, const AdamWStep& s, bool decay_on, float* p, const float* g,
                  float* m, float* v, int64_t n) {
  const float decay = decay_on ? 1.0f - s.lr * s.weight_decay : 1.0f;
  const float b1 = s.beta1, b2 = s.beta2;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          p[j] *= decay;
          m[j] = m[j] * b1 + g[j] * (1.0f - b1);
          v[j] = v[j] * b2 + g[j] * g[j] * (1.0f - b2);
          const float denom = std::sqrt(v[j]) / s.bias2_sqrt + s.eps;
          p[j] += -s.step_size * (m[j] / denom);
        }
      },
      4096);
}

void AdamW::step(ThreadPool& pool, float lr) {
  ++steps_;
  const AdamWStep s = AdamWStep::at(config_, steps_, lr);
  for (size_t i = 0; i < params_.size(); ++i)
    adamw_update(pool, s, params_[i].decay, params_[i].value->data<float>(),
                 params_[i].grad->data<float>(), m_[i].data<float>(), v_[i].data<float>(),
                 params_[i].value->numel());
}

double sum_squares(ThreadPool& pool, const float* g, int64_t n) {
  double total = 0;
  std::mutex mu;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        double s = 0;
        for (int64_t j = begin; j < end; ++j) s += static_cast<double>(g[j]) * g[j];
        std::lock_guard<std::mutex> lock(mu);
        total += s;
      },
      1 << 16);
  return total;
}

double global_grad_norm(ThreadPool& pool, const std::vector<ParamRef>& params) {
  double total = 0;
  for (const ParamRef& p : params)
    total += sum_squares(pool, p.grad->data<float>(), p.grad->numel());
  return std::sqrt(total);
}

double clip_grad_norm(ThreadPool& pool, std::vector<ParamRef>& params, double max_norm) {
  const double norm = global_grad_norm(pool, params);
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return norm;
  const float c = static_cast<float>(coef);
  for (ParamRef& p : params) {
    float* g = p.grad->data<float>();
    for (int64_t j = 0; j < p.grad->numel(); ++j) g[j] *= c;
  }
  return norm;
}

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "cosine") return LrSchedule::kCosine;
  if (name == "linear") return LrSchedule::kLinear;
  if (name == "constant") return LrSchedule::kConstant;
  throw_error<RequestError>("unknown schedule '{}' (known: cosine, linear, constant)", name);
}

const char* lr_schedule_name(LrSchedule s) {
  switch (s) {
    case LrSchedule::kCosine:
      return "cosine";
    case LrSchedule::kLinear:
      return "linear";
    case LrSchedule::kConstant:
      return "constant";
  }
  return "?";
}

double learning_rate(const LrConfig& c, int64_t step) {
  if (step < c.warmup)
    return static_cast<double>(c.lr) * static_cast<double>(step + 1) /
           static_cast<double>(c.warmup);
  if (c.schedule == LrSchedule::kConstant) return c.lr;
  const int64_t span = std::max<int64_t>(1, c.total - c.warmup);
  const double progress =
      std::min(1.0, static_cast<double>(step - c.warmup) / static_cast<double>(span));
  const double hi = c.lr, lo = c.min_lr;
  if (c.schedule == LrSchedule::kLinear) return hi + (lo - hi) * progress;
  return lo + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (hi - lo);
}

}  // namespace lmstack::train
