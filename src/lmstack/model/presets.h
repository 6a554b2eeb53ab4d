// Model presets for `lmstack init-model`: the config.json of real checkpoints (shapes only;
// weights are random) and tiny variants for tests. Each preset is the HF config.json text, so
// it goes through the same parser as a downloaded model. Not here: calc's hardware presets.
#pragma once

#include <string>
#include <vector>

#include "lmstack/core/json.h"

namespace lmstack::model {

struct ModelPreset {
  std::string name;    // "smollm-135m", "tiny-llama"
  std::string arch;    // --arch spelling: llama, mistral, qwen2, qwen3, gpt2
  std::string source;  // where the shape comes from (HF repository or "test")
  Json config;         // HF config.json (without torch_dtype: init-model sets it)
};

const std::vector<ModelPreset>& model_presets();

// The preset called `name`; "tiny" alone means "tiny-<arch>". With a non-empty `arch` that
// differs from the preset's, a tiny preset is re-targeted to that architecture (same shapes,
// that architecture's fields) and any other preset is a RequestError. Unknown names throw
// RequestError listing the known ones.
ModelPreset find_model_preset(const std::string& name, const std::string& arch);

// HF class name for an --arch spelling (RequestError listing the spellings otherwise).
std::string architecture_for(const std::string& arch);

// Re-targets an HF config.json to another architecture: fields of the target family only.
Json convert_config(const Json& config, const std::string& arch);

}  // namespace lmstack::model
