// The engine's per-request state, shared by its translation units (engine.cc, the serving
// loop; engine_spec.cc, speculative decoding). Not part of the engine's interface.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lmstack/serve/engine.h"

namespace lmstack::serve {

struct Engine::ActiveRequest {
  int64_t id = 0;
  EngineRequest request;
  std::shared_ptr<RequestStream> stream;
  std::vector<std::unique_ptr<Sequence>> seqs;  // choice order; more appear at the fork
  int num_finished = 0;
  bool done = false;
  double arrival = 0;
  std::optional<double> first_token;
  int completion_tokens = 0;
};

}  // namespace lmstack::serve
