// trainer_state.json parsing (see checkpoint_state.h).
#include "lmstack/train/checkpoint_state.h"

#include "lmstack/core/error.h"

namespace lmstack::train {

TrainerState parse_trainer_state(const std::string& text, const std::string& source) {
  const Json j = parse_json(text, source);
  if (!j.is_object()) throw_error<FormatError>("{}: expected a JSON object", source);
  TrainerState s;
  s.step = require<int64_t>(j, "step", source);
  if (s.step < 0) throw_error<FormatError>("{}: 'step' is negative ({})", source, s.step);
  s.windows_served = require<uint64_t>(j, "windows_served", source);
  s.seed = require<uint64_t>(j, "seed", source);
  s.settings = require<Json>(j, "settings", source);
  if (!s.settings.is_object()) throw_error<FormatError>("{}: 'settings' must be an object", source);
  return s;
}

}  // namespace lmstack::train
