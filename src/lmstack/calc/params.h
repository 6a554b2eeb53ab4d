// Parameter count of a ModelShape, part by part (embedding, attention Q/K/V/O, MLP or experts,
// norms, lm_head), with the formula of each part. Totals match what Hugging Face reports for
// the real checkpoints (tests/calc/params_test.cc); MoE models also give the active count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lmstack/calc/model_shape.h"

namespace lmstack::calc {

struct ParamPart {
  std::string key;      // "embedding", "attn_q", ... (stable, for --json)
  std::string label;    // human name
  int64_t total = 0;    // parameters stored
  int64_t active = 0;   // parameters one token uses (== total unless routed experts)
  int64_t matmul = 0;   // active weights used in a matmul per token (the N of 2N FLOPs)
  std::string formula;  // symbols (V, h, L, ...) with the numbers substituted
};

struct ParamCount {
  std::vector<ParamPart> parts;
  int64_t total() const;
  int64_t active() const;
  // Active parameters used in matmuls per token: attention, MLP/experts, router, lm_head
  // (the tied embedding counts once, as lm_head). Excludes the embedding lookup, position
  // embeddings, norms and biases. This is N in the 2N / 6N FLOP rules.
  int64_t matmul_active() const;
  // The part with this key (0 when absent).
  int64_t get(const std::string& key) const;
};

ParamCount count_parameters(const ModelShape& m);

}  // namespace lmstack::calc
