// The per-step cost of grammar-constrained sampling (serve/token_mask.h): one
// GrammarConstraint::allowed_tokens over a real vocabulary in the matcher states that cost
// the least and the most: inside a JSON string (nearly every token may follow, so the trie
// walk visits most of it), at an object key (few tokens), inside a number.
//
//   LMSTACK_BENCH_TOKENIZER=/path/to/model_dir ./build/release/bench/lmstack_serve_bench
// (anything Tokenizer::load reads; default: GPT-2's 50257-token vocabulary in the test data,
// run from the repository root; tests/data/tokenizer/o200k_base.tiktoken has 200k tokens).
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "lmstack/serve/token_mask.h"

namespace lmstack::serve {
namespace {

const tokenizer::Tokenizer& bench_tokenizer() {
  static const tokenizer::Tokenizer tok = [] {
    const char* dir = std::getenv("LMSTACK_BENCH_TOKENIZER");
    return tokenizer::Tokenizer::load(dir && *dir ? dir : "tests/data/tokenizer/gpt2");
  }();
  return tok;
}

// The constraint after `prefix`, fed one byte at a time through one-byte tokens.
std::unique_ptr<GrammarConstraint> constraint_after(const std::string& prefix) {
  static const auto trie = std::make_shared<const TokenTrie>(bench_tokenizer());
  const auto grammar = std::make_shared<const JsonGrammar>(
      JsonGrammar::from_schema(nlohmann::ordered_json::parse(R"({"type": "object", "properties":
          {"name": {"type": "string"}, "age": {"type": "number"}, "tags": {"type": "array",
           "items": {"type": "string"}}}, "required": ["name"]})"),
                               "schema"));
  const int32_t eos = bench_tokenizer().eos_id().value_or(0);
  auto c = std::make_unique<GrammarConstraint>(trie, grammar, std::vector<int32_t>{eos});
  for (unsigned char ch : prefix) {
    const std::string one(1, static_cast<char>(ch));
    for (int32_t id = 0; id < trie->vocab_size(); ++id)
      if (trie->bytes(id) == one && !trie->is_special(id)) {
        c->accept(id);
        break;
      }
  }
  return c;
}

void BM_AllowedTokens(benchmark::State& state, const char* prefix) {
  const auto c = constraint_after(prefix);
  std::vector<int32_t> allowed;
  for (auto _ : state) {
    allowed.clear();
    c->allowed_tokens(allowed);
    benchmark::DoNotOptimize(allowed.data());
  }
  state.counters["allowed"] = static_cast<double>(allowed.size());
  state.counters["vocab"] = static_cast<double>(bench_tokenizer().vocab_size());
}

// What the engine pays per step: allowed_tokens plus setting the logits (one row).
void BM_Mask(benchmark::State& state, const char* prefix) {
  const auto c = constraint_after(prefix);
  std::vector<float> logits(static_cast<size_t>(bench_tokenizer().vocab_size()), 0.0f);
  for (auto _ : state) {
    c->mask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}

BENCHMARK_CAPTURE(BM_AllowedTokens, in_string, R"({"name":"Jo)")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AllowedTokens, at_key, R"({"name":"Jo",)")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AllowedTokens, in_number, R"({"name":"Jo","age":1)")
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_AllowedTokens, start, "")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, in_string, R"({"name":"Jo)")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Mask, in_number, R"({"name":"Jo","age":1)")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lmstack::serve
