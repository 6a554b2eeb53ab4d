// What a config's RoPE description implies for the forward: the inverse-frequency table, the
// magnitude YaRN puts on cos/sin, and the attention softmax scale. The Decoder, TrainModel and
// the pipeline stages all take them from here, so inference and training cannot disagree.
#pragma once

#include <vector>

#include "lmstack/model/config.h"

namespace lmstack::model {

// inv_freq[head_dim / 2] for c.rope_theta and c.rope_scaling (head_dim is the rotary width:
// MLA's qk_rope_head_dim). ConfigError for an unusable scaling.
std::vector<float> rope_inv_freq(const ModelConfig& c);

// YaRN's attention factor (transformers' attention_scaling): cos and sin are multiplied by it,
// so each rotated query and key is. attention_factor if given, else
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set, else
// mscale(factor) with mscale(s, m) = 0.1 · m · ln(s) + 1 (1 for s <= 1), YaRN eq. 21.
// 1 for every other scaling.
float rope_magnitude(const ModelConfig& c);

// The softmax scale of q·kᵀ. Dense: 1/sqrt(head_dim) · rope_magnitude² (every dim is rotated,
// so the magnitude on q and k is one factor on the scores). MLA: 1/sqrt(d_nope + d_R), times
// mscale(factor, mscale_all_dim)² under YaRN (DeepSeek's reference code and transformers >=
// 5.x's yarn_apply_mscale; transformers 4.57's DeepSeek-V2 class omits it, V3 applies it);
// the magnitude there touches only the rotated dims (model/mla.cc applies it to q_R and k_R).
float attention_scale(const ModelConfig& c);

}  // namespace lmstack::model
