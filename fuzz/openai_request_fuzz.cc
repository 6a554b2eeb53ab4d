// Fuzz target: an HTTP request body through the OpenAI API's request parsing (serve/
// openai_api.h), exactly as `serve` calls it: parse_chat (chat template included),
// parse_completion, tokenize and detokenize, on an engine over a tiny in-memory llama and a
// committed tokenizer with a chat template. ApiError (a 4xx) is the expected refusal.
#include <memory>

#include "fuzz_common.h"
#include "lmstack/core/thread_pool.h"
#include "lmstack/serve/engine.h"
#include "lmstack/serve/openai_api.h"
#include "lmstack/tokenizer/tokenizer.h"
#include "serve/tiny_model.h"

namespace {

struct Api {
  std::unique_ptr<lmstack::serve::test::TinyModel> model = lmstack::serve::test::make_tiny_model();
  lmstack::ThreadPool pool{1};
  lmstack::tokenizer::Tokenizer tok = lmstack::tokenizer::Tokenizer::load(
      LMSTACK_SOURCE_DIR "/tests/data/tokenizer/trained/chatml_default_roles");
  std::unique_ptr<lmstack::serve::Engine> engine;
  std::unique_ptr<lmstack::serve::OpenAiApi> api;
  Api() {
    lmstack::serve::EngineOptions o;
    o.num_blocks = 16;
    engine = std::make_unique<lmstack::serve::Engine>(model->config, model->weights, pool, o);
    api = std::make_unique<lmstack::serve::OpenAiApi>(*engine, tok, "tiny");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Api a;
  const std::string body(lmstack::fuzz::as_text(data, size));
  lmstack::fuzz::run_one([&] { a.api->parse_chat(body); });
  lmstack::fuzz::run_one([&] { a.api->parse_completion(body); });
  lmstack::fuzz::run_one([&] { a.api->tokenize(body); });
  lmstack::fuzz::run_one([&] { a.api->detokenize(body); });
  return 0;
}
