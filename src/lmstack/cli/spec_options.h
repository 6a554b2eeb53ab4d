// The speculative-decoding flags `serve` and `bench serve` share (--spec, --draft-model,
// --num-spec-tokens, --spec-ngram-min/-max), and turning them into serve::SpecOptions.
// The engine side is serve/speculative.h; the choices are explained in docs/serve.md.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "lmstack/cli/model_session.h"
#include "lmstack/serve/speculative.h"

namespace lmstack::cli {

struct SpecCliOptions {
  std::string method = "none";  // none | ngram | draft (--draft-model alone implies draft)
  std::string draft_model;
  int num_tokens = 4;
  int ngram_min = 1, ngram_max = 4;
};

void add_spec_options(CLI::App& app, SpecCliOptions& o);

// The engine's options; loads --draft-model into `draft`, which must outlive the engine.
// RequestError for --spec draft without --draft-model or --draft-model with --spec ngram.
serve::SpecOptions spec_options(const SpecCliOptions& o, std::optional<ModelSession>& draft);

// "speculative decoding: ..." for start-up reports ("" when off).
std::string describe(const serve::SpecOptions& s, const SpecCliOptions& o);

}  // namespace lmstack::cli
