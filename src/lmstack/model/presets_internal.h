// Internal to model/: the preset tables of other files that presets.cc's list joins.
#pragma once

#include <vector>

#include "lmstack/core/json.h"
#include "lmstack/model/presets.h"

namespace lmstack::model::detail {

// presets.cc: the config.json fields every llama-family preset shares (SiLU, RMSNorm, RoPE).
Json llama_like(const char* cls, int vocab, int hidden, int inter, int layers, int heads,
                int kv_heads, int max_pos, double theta, double eps, bool tied);

// presets_moe.cc: Mixtral, Qwen-MoE and DeepSeek shapes, real and tiny.
void append_moe_presets(std::vector<ModelPreset>& presets);

}  // namespace lmstack::model::detail
