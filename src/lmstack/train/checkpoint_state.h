// trainer_state.json of a training checkpoint (docs/formats/checkpoint.md): the step, data
// position, seed and settings a resume needs. Parsing lives apart from checkpoint.cc so the
// fuzz target (fuzz/checkpoint_state_fuzz.cc) links it without the model and optimizer.
#pragma once

#include <cstdint>
#include <string>

#include "lmstack/core/json.h"

namespace lmstack::train {

struct TrainerState {
  int64_t step = 0;             // optimizer steps completed
  uint64_t windows_served = 0;  // data position (TokenLoader)
  uint64_t seed = 0;            // seed of the data order (the only randomness of a step)
  Json settings;                // what a resume must match (Trainer fills it)
};

// Parses the text of a trainer_state.json; FormatError/ConfigError naming `source` and the
// field: invalid or too deeply nested JSON (core/json_depth.h), a missing or mistyped field,
// a negative step, settings that are not an object.
TrainerState parse_trainer_state(const std::string& text, const std::string& source);

}  // namespace lmstack::train
