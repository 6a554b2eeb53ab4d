// Internal to model/: the preset tables of other files that presets.cc's list joins.
#pragma once

#include <vector>

#include "lmstack/model/presets.h"

namespace lmstack::model::detail {

// presets_moe.cc: Mixtral, Qwen-MoE and DeepSeek shapes, real and tiny.
void append_moe_presets(std::vector<ModelPreset>& presets);

}  // namespace lmstack::model::detail
