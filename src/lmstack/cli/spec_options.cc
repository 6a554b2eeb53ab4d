// Speculative-decoding flags (see spec_options.h).
#include "lmstack/cli/spec_options.h"

#include <fmt/format.h>

#include "lmstack/core/error.h"

namespace lmstack::cli {

void add_spec_options(CLI::App& app, SpecCliOptions& o) {
  app.add_option("--spec", o.method,
                 "speculative decoding: none | ngram (prompt lookup, no second model) | draft "
                 "(--draft-model)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "ngram", "draft"}));
  app.add_option("--draft-model", o.draft_model,
                 "draft model directory (same tokenizer as --model; implies --spec draft)");
  app.add_option("--num-spec-tokens", o.num_tokens, "draft tokens per sequence per step (k)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--spec-ngram-max", o.ngram_max, "--spec ngram: longest n-gram matched")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--spec-ngram-min", o.ngram_min, "--spec ngram: shortest n-gram matched")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
}

serve::SpecOptions spec_options(const SpecCliOptions& o, std::optional<ModelSession>& draft) {
  serve::SpecOptions s;
  const std::string method = o.method == "none" && !o.draft_model.empty() ? "draft" : o.method;
  s.method = serve::parse_spec_method(method);
  s.num_tokens = o.num_tokens;
  s.ngram_min = o.ngram_min;
  s.ngram_max = o.ngram_max;
  if (s.method == serve::SpecMethod::kDraft && o.draft_model.empty())
    throw_error<RequestError>("--spec draft: needs --draft-model DIR");
  if (s.method != serve::SpecMethod::kDraft && !o.draft_model.empty())
    throw_error<RequestError>("--draft-model: only with --spec draft, not --spec {}", method);
  if (s.method == serve::SpecMethod::kDraft) {
    draft = load_session(o.draft_model);
    s.draft_config = &draft->model.config;
    s.draft_weights = &draft->model.weights;
  }
  return s;
}

std::string describe(const serve::SpecOptions& s, const SpecCliOptions& o) {
  switch (s.method) {
    case serve::SpecMethod::kNone:
      return "";
    case serve::SpecMethod::kNgram:
      return fmt::format("speculative decoding: n-gram prompt lookup, k = {}, n = {}..{}",
                         s.num_tokens, s.ngram_max, s.ngram_min);
    case serve::SpecMethod::kDraft:
      return fmt::format("speculative decoding: draft model {} ({} parameters), k = {}",
                         o.draft_model, s.draft_config->num_parameters(), s.num_tokens);
  }
  return "";
}

}  // namespace lmstack::cli
