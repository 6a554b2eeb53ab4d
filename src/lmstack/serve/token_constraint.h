// TokenConstraint: what a sequence may sample next, for structured output. The engine masks
// the logits before each sample and reports the sampled token after it (engine.cc); an
// implementation keeps its own state (token_mask.h's GrammarConstraint follows a JSON grammar).
// Not here: how the allowed set is computed.
//
// Thread safety: one instance per sequence, used by the engine's loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace lmstack::serve {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token that may not come next to -inf; leaves at least one finite.
  virtual void mask(std::span<float> logits) = 0;
  // The token the sequence sampled (one `mask` allowed).
  virtual void accept(int32_t token) = 0;
};

// Makes a fresh constraint for each choice of a request.
using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace lmstack::serve
