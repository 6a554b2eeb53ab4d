// AWQ calibration, scale search and folding (see quantize_awq.h; Lin et al. 2023, Sec. 3.2,
// and the authors' auto_scale: grid of 20 ratios, scales = x_mean^ratio / sqrt(max·min)).
// Folding 1/s into the producer of x keeps the f32 function unchanged:
//   q/k/v, gate/up: x = norm(h)·g  ->  g/s makes x/s (LayerNorm's bias too).
//   o: x = Attn(q, k, v) is linear in v per channel  ->  v_proj rows (and bias) / s. With GQA a
//      v channel feeds the same channel of H/Hkv query heads, so s is tied across those heads
//      (their statistic averaged) and the fold stays exact.
//   down (SwiGLU only): x = silu(gate) ⊙ up is linear in up  ->  up_proj rows / s.
#include "lmstack/model/quantize_awq.h"

#include <algorithm>
#include <cmath>

#include "lmstack/core/error.h"
#include "lmstack/kernels/ops.h"
#include "lmstack/kernels/quant.h"
#include "lmstack/model/kv_cache.h"

namespace lmstack::model {
namespace {

constexpr int kBlockSize = 16;

int site_index(LinearInput s) { return static_cast<int>(s); }

// Accumulates |x| sums and sampled rows for every (layer, site) while the Decoder runs.
struct Collector {
  std::vector<AwqActivations>* out;
  std::vector<std::array<std::vector<double>, kNumLinearInputs>> sums;
  int64_t stride = 1, max_rows = 0, base = 0;  // base: global index of the window's row 0

  void observe(int layer, LinearInput site, const float* x, int64_t rows, int64_t width) {
    const int s = site_index(site);
    AwqActivations& a = (*out)[static_cast<size_t>(layer)];
    std::vector<double>& sum = sums[static_cast<size_t>(layer)][static_cast<size_t>(s)];
    if (sum.empty()) sum.assign(static_cast<size_t>(width), 0.0);
    a.width[static_cast<size_t>(s)] = width;
    std::vector<float>& kept = a.rows[static_cast<size_t>(s)];
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x + r * width;
      for (int64_t c = 0; c < width; ++c) sum[static_cast<size_t>(c)] += std::fabs(row[c]);
      const bool sample = (base + r) % stride == 0;
      if (sample && static_cast<int64_t>(kept.size()) < max_rows * width)
        kept.insert(kept.end(), row, row + width);
    }
  }
};

}  // namespace

std::vector<AwqActivations> collect_awq_activations(ThreadPool& pool, const ModelConfig& config,
                                                    const ModelWeights& weights,
                                                    const std::vector<int32_t>& tokens, int ctx,
                                                    int max_rows) {
  const int64_t total = static_cast<int64_t>(tokens.size());
  if (total < 2)
    throw_error<RequestError>("AWQ calibration needs at least 2 tokens, got {}", total);
  ctx = std::max(2, std::min(ctx, config.max_position));
  std::vector<AwqActivations> out(static_cast<size_t>(config.num_layers));
  Collector col{&out, {}, std::max<int64_t>(1, (total + max_rows - 1) / max_rows), max_rows, 0};
  col.sums.resize(out.size());
  Decoder dec(config, weights, pool);
  dec.set_linear_input_observer([&](int l, LinearInput s, const float* x, int64_t r, int64_t w) {
    col.observe(l, s, x, r, w);
  });
  KvCache cache(config, (ctx + kBlockSize - 1) / kBlockSize, kBlockSize);
  std::vector<int32_t> blocks(static_cast<size_t>((ctx + kBlockSize - 1) / kBlockSize));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  std::vector<float> logits;
  for (int64_t start = 0; start < total; start += ctx) {
    const int64_t end = std::min(total, start + ctx);
    ForwardBatch batch;
    batch.add_sequence(std::vector<int32_t>(tokens.begin() + start, tokens.begin() + end), 0,
                       blocks, kBlockSize, /*want_logits=*/false);
    col.base = start;
    dec.forward(batch, cache, logits);
  }
  for (size_t l = 0; l < out.size(); ++l)
    for (int s = 0; s < kNumLinearInputs; ++s) {
      const std::vector<double>& sum = col.sums[l][static_cast<size_t>(s)];
      std::vector<float>& mean = out[l].mean_abs[static_cast<size_t>(s)];
      mean.resize(sum.size());
      for (size_t c = 0; c < sum.size(); ++c)
        mean[c] = static_cast<float>(sum[c] / static_cast<double>(total));
    }
  return out;
}

std::vector<float> awq_scales(const std::vector<float>& stat, float alpha) {
  std::vector<float> s(stat.size());
  float lo = INFINITY, hi = 0;
  for (size_t c = 0; c < stat.size(); ++c) {
    s[c] = std::pow(std::max(stat[c], 1e-4f), alpha);
    lo = std::min(lo, s[c]);
    hi = std::max(hi, s[c]);
  }
  const float norm = std::sqrt(hi * lo);
  for (float& v : s) v /= norm;
  return s;
}

namespace {

// One group of linears sharing an input: the matrices (f32 [N, K], writable) and the
// calibration rows of that input.
struct Group {
  std::vector<Tensor*> mats;
  const float* x = nullptr;
  int64_t rows = 0, k = 0;
};

// y = x · Wᵀ for each matrix of the group, f32.
std::vector<std::vector<float>> reference_outputs(ThreadPool& pool, const Group& g) {
  std::vector<std::vector<float>> y;
  for (const Tensor* w : g.mats) {
    y.emplace_back(static_cast<size_t>(g.rows * w->dim(0)));
    kernels::linear(pool, y.back().data(), g.x, *w, g.rows);
  }
  return y;
}

// sum_j ||(x/s)·Q(W_j·diag(s))ᵀ − y_j||² for the group under scales s.
double scaled_error(ThreadPool& pool, const Group& g, const std::vector<std::vector<float>>& ref,
                    const std::vector<float>& s, DType type) {
  std::vector<float> xs(static_cast<size_t>(g.rows * g.k));
  for (int64_t r = 0; r < g.rows; ++r)
    for (int64_t c = 0; c < g.k; ++c)
      xs[static_cast<size_t>(r * g.k + c)] = g.x[r * g.k + c] / s[static_cast<size_t>(c)];
  double err = 0;
  for (size_t j = 0; j < g.mats.size(); ++j) {
    const Tensor& w = *g.mats[j];
    const int64_t n = w.dim(0);
    std::vector<float> ws(static_cast<size_t>(n * g.k));
    const float* src = w.data<float>();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < g.k; ++c)
        ws[static_cast<size_t>(r * g.k + c)] = src[r * g.k + c] * s[static_cast<size_t>(c)];
    const Tensor q =
        kernels::quantize_matrix(pool, ws.data(), n, g.k, type, MemoryCategory::kBuffers);
    Tensor deq = Tensor::zeros(Shape{n, g.k}, DType::kF32, MemoryCategory::kBuffers);
    kernels::dequantize_rows(q, 0, n, deq.data<float>());
    std::vector<float> y(static_cast<size_t>(g.rows * n));
    kernels::linear(pool, y.data(), xs.data(), deq, g.rows);
    for (size_t i = 0; i < y.size(); ++i) {
      const double d = static_cast<double>(y[i]) - ref[j][i];
      err += d * d;
    }
  }
  return err;
}

// Grid search over alpha; returns the choice and the best scales in `best`.
AwqGroupChoice search_group(ThreadPool& pool, const Group& g, const std::vector<float>& stat,
                            DType type, int grid, std::vector<float>* best) {
  const std::vector<std::vector<float>> ref = reference_outputs(pool, g);
  double ref_norm = 0;
  for (const auto& y : ref)
    for (float v : y) ref_norm += static_cast<double>(v) * v;
  ref_norm = std::max(ref_norm, 1e-30);
  AwqGroupChoice choice;
  choice.searched = true;
  double best_err = INFINITY;
  for (int i = 0; i < grid; ++i) {
    const float alpha = static_cast<float>(i) / static_cast<float>(grid);
    std::vector<float> s = awq_scales(stat, alpha);
    const double err = scaled_error(pool, g, ref, s, type) / ref_norm;
    if (i == 0) choice.rtn_error = err;
    if (err < best_err) {
      best_err = err;
      choice.alpha = alpha;
      *best = std::move(s);
    }
  }
  choice.awq_error = best_err;
  return choice;
}

void scale_columns(Tensor& w, const std::vector<float>& s) {
  float* p = w.data<float>();
  const int64_t n = w.dim(0), k = w.dim(1);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) p[r * k + c] *= s[static_cast<size_t>(c)];
}

// v[r, :] /= s_rows[r] (a matrix's rows or a bias vector's elements), when defined.
void divide_rows(Tensor& w, const std::vector<float>& s_rows) {
  if (!w.defined()) return;
  float* p = w.data<float>();
  const int64_t n = w.dim(0), k = w.rank() == 2 ? w.dim(1) : 1;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) p[r * k + c] /= s_rows[static_cast<size_t>(r)];
}

}  // namespace

std::vector<float> tie_query_heads(const std::vector<float>& stat, const ModelConfig& c) {
  const int group = c.num_heads / c.num_kv_heads, d = c.head_dim;
  std::vector<float> tied(stat.size());
  for (int kvh = 0; kvh < c.num_kv_heads; ++kvh)
    for (int i = 0; i < d; ++i) {
      double sum = 0;
      for (int h = kvh * group; h < (kvh + 1) * group; ++h)
        sum += stat[static_cast<size_t>(h * d + i)];
      for (int h = kvh * group; h < (kvh + 1) * group; ++h)
        tied[static_cast<size_t>(h * d + i)] = static_cast<float>(sum / group);
    }
  return tied;
}

namespace {

// The scales of o_proj's input channels mapped onto v_proj's output rows.
std::vector<float> kv_rows_of(const std::vector<float>& s, const ModelConfig& c) {
  const int group = c.num_heads / c.num_kv_heads, d = c.head_dim;
  std::vector<float> rows(static_cast<size_t>(c.kv_dim()));
  for (int kvh = 0; kvh < c.num_kv_heads; ++kvh)
    for (int i = 0; i < d; ++i)
      rows[static_cast<size_t>(kvh * d + i)] = s[static_cast<size_t>(kvh * group * d + i)];
  return rows;
}

// Folds 1/s into the producer of the group's input (see the file comment).
void fold(const ModelConfig& c, LayerWeights& w, LinearInput site, const std::vector<float>& s) {
  switch (site) {
    case LinearInput::kQkv:
      divide_rows(w.attn_norm, s);
      divide_rows(w.attn_norm_bias, s);
      break;
    case LinearInput::kO: {
      const std::vector<float> rows = kv_rows_of(s, c);
      divide_rows(w.wv, rows);
      divide_rows(w.bv, rows);
      break;
    }
    case LinearInput::kGateUp:
      divide_rows(w.mlp_norm, s);
      divide_rows(w.mlp_norm_bias, s);
      break;
    case LinearInput::kDown:
      divide_rows(w.w_up, s);
      divide_rows(w.b_up, s);
      break;
  }
}

Group group_of(const ModelConfig& c, LayerWeights& w, LinearInput site, const AwqActivations& a) {
  const size_t s = static_cast<size_t>(site_index(site));
  Group g;
  g.x = a.rows[s].data();
  g.k = a.width[s];
  g.rows = g.k > 0 ? static_cast<int64_t>(a.rows[s].size()) / g.k : 0;
  switch (site) {
    case LinearInput::kQkv:
      g.mats = {&w.wq, &w.wk, &w.wv};
      break;
    case LinearInput::kO:
      g.mats = {&w.wo};
      break;
    case LinearInput::kGateUp:
      g.mats = c.mlp == MlpKind::kSwiGlu ? std::vector<Tensor*>{&w.w_gate, &w.w_up}
                                         : std::vector<Tensor*>{&w.w_up};
      break;
    case LinearInput::kDown:
      if (c.mlp == MlpKind::kSwiGlu) g.mats = {&w.w_down};  // GELU is not linear: no fold
      break;
  }
  return g;
}

}  // namespace

void apply_awq_scales(const ModelConfig& config, LayerWeights& layer, LinearInput site,
                      const std::vector<float>& s) {
  LMSTACK_CHECK(site != LinearInput::kDown || config.mlp == MlpKind::kSwiGlu,
                "AWQ: down_proj scales need a SwiGLU MLP");
  const AwqActivations none;
  for (Tensor* m : group_of(config, layer, site, none).mats) scale_columns(*m, s);
  fold(config, layer, site, s);
}

std::vector<AwqLayerChoice> apply_awq(ThreadPool& pool, const ModelConfig& config,
                                      ModelWeights& weights,
                                      const std::vector<AwqActivations>& activations,
                                      const TypeForWidth& type_for_width, int grid) {
  LMSTACK_CHECK(activations.size() == weights.layers.size(),
                "AWQ: {} activation sets for {} layers", activations.size(), weights.layers.size());
  std::vector<AwqLayerChoice> out(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    LayerWeights& w = weights.layers[l];
    for (int si = 0; si < kNumLinearInputs; ++si) {
      const LinearInput site = static_cast<LinearInput>(si);
      const Group g = group_of(config, w, site, activations[l]);
      if (g.mats.empty() || g.rows == 0) continue;
      const DType type = type_for_width(g.k);
      if (!is_quantized(type)) continue;
      std::vector<float> stat = activations[l].mean_abs[static_cast<size_t>(si)];
      if (site == LinearInput::kO) stat = tie_query_heads(stat, config);
      std::vector<float> s;
      out[l].groups[static_cast<size_t>(si)] = search_group(pool, g, stat, type, grid, &s);
      apply_awq_scales(config, w, site, s);
    }
  }
  return out;
}

}  // namespace lmstack::model
