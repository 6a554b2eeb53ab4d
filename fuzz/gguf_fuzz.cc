// Fuzz target: a GGUF file through the container reader (core/gguf.h), then the tokenizer
// lmstack builds from its tokenizer.* keys (tokenizer/gguf_vocab.cc) and an encode/decode.
// (gguf_model_config needs the model layer, which the fuzz build compiles for openai_request
// only; its keys are typed getters of this reader.)
#include "fuzz_common.h"
#include "lmstack/core/gguf.h"
#include "lmstack/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = lmstack::fuzz::scratch_path("input.gguf");
  lmstack::fuzz::write_input(path, lmstack::fuzz::as_text(data, size));
  lmstack::fuzz::run_one([&] {
    const lmstack::GgufFile file(path);
    const auto tok = lmstack::tokenizer::Tokenizer::from_gguf(file);
    tok.decode_text(tok.encode("Hello, 世界 <|im_end|>\n  x"));
  });
  return 0;
}
