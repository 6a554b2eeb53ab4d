// Activation-aware weight quantization (AWQ; Lin et al. 2023, arXiv 2306.00978, Sec. 3.2).
// For each group of linears reading the same input x (decoder.h LinearInput: q/k/v, o,
// gate/up, down), a per-input-channel scale s = mean|x|^alpha (normalized so that
// sqrt(max(s) * min(s)) = 1, as the authors' code does) protects salient channels: the
// deployed weight is Q(W·diag(s)) and its input x/s, with 1/s folded into the operation that
// produces x (the norm weight for q/k/v and gate/up, v_proj's rows for o_proj, up_proj's
// rows for down_proj). alpha is chosen from a grid on [0, 1) to minimize
// sum_j ||(x/s)·Q(W_j·diag(s))ᵀ − x·W_jᵀ||² over calibration activations; alpha = 0 is plain
// round-to-nearest, so the chosen error never exceeds RTN's on those activations.
// Not here: AWQ's weight-clipping search (its Sec. 3.3 "clip" step).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "lmstack/core/thread_pool.h"
#include "lmstack/model/config.h"
#include "lmstack/model/decoder.h"
#include "lmstack/model/weights.h"

namespace lmstack::model {

// What one layer's linear inputs looked like on the calibration text.
struct AwqActivations {
  std::array<std::vector<float>, kNumLinearInputs> mean_abs;  // [width] per site
  std::array<std::vector<float>, kNumLinearInputs> rows;      // sampled rows, [n, width]
  std::array<int64_t, kNumLinearInputs> width{};
};

// Runs the model over `tokens` in windows of `ctx` tokens (one sequence each) and returns,
// per layer, the mean |x| of every input channel of each linear group over all tokens plus
// up to `max_rows` rows sampled evenly across the text. `weights` must be f32 or bf16/f16
// matrices (any the Decoder runs). Throws RequestError for fewer than 2 tokens.
std::vector<AwqActivations> collect_awq_activations(ThreadPool& pool, const ModelConfig& config,
                                                    const ModelWeights& weights,
                                                    const std::vector<int32_t>& tokens, int ctx,
                                                    int max_rows);

// The search result of one linear group.
struct AwqGroupChoice {
  bool searched = false;  // false: no valid fold (GELU MLP's down) or no quantized type
  float alpha = 0;        // chosen exponent (0 = RTN)
  double rtn_error = 0;   // relative output error ||ŷ − y||² / ||y||² at alpha = 0
  double awq_error = 0;   // ... at the chosen alpha
};
struct AwqLayerChoice {
  std::array<AwqGroupChoice, kNumLinearInputs> groups;
};

// The quantized type a matrix with K input features gets (a float type: left unquantized).
using TypeForWidth = std::function<DType(int64_t k)>;

// Searches every layer's scales and folds them into `weights`, whose matrices, norms and
// biases must be writable f32 Tensors (the caller's working copy). Afterwards the f32 model
// computes the same function (up to rounding) and its matrices are ready to quantize.
std::vector<AwqLayerChoice> apply_awq(ThreadPool& pool, const ModelConfig& config,
                                      ModelWeights& weights,
                                      const std::vector<AwqActivations>& activations,
                                      const TypeForWidth& type_for_width, int grid);

// Scales s_c = max(stat_c, 1e-4)^alpha / sqrt(max(s) · min(s)) (exposed for tests).
std::vector<float> awq_scales(const std::vector<float>& stat, float alpha);
// o_proj's input statistic with the channels of query heads that share a kv head averaged, so
// scales derived from it can be folded into v_proj (GQA/MQA; identity for MHA).
std::vector<float> tie_query_heads(const std::vector<float>& stat, const ModelConfig& config);
// Multiplies the columns of the matrices that read `site` by s and divides the producer of
// that input by s (f32, writable Tensors). The f32 function is unchanged. For kO, s must be
// tied across query heads sharing a kv head (tie_query_heads); kDown needs a SwiGLU MLP.
void apply_awq_scales(const ModelConfig& config, LayerWeights& layer, LinearInput site,
                      const std::vector<float>& s);

}  // namespace lmstack::model
